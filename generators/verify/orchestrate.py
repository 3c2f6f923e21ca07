"""verify_task / verify_tasks: each forged row through the host checks (host_checks.py), its
reference solution (sandboxed.py: alone, or a batch of built-in ones in one interpreter) and its
grading (grading.py: a batch in one sandbox), then its CHECKS rows and VERDICTS row, the rows a
task gets alone whatever batch it was in. `VerifyConfig` is the stage's `verify:` section."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clawloop.generators.runner import (
    SolveJob,
    solve_each,
)
from clawloop.generators.verify.grading import (
    Graded,
    copied_job,
    grade_jobs,
    is_canonical,
    put_entries,
)
from clawloop.generators.verify.host_checks import HOST_CHECKS, builtin_source
from clawloop.generators.verify.sandboxed import (
    REBUILD_TIMEOUT_S,
    SolveStep,
    check_determinism,
    rebuilt_verdict,
    sandbox_verdicts,
    solve_driver,
    solve_in_sandbox,
)
from clawloop.generators.verify.taskfiles import TaskFiles, check_row, under
from clawloop.harness.sandbox.backend import open_sandbox
from clawloop.harness.sandbox.base import (
    WORKSPACE,
    SandboxConfig,
)
from clawloop.harness.taskfolder.folder import (
    TaskFolderError,
    parse_harbor_task_info,
    parse_task_info,
)
from clawloop.harness.taskfolder.packing import tar_files


class VerifyConfig(BaseModel):
    """Settings of the verify stage (how its tasks are batched over `verify_tasks` calls); also the
    run YAML's `verify:` section, field for field."""

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(2, ge=1, le=256, description="batches of tasks verified concurrently")
    batch: int = Field(
        8,
        ge=1,
        le=64,
        description="tasks per batch: each task's reference solution runs in a sandbox of its "
        "own, then one grading interpreter grades the batch (the verdicts do not depend on it)",
    )


def _rebuild_of(row: dict[str, Any], task: TaskFiles) -> tuple[int, str] | None:
    """(seed, forge's digest) when the determinism rebuild can follow the reference solution:
    forge recorded one digest and the task's solve.sh runs its generator."""
    first, second = row.get("task_sha256") or "", row.get("rebuild_sha256") or ""
    if not first or second or solve_driver(task) is None:
        return None
    try:
        return parse_task_info(task.text("task.toml", ""), task.name).seed, first
    except (TaskFolderError, FileNotFoundError):
        return None


@dataclasses.dataclass
class _Verifying:
    """A task between verify's two halves: the host checks' rows and its sandbox's first exec."""

    row: dict[str, Any]
    task: TaskFiles | None
    checks: list[dict[str, Any]]
    verdict: dict[str, Any]
    rebuild: tuple[int, str] | None = None
    solved: SolveStep | None = None
    error: str = ""  # why the sandbox part could not run


def _start(forged_row: dict[str, Any], sandbox: SandboxConfig) -> _Verifying:
    task_id = str(forged_row.get("task_id", ""))
    verdict = {
        "task_id": task_id,
        "kept": False,
        "reason": "",
        "capability": forged_row.get("capability", ""),
        "domain": forged_row.get("domain", ""),
        "split": forged_row.get("split", ""),
    }
    state = _Verifying(forged_row, None, [], verdict)
    if forged_row.get("status") != "ok" or not forged_row.get("task_tar"):
        err = forged_row.get("error") or "no task folder"
        state.checks.append(check_row(task_id, "forge", False, f"forge failed: {err}"))
        verdict["reason"] = f"forge: {err}"
        return state
    try:
        # Read once, into memory: the host-side checks read it there and the sandbox gets it
        # from there (no folder on disk in between).
        task = TaskFiles(tar_files(forged_row["task_tar"]), task_id or "task")
    except TaskFolderError as exc:
        state.checks.append(check_row(task_id, "unpack", False, str(exc)))
        verdict["reason"] = f"unpack: {exc}"
        return state
    state.task = task
    # Forge builds once: the second build runs after the reference solution, in its interpreter
    # (check_determinism rebuilds in a sandbox of its own when that solution is not the
    # generator's, or compares the digests of a row that has two).
    state.rebuild = _rebuild_of(forged_row, task)
    if state.rebuild is None:
        _run(state, "determinism", lambda: check_determinism(forged_row, task, sandbox))
    for name, check in HOST_CHECKS:
        _run(state, name, functools.partial(check, task))
    return state


def _task_of(state: _Verifying) -> TaskFiles:
    """The task folder of a task that reached the sandbox checks (only unpacked ones do)."""
    if state.task is None:
        raise RuntimeError(
            f"verify: task {state.verdict['task_id']!r} reached the sandbox checks without an "
            "unpacked task folder (a bug in verify's orchestration: only unpacked tasks go on)"
        )
    return state.task


def _solve_alone(state: _Verifying, sandbox: SandboxConfig, defer: bool) -> None:
    task = _task_of(state)
    try:
        state.solved = solve_in_sandbox(task, sandbox, state.rebuild, defer)
    except (OSError, ValueError, ImportError) as exc:
        state.error = f"could not run: {type(exc).__name__}: {exc}"


def _together(state: _Verifying) -> bool:
    """Can the task's reference solution run in one interpreter with other tasks'? Only a
    built-in generator's (this project's code) with the canonical solve.sh and test side."""
    task = state.task
    return (
        task is not None
        and solve_driver(task) is not None
        and is_canonical(under(task.entries, "tests/"))
        and builtin_source(task.text("solution/generator.py", ""))
    )


