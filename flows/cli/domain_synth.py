"""`clawloop domain synth DIR --n N --seed S --out OUTDIR`: domain-grounded tasks as folders.

Synthesizes N tasks from one executable domain (synthesis/domain/synth.py), forges and verifies
each in a sandbox like any task as it is made, and writes the kept ones as Harbor task folders
under OUTDIR (each `clawloop verify`-able). A task dropped on the way is replaced (up to 3 x N
made); when fewer than N come back, the report says why (`short`, per feature). Shapes the domain
cannot carry are no longer sampled (`relaxed`, with the reason); the domain's refusal kinds are
counted, with how many had a fix that ran and how many kept tasks recover from
(`refusals`). Prints every abstract graph or task that was dropped and why, the structural
features covered and the time per task. Exit 0 when at least one task was kept,
1 when none was, 2 for a bad domain folder or a sandbox that cannot start.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from clawloop.synthesis.config import DomainSource


def _fail(msg: str) -> int:
    print(f"clawloop domain synth: {msg}", file=sys.stderr)
    return 2


def _forge_and_verify(backend: str, out: Path, rows: list[dict[str, Any]]):
    """The `accept` synthesis asks about each task it made: forge it and verify it in a sandbox
    like any task, unpack a kept one under `out`, record the verdict in `rows`; a refused one
    is replaced by synthesis (its top-up), so the reason says which stage refused it."""
    from clawloop.generators.forge import forge_candidate
    from clawloop.generators.verify import verify_task
    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.harness.taskfolder.packing import unpack_tar

    sandbox = SandboxConfig(backend=backend)

    def accept(cand: dict[str, Any]) -> tuple[bool, str]:
        forged = forge_candidate(cand, sandbox)
        if forged["status"] != "ok":
            rows.append({"task_id": cand["task_id"], "kept": False,
                         "reason": f"forge: {forged['error']}"})  # fmt: skip
            return False, rows[-1]["reason"]
        _, verdict = verify_task(forged, sandbox)
        if verdict["kept"]:
            unpack_tar(forged["task_tar"], out / cand["task_id"])
        rows.append(
            {"task_id": cand["task_id"], "kept": verdict["kept"], "reason": verdict["reason"]}
        )
        return bool(verdict["kept"]), f"verify: {verdict['reason']}"

    return accept


def cmd_synth(args: argparse.Namespace) -> int:
    from clawloop.harness.sandbox.backend import resolve_backend
    from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
    from clawloop.synthesis.domain.execute import ExecutionError
    from clawloop.synthesis.domain.model import DomainError
    from clawloop.synthesis.domain.synth import synthesize_domain
    from clawloop.synthesis.domain.taskgraph import Knobs

    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return _fail(f"--out {out} already exists and is not an empty folder; choose another")
    try:
        resolve_backend(args.backend)
        knobs = Knobs(max_nodes=args.max_nodes, subgoals=args.subgoals,
                      error_recovery=not args.no_error_recovery)  # fmt: skip
        start = time.monotonic()
        out.mkdir(parents=True, exist_ok=True)
        verdicts: list[dict[str, Any]] = []
        accept = _forge_and_verify(args.backend, out, verdicts)
        made = synthesize_domain(
            Path(args.dir), args.n, args.seed, SandboxConfig(args.backend), knobs, accept=accept
        )
    except DomainError as exc:
        return _fail(str(exc))
    except (SandboxError, ExecutionError, ValueError) as exc:
        return _fail(f"the reference executor could not run: {exc}")
    seconds = time.monotonic() - start
    kept = [v for v in verdicts if v["kept"]]
    report = {
        **made.summary(),
        "kept": len(kept),
        "seconds_per_kept_task": round(seconds / max(1, len(kept)), 2),
        "dropped_graphs": [{"features": json.loads(g["features"]), "reason": g["reason"]} for g in made.dropped],
        "dropped_tasks": [v for v in verdicts if not v["kept"]],
        # Per task made: the structure measured from its reference run (synthesis/domain/structure.py)
        # and the synth note (warnings for claimed structure the measurement lacks).
        "measured": [{"task_id": g["task_id"], "structure": json.loads(g["structure"]),
                      "note": g["reason"]} for g in made.graphs if g["kept"] and g.get("structure")],
        "out": str(out),
    }  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{made.domain}: {len(kept)} task(s) kept of {len(verdicts)} made "
              f"from {len(made.graphs)} abstract graphs, {report['seconds_per_kept_task']} s per kept task")  # fmt: skip
        if made.short:
            print(f"short of --n {args.n}: {made.short}")
        for feature, why in sorted(made.relaxed.items()):
            print(f"relaxed {feature} (no longer sampled): {why}")
        for feature, why in sorted(report["absent"].items()):
            print(f"no kept task has {feature}: {why}")
        if refusals := report.get("refusals"):
            print(f"refusal kinds met: {refusals['kinds']}, with a fix that ran: "
                  f"{refusals['fixed']}, recovered from in kept tasks: {refusals['in_tasks']}")  # fmt: skip
        print(f"features covered by kept tasks: {report['features']}")
        print(f"structure measured (shares of tasks made): {report['structure']}")
        for d in report["dropped_graphs"]:
            print(f"  dropped graph {d['features']}: {d['reason']}")
        for d in report["dropped_tasks"]:
            print(f"  dropped task {d['task_id']}: {d['reason']}")
        for v in kept:
            print(f"  kept {out / v['task_id']}")
    return 0 if kept else 1


def register_synth(verbs: argparse._SubParsersAction) -> None:
    v = verbs.add_parser("synth", help="synthesize, forge and verify tasks from one domain folder")
    v.add_argument("dir", help="an executable-domain folder (domain.toml, tools/, state)")
    v.add_argument("--n", type=int, default=4,
                   help="tasks to keep; a dropped one is replaced, up to 3 x N made")  # fmt: skip
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--out", required=True, help="an empty or new folder for the task folders")
    # The defaults are the run config's (synthesize.domain: DomainSource), written there only.
    for name in ("max_nodes", "subgoals"):
        f = DomainSource.model_fields[name]
        v.add_argument("--" + name.replace("_", "-"), type=int, default=f.default,
                       help=f"{f.description} (default: {f.default})")  # fmt: skip
    v.add_argument("--no-error-recovery", action="store_true", help="no error-recovery paths")
    v.add_argument("--backend", choices=("auto", "bwrap", "docker"), default="auto")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=cmd_synth)
