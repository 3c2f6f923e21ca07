"""Forged Parquet rows (storage.schemas.FORGED) and task folders: the one row constructor, a row
from a clawloop task folder on disk (import), and rows written back out as folders (export).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

from clawloop.harness.taskfolder.folder import (
    DEFAULT_ORG,
    TaskFolder,
    TaskFolderError,
    _load_task_toml,
    _table,
    check_task_id,
    harbor_name,
    read_instruction,
    set_task_name,
    strict_harbor_task_info,
)
from clawloop.harness.taskfolder.packing import check_folder_size, pack_dir, unpack_tar


def forged_row(cand: dict[str, Any], **values: Any) -> dict[str, Any]:
    """The one constructor of FORGED rows (storage.schemas.FORGED): a failed row for candidate
    `cand` unless `values` say otherwise (forge and import fill in the task)."""
    row = {
        "task_id": str(cand.get("task_id", "")),
        "status": "failed",
        "error": "",
        "error_kind": "",
        "attempts": 0,
        "build_log": "",
        "task_sha256": "",
        "rebuild_sha256": "",
        "task_tar": b"",
        "capability": str(cand.get("capability", "")),
        "domain": str(cand.get("domain", "")),
        "split": str(cand.get("split", "")),
    }
    row.update(values)
    return row


def import_folder(task_dir: Path) -> dict[str, Any]:
    """A forged row (storage.schemas.FORGED columns) from a clawloop task folder on disk."""
    task_dir = Path(task_dir)
    for need in ("task.toml", "instruction.md", "tests/test.sh", "environment"):
        if not (task_dir / need).exists():
            raise TaskFolderError(f"{task_dir}: missing {need}; not a Harbor task folder")
    check_folder_size(task_dir)
    strict_harbor_task_info(task_dir)
    read_instruction(task_dir)
    info = TaskFolder.read_clawloop(task_dir).info
    return forged_row(
        dataclasses.asdict(info),
        status="ok",
        build_log=f"imported from {task_dir}",
        task_sha256=info.task_sha256,
        task_tar=pack_dir(task_dir),
    )


def export_rows(rows: list[dict[str, Any]], out_dir: Path, org: str = DEFAULT_ORG) -> list[Path]:
    """Write each forged-ok row's tar as out_dir/<task_id>/ with [task] name "<org>/<task_id>"
    (what Harbor requires; rows forged before names had an org get one); returns the folders."""
    out_dir = Path(out_dir)
    written = []
    for row in rows:
        if row.get("status") != "ok" or not row.get("task_tar"):
            continue
        task_id = check_task_id(row["task_id"], "export")
        name = harbor_name(task_id, org)
        # Written beside its final place and renamed there once whole: an export that fails
        # part-way (a bad tar, a full disk) leaves no half-written task folder.
        out_dir.mkdir(parents=True, exist_ok=True)
        part = Path(tempfile.mkdtemp(prefix=f".{task_id}.partial-", dir=out_dir))
        try:
            folder = unpack_tar(row["task_tar"], part / task_id)
            doc = _load_task_toml(folder / "task.toml")
            # A foreign Harbor task (no [metadata.clawloop]) keeps the org/name it came with.
            claw = _table(doc, "metadata", "clawloop")
            if claw or "/" not in str(_table(doc, "task").get("name")):
                set_task_name(folder, name)
            final = out_dir / task_id
            if final.exists():
                shutil.rmtree(final)
            folder.rename(final)
        finally:
            shutil.rmtree(part, ignore_errors=True)
        written.append(final)
    return written
