"""For verify's batching tests: recording the size of each batch handed to one of its batch
functions (grade_jobs: the gradings one sandbox runs; solve_each: the built-in solutions one
interpreter runs), editing a forged task, and reading verify's results."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def batch_sizes(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """A list that fills, call by call, with the length of the job list passed to verify's
    <name> (grade_jobs, solve_each), which still runs: replaced in every module of
    clawloop.generators.verify that holds it, so calls from one verify module to another count."""
    import clawloop.generators.verify as verify

    holders = [
        m
        for m in list(sys.modules.values())
        if getattr(m, "__name__", "").startswith(verify.__name__) and hasattr(m, name)
    ]
    real = getattr(holders[0], name)
    sizes: list[int] = []

    def counting(*args: Any) -> Any:
        sizes.append(next(len(a) for a in args if isinstance(a, list)))
        return real(*args)

    for m in holders:
        if getattr(m, name) is real:
            monkeypatch.setattr(m, name, counting)
    return sizes


def edited(row: dict, tmp_path: Path, edit: Callable[[Path], None]) -> dict:
    """A FORGED row whose task folder `edit` changed (unpacked under tmp_path, then repacked)."""
    from clawloop.harness.taskfolder.packing import pack_dir, unpack_tar

    folder = unpack_tar(row["task_tar"], tmp_path / "task")
    edit(folder)
    return dict(row, task_tar=pack_dir(folder))


def kept(results: list) -> list[bool]:
    """Each verify result's verdict: kept or not."""
    return [v["kept"] for _, v in results]


def by_check(result: tuple) -> dict[str, dict]:
    """One verify result's CHECKS rows by check name."""
    return {c["check"]: c for c in result[0]}
