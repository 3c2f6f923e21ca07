"""A forged task's files as verify reads them: in memory (packing.tar_files entries), never written
to disk; and the CHECKS row every check writes (a warning is a passing row that says what it saw)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from clawloop.harness.taskfolder.packing import pack_dir, tar_files

# A passing CHECKS row whose reason opens with this is a warning: what the check read may be
# wrong (prose read as a field name), so it keeps the task and says what it saw.
WARNING = "warning: "


def warning(reason: str) -> str:
    return WARNING + reason


def is_warning(check: dict[str, Any]) -> bool:
    """A kept task's note: a passing row whose reason is a warning."""
    return bool(check.get("passed")) and str(check.get("reason", "")).startswith(WARNING)


def check_row(task_id: str, name: str, passed: bool, reason: str) -> dict[str, Any]:
    """One CHECKS row: only what the check found, no timing, so a re-run writes the same bytes."""
    return {"task_id": task_id, "check": name, "passed": bool(passed), "reason": reason}


Entries = dict[str, tuple[bytes, bool] | None]
_MISSING: Any = object()


class TaskFiles:
    """A task folder's files in memory (packing.tar_files entries): what the host-side checks
    read, so verify never writes the folder it was handed as a tar to disk."""

    def __init__(self, entries: Entries, name: str = "task") -> None:
        self.entries = entries
        self.name = name

    @classmethod
    def of(cls, task: Path | TaskFiles) -> TaskFiles:
        """`task` itself, or the folder at that path read into memory."""
        return task if isinstance(task, TaskFiles) else cls(tar_files(pack_dir(task)), task.name)

    def text(self, rel: str, default: Any = _MISSING) -> str:
        entry = self.entries.get(rel)
        if entry is None:
            if default is _MISSING:
                raise FileNotFoundError(f"{self.name}/{rel}: no such file in the task folder")
            return default
        return entry[0].decode(errors="replace")

    def json(self, rel: str) -> Any:
        return json.loads(self.text(rel))

    @functools.cached_property
    def workspace(self) -> dict[str, str]:
        """The starting workspace's files' texts, by path relative to it, sorted."""
        top = "environment/workspace/"
        return {
            rel[len(top) :]: e[0].decode(errors="replace")
            for rel, e in sorted(self.entries.items())
            if rel.startswith(top) and e is not None
        }


def under(files: Entries, prefix: str) -> Entries:
    """The entries below `prefix` (a folder of the task), relative to it."""
    return {rel[len(prefix) :]: e for rel, e in files.items() if rel.startswith(prefix)}
