"""Forge: candidate rows -> Harbor task folders as FORGED rows; deterministic tars; import/export."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tomllib
from pathlib import Path

import pytest

from clawloop.generators.candidates import candidate_row, task_id_for
from clawloop.generators.contract import validate_build
from clawloop.generators.forge import forge_candidate
from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
from clawloop.harness.taskfolder.folder import (
    TaskFolderError,
    TaskInfo,
    read_task_info,
    render_instruction,
    task_files,
    write_task_folder,
)
from clawloop.harness.taskfolder.packing import pack_dir, pack_files, unpack_tar
from clawloop.harness.taskfolder.rows import export_rows, import_folder
from clawloop.storage.schemas import FORGED

FIXTURES = Path(__file__).parents[1] / "fixtures" / "generators"
BWRAP = SandboxConfig(backend="bwrap")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.py").read_text()


def sample_build():
    return validate_build(
        {
            "instruction": "Total the kilograms per hive.",
            "files": {"harvest.csv": "hive,kg\nHV-1,2.5\n", "notes/readme.txt": "hi\n"},
            "answer": {"output/totals.json": {"HV-1": 2.5}},
            "contract": {
                "outputs": [
                    {"path": "output/totals.json", "format": "json", "schema": {"type": "object"}}
                ],
                "tolerance": {"abs": 0.01, "rel": 0.0},
                "decisions": ["Round half-up to 2 decimals"],
            },
        }
    )


def sample_info(**kw) -> TaskInfo:
    base = dict(
        task_id="t1",
        capability="domain_calculation",
        domain="apiculture",
        seed=3,
        multihop=1,
        dirtiness=2,
        output_format="json",
        generator_sha256="ab" * 32,
        origin="builtin",
        title="Totals",
        task_sha256="cd" * 32,
    )
    base.update(kw)
    return TaskInfo(**base)


def test_task_folder_layout_and_toml(tmp_path: Path) -> None:
    folder = write_task_folder(tmp_path / "t1", sample_build(), fixture("good"), sample_info())
    for rel in (
        "task.toml",
        "instruction.md",
        "environment/Dockerfile",
        "environment/workspace/harvest.csv",
        "environment/workspace/notes/readme.txt",
        "solution/solve.sh",
        "solution/generator.py",
        "tests/test.sh",
        "tests/grader.py",
        "tests/answer.json",
        "tests/contract.json",
    ):
        assert (folder / rel).is_file(), rel
    doc = tomllib.loads((folder / "task.toml").read_text())
    assert doc["task"]["name"] == "clawloop/t1"  # Harbor requires org/name
    assert doc["verifier"]["timeout_sec"] > 0 and doc["agent"]["timeout_sec"] > 0
    assert doc["environment"]["network_mode"] == "no-network"
    assert doc["environment"]["cpus"] == 1 and doc["environment"]["memory_mb"] > 0
    claw = doc["metadata"]["clawloop"]
    assert claw["seed"] == 3 and claw["multihop"] == 1 and claw["dirtiness"] == 2
    assert claw["generator_sha256"] == "ab" * 32 and claw["origin"] == "builtin"
    assert read_task_info(folder) == sample_info()
    assert "FROM clawloop-base:latest" in (folder / "environment/Dockerfile").read_text()
    test_sh = (folder / "tests/test.sh").read_text()
    assert test_sh.index("rm -f /logs/verifier/reward.*") < test_sh.index("grader.py")
    # The answer key stays hidden under tests/, never in the workspace or the instruction.
    assert json.loads((folder / "tests/answer.json").read_text()) == {
        "output/totals.json": {"HV-1": 2.5}
    }
    assert not (folder / "environment/workspace/output").exists()
    assert '"HV-1": 2.5' not in (folder / "instruction.md").read_text()


def test_instruction_renders_contract() -> None:
    text = render_instruction(sample_build())
    assert text.startswith("Total the kilograms per hive.")
    assert "`output/totals.json` (json)" in text and "Round half-up to 2 decimals" in text
    assert "absolute difference of 0.01" in text


def test_pack_is_deterministic_and_roundtrips(tmp_path: Path) -> None:
    a = write_task_folder(tmp_path / "a", sample_build(), fixture("good"), sample_info())
    b = write_task_folder(tmp_path / "b", sample_build(), fixture("good"), sample_info())
    (b / "task.toml").touch()  # a different mtime must not change the tar
    assert pack_dir(a) == pack_dir(b)
    out = unpack_tar(pack_dir(a), tmp_path / "c")
    assert pack_dir(out) == pack_dir(a)
    assert (out / "tests/test.sh").stat().st_mode & 0o111
    with tarfile.open(fileobj=io.BytesIO(pack_dir(a))) as tar:
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())


def test_pack_files_equals_packing_the_written_folder(tmp_path: Path) -> None:
    """Forge packs a task straight from memory; it must be the tar of the folder on disk."""
    build, info = sample_build(), sample_info()
    folder = write_task_folder(tmp_path / "t", build, fixture("good"), info)
    blob = pack_files(task_files(build, fixture("good"), info))
    assert blob == pack_dir(folder)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        names = tar.getnames()
    # Folders get their own entries, parents included, as pack_dir writes them.
    assert {"environment", "environment/workspace", "environment/workspace/notes"} <= set(names)


@pytest.mark.parametrize(
    "name, kind",
    [("../evil", tarfile.REGTYPE), ("/abs", tarfile.REGTYPE), ("link", tarfile.SYMTYPE)],
)
def test_unpack_refuses_unsafe_members(tmp_path: Path, name: str, kind: bytes) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = "/etc/passwd"
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(TaskFolderError):
        unpack_tar(buf.getvalue(), tmp_path / "x")


def test_export_import_roundtrip(tmp_path: Path) -> None:
    folder = write_task_folder(tmp_path / "t1", sample_build(), fixture("good"), sample_info())
    row = import_folder(folder)
    assert set(row) == set(FORGED.names)
    assert row["task_id"] == "t1" and row["task_sha256"] == "cd" * 32 and row["status"] == "ok"
    written = export_rows(
        [row, {"task_id": "bad", "status": "failed", "task_tar": b""}], tmp_path / "out"
    )
    assert written == [tmp_path / "out" / "t1"]
    assert pack_dir(written[0]) == row["task_tar"]
    with pytest.raises(TaskFolderError, match="missing"):
        import_folder(tmp_path / "out")


@needs_bwrap
def test_forge_good_candidate() -> None:
    cand = candidate_row(fixture("good"), 5, origin="builtin")
    assert cand["task_id"] == task_id_for(cand["generator_sha256"], 5)
    row = forge_candidate(cand, BWRAP)
    assert set(row) == set(FORGED.names)
    assert row["status"] == "ok", row["error"]
    assert row["attempts"] == 1 and row["error_kind"] == ""
    assert row["task_sha256"] != "" and row["rebuild_sha256"] == ""  # verify builds it again
    again = forge_candidate(cand, BWRAP)
    assert again["task_tar"] == row["task_tar"]  # same candidate, byte-identical task


@needs_bwrap
@pytest.mark.parametrize("name, kind", [("wrong_shape", "contract"), ("writes_gigabytes", "crash")])
def test_forge_generator_bug_is_a_failed_row_not_retried(name: str, kind: str) -> None:
    row = forge_candidate(candidate_row(fixture(name), 1), BWRAP)
    assert row["status"] == "failed" and row["error_kind"] == kind
    assert row["attempts"] == 1 and row["task_tar"] == b""
    assert "Planted:" in row["error"] and "seed 1" in row["error"]


@needs_bwrap
def test_a_nondeterministic_generator_forges_and_fails_verify_determinism() -> None:
    from clawloop.generators.verify import verify_task

    row = forge_candidate(candidate_row(fixture("nondeterministic"), 1), BWRAP)
    assert row["status"] == "ok", row["error"]
    checks, verdict = verify_task(row, BWRAP)
    det = next(c for c in checks if c["check"] == "determinism")
    assert not det["passed"] and "differ" in det["reason"] and not verdict["kept"]


def test_forge_retries_transient_sandbox_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    import clawloop.generators.forge as forge

    calls = []

    def flaky(cand, sandbox, timeout):
        calls.append(1)
        raise SandboxError("engine went away")

    monkeypatch.setattr(forge, "_forge_once", flaky)
    monkeypatch.setattr(forge, "RETRY_BACKOFF_S", 0.0)
    row = forge.forge_candidate(candidate_row(fixture("good"), 1), BWRAP, retries=3)
    # Retried up to 3 times: 1 + 3 attempts.
    assert len(calls) == 4 and row["attempts"] == 4 and "attempt 4/4" in row["error"]
    assert (
        row["status"] == "failed"
        and row["error_kind"] == "sandbox"
        and "engine went away" in row["error"]
    )

    calls.clear()
    outcomes = [
        SandboxError("blip"),
        {
            "status": "ok",
            "task_sha256": "x",
            "rebuild_sha256": "x",
            "task_tar": b"t",
            "build_log": "",
            "capability": "c",
            "domain": "d",
        },
    ]

    def once_flaky(cand, sandbox, timeout):
        calls.append(1)
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    monkeypatch.setattr(forge, "_forge_once", once_flaky)
    row = forge.forge_candidate(candidate_row(fixture("good"), 1), BWRAP, retries=3)
    assert row["status"] == "ok" and row["attempts"] == 2

    calls.clear()
    monkeypatch.setattr(forge, "_forge_once", flaky)
    row = forge.forge_candidate(candidate_row(fixture("good"), 1), BWRAP, retries=0)
    assert len(calls) == 1 and row["attempts"] == 1 and row["error_kind"] == "sandbox"
