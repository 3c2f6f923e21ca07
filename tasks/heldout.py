"""The held-out episodes both the rollout and the diagnose stage run: the eval rollout settings,
the external eval tasks (`diagnose.eval_tasks`) prepared to run, and the run's row 0.

Row 0 (`diagnose.baseline`) is the base policy on iteration 1's held-out and external tasks. It is
rolled out by iteration 1's rollout stage, while the base policy is served for that rollout
anyway, not after train (which would serve the base weights a second time: a vLLM restart, ~1 min
on the demo, as train stops the server for its memory). The rollout stage writes the episodes
(`baseline_trajectories`); iteration 1's diagnose stage carries them into its own artifacts and
counts them into its summary's `baseline` (`baseline_from_rollout`), where `clawloop report`
reads both.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawloop.diagnosis.external import EXTERNAL_SPLIT, external_fingerprint, external_sets
from clawloop.harness.llm import PolicyConfig
from clawloop.harness.rollout import RolloutConfig
from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
from clawloop.harness.taskfolder.clawgym import is_clawgym_folder, write_harbor_folder
from clawloop.harness.taskfolder.clawgym import read_task as read_clawgym
from clawloop.harness.taskfolder.folder import TaskFolderError, read_harbor_task_info
from clawloop.harness.taskfolder.foreign import prepare_task
from clawloop.storage import artifacts
from clawloop.tasks.episodes import roll_out
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.stage import StageContext, StageError

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.diagnose")
BASELINE_TABLE = "baseline_trajectories"


def baseline_due(cfg: RunConfig, iteration: int) -> bool:
    """Whether this iteration grades row 0: `diagnose.baseline`, iteration 1 only."""
    return bool(cfg.diagnose.baseline) and iteration == 1


def baseline_slice(cfg: RunConfig) -> dict[str, Any]:
    """What row 0's episodes depend on beyond the rollout stage's own slice (rollout settings,
    sandbox, policy): the held-out settings and the external tasks' content."""
    d = cfg.diagnose
    return {
        "eval_n": d.eval_n,
        "eval_pass_threshold": d.eval_pass_threshold,
        "eval_tasks": external_fingerprint(d.eval_tasks),
    }


def eval_rollout_config(cfg: RunConfig) -> RolloutConfig:
    """The held-out rollouts: `diagnose.eval_n` episodes per task, no band."""
    n = cfg.diagnose.eval_n
    return cfg.rollout.replaced(n=n, band=(0, n))


ExternalTask = tuple[Path, dict[str, Any], SandboxConfig]


def external_tasks(ctx: StageContext, work: Path) -> list[ExternalTask]:
    """Every external eval task, prepared to run (foreign tasks built on Docker) with its task row
    (split "external", eval_set); StageError listing every task that cannot run here."""
    sandbox = sandbox_for(ctx)
    try:
        sets = external_sets(ctx.config.diagnose.eval_tasks)
    except (TaskFolderError, OSError) as exc:
        raise StageError(f"diagnose.eval_tasks: {exc}") from exc
    out: list[ExternalTask] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    for label, folders in sets:
        for folder in folders:
            if is_clawgym_folder(folder):  # run as the Harbor folder made of it
                try:
                    task = read_clawgym(folder)
                except TaskFolderError as exc:
                    problems.append(str(exc))
                    continue
                threshold = ctx.config.diagnose.eval_pass_threshold
                folder = write_harbor_folder(
                    task, work / label / "clawgym" / task.task_id, threshold
                )
            header = read_harbor_task_info(folder)
            if header.task_id in seen:
                problems.append(
                    f"task id {header.task_id} is in {seen[header.task_id]} and {label}"
                )
                continue
            seen[header.task_id] = label
            try:
                prepared = prepare_task(folder, sandbox, work / label)
            except (TaskFolderError, SandboxError, OSError) as exc:
                problems.append(str(exc).splitlines()[0] + "".join(
                    f"\n    {line}" for line in str(exc).splitlines()[1:6]
                ))  # fmt: skip
                continue
            row = {
                "task_id": header.task_id,
                "capability": header.capability or EXTERNAL_SPLIT,
                "split": EXTERNAL_SPLIT,
                "eval_set": label,
            }
            out.append((prepared.task_dir, row, prepared.sandbox))
    if problems:
        raise StageError(
            f"diagnose.eval_tasks: {len(problems)} external task(s) cannot run here:\n  - "
            + "\n  - ".join(problems)
            + f"\nfix them or leave them out of the eval set, then resume: {ctx.resume}"
        )
    return out


def roll_out_external(
    ctx: StageContext,
    tasks: list[ExternalTask],
    policy: PolicyConfig,
    cfg: RolloutConfig,
    workers: int,
) -> list[dict[str, Any]]:
    """The external tasks' episodes (each in its own sandbox config: a built image or the run's),
    ordered by task then attempt."""
    groups: dict[SandboxConfig, list[tuple[Path, dict[str, Any]]]] = {}
    for folder, row, sandbox in tasks:
        groups.setdefault(sandbox, []).append((folder, row))
    rows = [
        r for box, items in groups.items() for r in roll_out(ctx, items, policy, cfg, workers, box)
    ]
    order = {row["task_id"]: i for i, (_, row, _) in enumerate(tasks)}
    return sorted(rows, key=lambda r: (order[r["task_id"]], r["attempt"]))


def roll_out_baseline(
    ctx: StageContext,
    held: list[dict[str, Any]],
    external: list[ExternalTask],
    policy: PolicyConfig,
    workers: int,
) -> list[dict[str, Any]]:
    """`diagnose.baseline`: the base policy, as served for iteration 1's rollout, on the held-out
    and external tasks -> its episodes (own held-out first, then external, each by task and
    attempt); diagnose counts them (`tasks.diagnose.baseline_figures`). `held`: the held-out
    episodes, which the rollout stage runs in its train rollout's map (`roll_out_sets`: one pool,
    so vLLM batches both); the external tasks run here, each in its own sandbox."""
    cfg = eval_rollout_config(ctx.config)
    rows = held + roll_out_external(ctx, external, policy, cfg, workers)
    log.info(
        "row base (the base policy, before train): %d held-out and external episodes, %d passed",
        len(rows),
        sum(bool(r["passed"]) for r in rows),
    )
    return rows


def baseline_from_rollout(ctx: StageContext) -> tuple[list[dict[str, Any]], str]:
    """Row 0 as iteration 1's rollout stage graded it: (its episodes, the note on the policy it
    served). StageError when that stage did not grade it (a pipeline without the rollout stage,
    or its artifacts replaced by hand), naming what to re-run."""
    m = ctx.manifest("rollout", 1)
    if m is None or f"{BASELINE_TABLE}.parquet" not in {f.name for f in m.files}:
        raise StageError(
            "diagnose.baseline: iteration 1's rollout stage grades row 0 (the base policy on the "
            f"held-out tasks), but {ctx.stage_url('rollout', 1)} has no {BASELINE_TABLE}: run the "
            f"rollout stage of iteration 1 again with diagnose.baseline on: {ctx.resume} --force "
            "rollout"
        )
    rows = artifacts.read_rows(ctx.stage_url("rollout", 1), BASELINE_TABLE)
    return rows, str(m.summary.get("policy", ""))