def _solve_together(states: list[_Verifying], sandbox: SandboxConfig) -> None:
    """The reference solutions (and determinism rebuilds) of built-in tasks in one fresh
    sandbox and one interpreter (runner.solve_each), task i's starting workspace at
    /workspace/i; each solved workspace is copied out as its GradeJob. A task this leaves
    without one (a failed solve or rebuild, a job the interpreter never reached, a workspace
    that cannot be copied) is left for solve_in_sandbox, alone."""
    box = open_sandbox(sandbox)  # not started yet
    if getattr(box, "read_tree", None) is None:
        return  # a backend without direct file access (docker): each alone
    jobs, files = [], {}
    for i, state in enumerate(states):
        task = _task_of(state)
        header = parse_harbor_task_info(task.text("task.toml", ""), Path(task.name))
        gen = solve_driver(task)
        if gen is None:
            raise RuntimeError(
                f"verify: task {task.name!r} was batched with built-in solves but its "
                "solution/solve.sh is not the canonical one (a bug in verify's _together)"
            )
        files[str(i)] = None
        for rel, entry in under(task.entries, "environment/workspace/").items():
            files[f"{i}/{rel}"] = entry
        seed = None if state.rebuild is None else state.rebuild[0]
        jobs.append(
            SolveJob(
                gen,
                task.text("solution/generator.py"),
                f"{WORKSPACE}/{i}",
                header.agent_timeout_sec,
                seed,
                REBUILD_TIMEOUT_S,
            )
        )
    with box as sb:
        put_entries(sb, WORKSPACE, files)
        solved = solve_each(sb, jobs)
        for i, (state, done) in enumerate(zip(states, solved, strict=True)):
            if done is None:
                continue
            job = copied_job(sb, f"{WORKSPACE}/{i}", _task_of(state))
            if job is None:
                continue
            out = (
                {}
                if state.rebuild is None
                else {"determinism": rebuilt_verdict(state.rebuild[1], done.rebuild)}
            )
            state.solved = SolveStep(out, None, job=job)


def _run(state: _Verifying, name: str, fn: Any) -> None:
    try:
        result = fn()
        if result is None:  # the check does not apply to this task: no row
            return
        ok, reason = result
    except (OSError, ValueError) as exc:  # a SandboxError is the engine's: it propagates
        ok, reason = False, f"could not run: {type(exc).__name__}: {exc}"
    state.checks.append(check_row(state.verdict["task_id"], name, ok, reason))


def _finish(state: _Verifying, sandbox: SandboxConfig) -> tuple[list[dict], dict[str, Any]]:
    checks, verdict, task_id = state.checks, state.verdict, state.verdict["task_id"]
    if state.task is None:
        return checks, verdict
    results: dict[str, tuple[bool, str]] = {}
    if state.error:
        checks.append(check_row(task_id, "oracle", False, state.error))
    elif state.solved is not None:
        try:
            results = sandbox_verdicts(state.solved)
        except (OSError, ValueError) as exc:
            checks.append(
                check_row(task_id, "oracle", False, f"could not run: {type(exc).__name__}: {exc}")
            )
    if state.rebuild is not None:
        if "determinism" not in results:
            row, task = state.row, state.task
            _run(state, "determinism", lambda: check_determinism(row, task, sandbox))
        else:
            checks.append(check_row(task_id, "determinism", *results.pop("determinism")))
        checks.insert(0, checks.pop())  # the determinism row first, as always
    for name, (ok, reason) in results.items():
        checks.append(check_row(task_id, name, ok, reason))
    failed = [c for c in checks if not c["passed"]]
    verdict["kept"] = not failed
    verdict["reason"] = (
        f"{failed[0]['check']}: {failed[0]['reason']}" if failed else "all checks passed"
    )
    return checks, verdict


def verify_tasks(
    forged_rows: list[dict[str, Any]], sandbox: SandboxConfig
) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """verify_task for each row, the same rows it would give, batched: the built-in tasks'
    reference solutions run in one sandboxed interpreter (_solve_together), every other task's
    in a sandbox of its own, and then one sandbox and one interpreter grade every task whose
    test side is ours (grade_jobs) instead of one each. A fault of the sandbox itself raises
    SandboxError (retry the rows)."""
    batch = len(forged_rows) > 1
    states = [_start(row, sandbox) for row in forged_rows]
    together = [s for s in states if batch and _together(s)]
    if len(together) > 1:
        # What this leaves unsolved is solved alone below, and a fault reported there.
        with contextlib.suppress(OSError, ValueError, ImportError):
            _solve_together(together, sandbox)
    for s in states:
        if s.task is not None and s.solved is None:
            _solve_alone(s, sandbox, defer=batch)
    waiting = [s for s in states if s.solved is not None and s.solved.job is not None]
    if waiting:
        try:
            graded = grade_jobs([s.solved.job for s in waiting], sandbox)  # type: ignore[union-attr]
        except (OSError, ValueError) as exc:
            for s in waiting:
                s.error = f"could not run: {type(exc).__name__}: {exc}"
        else:
            for s, g in zip(waiting, graded, strict=True):
                if isinstance(g, Graded):
                    s.solved.graded = g  # type: ignore[union-attr]
                else:
                    s.error = f"could not run: {type(g).__name__}: {g}"
    return [_finish(s, sandbox) for s in states]


def verify_task(
    forged_row: dict[str, Any], sandbox: SandboxConfig
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """CHECKS rows and one VERDICTS row for a FORGED row; the verdict names the first failed
    check. A fault of the sandbox itself raises SandboxError: it says nothing about the task, so
    the caller retries it rather than record it as a verdict."""
    return verify_tasks([forged_row], sandbox)[0]
