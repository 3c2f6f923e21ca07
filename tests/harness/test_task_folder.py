"""One task object (harness/taskfolder/folder.py): TaskInfo reads any Harbor task.toml (the
provenance left empty for a foreign one), TaskFolder carries a folder's paths, task.toml and
contract, and a forged row's ids win over the folder's."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawloop.harness.taskfolder.folder import (
    TaskFolder,
    TaskFolderError,
    TaskInfo,
    read_task_info,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"


def _foreign(tmp_path: Path) -> Path:
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "task.toml").write_text(
        '[task]\nname = "org/f1"\n[metadata]\ncategory = "audit"\n[agent]\ntimeout_sec = 30\n'
    )
    (tmp_path / "f" / "instruction.md").write_text("Do it.\n")
    return tmp_path / "f"


def test_a_foreign_folder_reads_with_empty_provenance(tmp_path):
    task = TaskFolder.read(_foreign(tmp_path))
    assert task.info == TaskInfo(task_id="f1", capability="audit", agent_timeout_sec=30.0)
    assert task.contract() is None and task.instruction() == "Do it.\n"
    assert task.workspace == task.root / "environment" / "workspace"
    with pytest.raises(TaskFolderError, match="no \\[metadata.clawloop\\] table"):
        TaskFolder.read_clawloop(task.root)


def test_incomplete_provenance_names_what_is_missing(tmp_path):
    folder = _foreign(tmp_path)
    with (folder / "task.toml").open("a") as f:
        f.write('[metadata.clawloop]\ncapability = "audit"\nseed = 1\n')
    with pytest.raises(TaskFolderError, match="incomplete \\(missing domain, multihop"):
        read_task_info(folder)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_a_row_names_the_task_and_task_toml_the_rest(name):
    root = FIXTURES / name
    plain = TaskFolder.read(root)
    task = TaskFolder.for_row(root, {"task_id": "x1", "capability": "c"})
    assert (task.task_id, task.info.capability, task.info.split) == ("x1", "c", "train")
    assert task.info.agent_timeout_sec == plain.info.agent_timeout_sec
    blank = TaskFolder.for_row(root, {})
    assert (blank.task_id, blank.info.capability) == (name, "")
