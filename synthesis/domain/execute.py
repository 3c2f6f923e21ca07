"""Reference trajectories by execution: grounded plans run on the domain's tools, in a sandbox.

The host never runs domain code. `run_plans` writes the task's workspace (snapshot, tools,
runtime) to a scratch folder, uploads it into one fresh sandbox with the plans, and runs
`skills/_lib/runtime.py` there: each plan on its own in-memory copy of the snapshot, every step
checked against what it must do (succeed, or be refused for a recovery path). What comes back is
JSON only (the initial state and, per plan, its trace and final state as {table: [record]}), read
with a size cap: the sandbox's output is data, never code or SQL for the host to run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawloop.harness.sandbox.backend import open_sandbox
from clawloop.harness.sandbox.base import WORKSPACE, SandboxConfig
from clawloop.harness.sandbox.scratch import scratch
from clawloop.harness.taskenv import read_remote_text

STAGE = "/tmp/clawloop-domain"
MAX_RESULT_BYTES = 64 * 1024 * 1024
Tables = dict[str, list[dict[str, Any]]]


class ExecutionError(RuntimeError):
    """The reference executor itself failed (not one plan: those come back as results)."""


@dataclass(frozen=True)
class PlanRun:
    ok: bool
    why: str
    trace: list[dict[str, Any]]
    final: Tables


def run_plans(
    files: dict[str, str], plans: list[dict[str, Any]], sandbox: SandboxConfig, timeout: float = 120
) -> tuple[Tables, list[PlanRun]]:
    """(initial state, one PlanRun per plan). Raises SandboxError for the sandbox's own faults
    and ExecutionError when the runtime wrote no result."""
    with scratch("clawloop-domain-") as tmp:
        ws, stage = Path(tmp, "workspace"), Path(tmp, "stage")
        for rel, text in files.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
        stage.mkdir()
        (stage / "plans.json").write_text(json.dumps(plans))
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
                    f"{STAGE}/out.json",
                ],
                timeout=timeout,
            )
            text = read_remote_text(sb, f"{STAGE}/out.json", cap=MAX_RESULT_BYTES)
    if text is None:
        why = "timed out" if res.timed_out else f"exited {res.exit_code}"
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-5:])
        raise ExecutionError(f"the reference executor {why} without a result: {tail}")
    try:
        doc = json.loads(text)
        runs = [
            PlanRun(
                bool(r.get("ok")),
                str(r.get("why", "")),
                list(r.get("trace", [])),
                dict(r.get("final", {})),
            )
            for r in doc["plans"]
        ]
        return dict(doc["initial"]), runs
    except (ValueError, KeyError, TypeError) as exc:
        raise ExecutionError(f"the reference executor wrote an unreadable result: {exc}") from exc
