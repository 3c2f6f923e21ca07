"""Reference trajectories by execution: grounded plans run on the domain's tools, in a sandbox.

The host never runs domain code. `run_plans` writes the task's workspace (snapshot, tools,
runtime) to a scratch folder, uploads it into one fresh sandbox with the plans, and runs
`skills/_lib/runtime.py` there. The sandbox reads the snapshot from the workspace's files once;
each plan runs in its own process on a copy, bounded to `plan_memory_mb(sandbox)` MiB beyond the
snapshot and PLAN_SECONDS, and every step is checked against what it must do (succeed, or be
refused for a recovery path). What comes back is JSON lines only, one per plan as it ends: its
trace and its final state as a delta against the initial one (runtime.delta), read with a size
cap: the sandbox's output is data, never code or SQL for the host to run.

The initial state is not sent back: the host computes it from the files it wrote, with the
runtime's own data functions (a sqlite domain's dump is the host's own `iterdump`, loaded in
memory). A plan that fails, runs out of memory or time, or has no result because the executor
stopped is a PlanRun with ok=False and the reason: one plan is dropped, never the whole call.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawloop.harness.sandbox.backend import open_sandbox
from clawloop.harness.sandbox.base import WORKSPACE, SandboxConfig
from clawloop.harness.sandbox.scratch import scratch
from clawloop.harness.taskenv import read_remote_text
from clawloop.synthesis.domain import runtime

STAGE = "/tmp/clawloop-domain"
MAX_RESULT_BYTES = 64 * 1024 * 1024
PLAN_SECONDS = runtime.PLAN_SECONDS
BASE_SECONDS = 60  # the executor's own start-up (loading and copying the snapshot), per call
Tables = dict[str, list[dict[str, Any]]]


class ExecutionError(RuntimeError):
    """The reference executor itself failed (kept for callers; plans' failures are PlanRuns)."""


@dataclass(frozen=True)
class PlanRun:
    ok: bool
    why: str
    trace: list[dict[str, Any]]
    final: Tables
    peak_mb: float = 0.0  # the peak resident memory of the plan's process, as measured there


def plan_memory_mb(sandbox: SandboxConfig) -> int:
    """The memory one plan may use beyond the loaded snapshot: runtime.PLAN_MEMORY_MB, at most
    half the sandbox's (the other half holds the snapshot the plans are copied from)."""
    return min(runtime.PLAN_MEMORY_MB, sandbox.limits.memory_mb // 2)


def initial_state(files: dict[str, str]) -> Tables:
    """The workspace's starting state as {table: [record]}, as the runtime sees it."""
    spec = json.loads(files["skills/_lib/tools.json"])
    with tempfile.TemporaryDirectory(prefix="clawloop-state-") as tmp:
        path = Path(tmp, spec["state"])
        prefix = spec["state"].rstrip("/") + "/"
        for rel, text in files.items():
            if rel == spec["state"] or rel.startswith(prefix):
                Path(tmp, rel).parent.mkdir(parents=True, exist_ok=True)
                Path(tmp, rel).write_text(text)
        if spec["store"] == "json":
            path.mkdir(parents=True, exist_ok=True)
        state = runtime.load_state(tmp, spec)
        try:
            return runtime.as_records(spec, state)
        finally:
            if spec["store"] == "sqlite":
                state.close()


def _run(doc: dict[str, Any], initial: Tables) -> PlanRun:
    final = doc.get("final")
    return PlanRun(
        bool(doc.get("ok")),
        str(doc.get("why", "")),
        list(doc.get("trace", [])),
        runtime.apply_delta(initial, final) if isinstance(final, dict) else {},
        float(doc.get("peak_mb", 0.0)),
    )


def parse_results(text: str, n: int, initial: Tables, missing: str) -> list[PlanRun]:
    """One PlanRun per plan from the executor's JSON lines; a plan with no (readable) line gets
    ok=False and `missing` as its reason."""
    got: dict[int, PlanRun] = {}
    for line in text.splitlines():
        try:
            doc = json.loads(line)
            got[int(doc["plan"])] = _run(doc, initial)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            if line.strip() and line.endswith("}"):  # a whole line that does not read: say so
                missing = f"the executor wrote an unreadable result ({exc})"
    return [got.get(i, PlanRun(False, missing, [], {})) for i in range(n)]


def run_plans(
    files: dict[str, str], plans: list[dict[str, Any]], sandbox: SandboxConfig, timeout: float = 120
) -> tuple[Tables, list[PlanRun]]:
    """(initial state, one PlanRun per plan). Raises SandboxError for the sandbox's own faults;
    everything else (a plan failing, over its limits, the executor stopping) is a PlanRun."""
    initial = initial_state(files)
    memory = plan_memory_mb(sandbox)
    with scratch("clawloop-domain-") as tmp:
        ws, stage = Path(tmp, "workspace"), Path(tmp, "stage")
        for rel, text in files.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
        stage.mkdir()
        doc = {"plans": plans, "memory_mb": memory, "seconds": PLAN_SECONDS}
        (stage / "plans.json").write_text(json.dumps(doc))
        with open_sandbox(sandbox) as sb:
            sb.upload(ws, WORKSPACE)
            sb.upload(stage, STAGE)
            res = sb.exec(
                [
                    "python3",
                    "-I",
                    "-S",
                    f"{WORKSPACE}/skills/_lib/runtime.py",
                    f"{STAGE}/plans.json",
                    f"{STAGE}/out.jsonl",
                ],
                timeout=max(timeout, BASE_SECONDS + 2 * len(plans)),
            )
            text = read_remote_text(sb, f"{STAGE}/out.jsonl", cap=MAX_RESULT_BYTES) or ""
    why = "timed out" if res.timed_out else f"exited {res.exit_code}"
    tail = " | ".join((res.stderr or res.stdout).strip().splitlines()[-3:])
    missing = f"the reference executor {why} before this plan ended" + (f": {tail}" if tail else "")
    return initial, parse_results(text, len(plans), initial, missing)
