"""Diagnose: the new checkpoint attempts the held-out eval tasks; its failures are summarised
(one Prefect task each), clustered by root cause, and turned into a report and guidance.json,
which the next iteration's synthesize reads (capability weights, difficulty, failure patterns).

An external held-out eval set (`diagnose.eval_tasks: [DIR, ...]`, Harbor dataset folders: folders
of task folders, e.g. a benchmark's) is rolled out every iteration beside our own held-out split
and graded by its own tests. It is kept apart: its episodes are `external_trajectories` (split
"external"), its pass rates `external_pass_rates` (one row per eval set and capability, "*" the
whole set, `external` true), a section of report.md and external_pass_rates.png over iterations,
and `external_*` figures in the stage summary. It never enters the own pass rates, the failure
summaries or the guidance.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import Field

from clawloop.diagnosis.diagnose import (
    GUIDANCE_NAME,
    PLOT_NAME,
    REPORT_NAME,
    DiagnoseConfig,
    diagnose_stage,
)
from clawloop.diagnosis.guidance import read_guidance
from clawloop.diagnosis.report import pass_rate_png
from clawloop.diagnosis.summary import SummaryConfig, summarize_failure
from clawloop.harness import owned
from clawloop.harness.llm import PolicyConfig
from clawloop.harness.rollout import RolloutConfig
from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
from clawloop.harness.sandbox.pool import with_host_column
from clawloop.harness.taskfolder.folder import TaskFolderError, read_task_header
from clawloop.harness.taskfolder.foreign import folder_sha256, prepare_task, task_folders
from clawloop.storage import artifacts, schemas
from clawloop.storage.schemas import INFRA_END_REASONS, FailureSummary, Trajectory
from clawloop.tasks.episodes import roll_out, verified_tasks
from clawloop.tasks.policy import policy_slice, serve_policy
from clawloop.tasks.rollout import rollout_config
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.settings import stage_section
from clawloop.tasks.stage import StageContext, StageError, StageResult, StageSpec

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.diagnose")
FILES = (REPORT_NAME, PLOT_NAME, GUIDANCE_NAME)
EXTERNAL_SPLIT = "external"  # the split column of external episodes: never "eval"
EXTERNAL_PLOT = "external_pass_rates.png"
WHOLE_SET = "*"  # the capability of an external_pass_rates row about the whole eval set
# One row per (iteration, eval set, capability); `external` marks every row, so a reader that
# concatenates pass-rate tables cannot take these for the own held-out split's.
EXTERNAL_PASS_RATES = pa.schema(
    [
        ("iteration", pa.int64()),
        ("eval_set", pa.string()),
        ("capability", pa.string()),
        ("n_tasks", pa.int64()),
        ("n_episodes", pa.int64()),
        ("n_passed", pa.int64()),
        ("pass_rate", pa.float64()),
        ("mean_reward", pa.float64()),
        ("external", pa.bool_()),
    ]
)


class DiagnoseSettings(stage_section(DiagnoseConfig, "diagnose")):
    eval_n: int = Field(1, ge=1, description="episodes per held-out eval task")
    eval_tasks: list[str] = Field(
        default_factory=list,
        description=(
            "external held-out eval sets: Harbor dataset folders (a folder of task folders, or "
            "one task folder), rolled out every iteration beside the own held-out split and "
            "graded by their own tests; pass rates reported apart (external_pass_rates)"
        ),
    )

    def stage_config(self, **set_elsewhere: Any) -> DiagnoseConfig:
        return DiagnoseConfig(**self.model_dump(exclude={"eval_n", "eval_tasks"}), **set_elsewhere)


@task(
    name="summarize-failure",
    task_run_name="summarize-{row[task_id]}",
    cache_policy=NO_CACHE,
    persist_result=False,
)
def summarize_one(
    row: Trajectory, summarize: Callable[[Trajectory], FailureSummary]
) -> FailureSummary:
    """One failed eval episode -> its FAILURE_SUMMARIES row (LLM, or the heuristic fallback)."""
    return summarize(row)


def diagnose_config(cfg: RunConfig) -> DiagnoseConfig:
    """DiagnoseConfig from `diagnose:`; its difficulty starts where synthesis starts
    (synthesize.multihop/dirtiness), so guidance never drops below it."""
    return cfg.diagnose.stage_config(
        start_multihop=cfg.synthesize.multihop, start_dirtiness=cfg.synthesize.dirtiness
    )


def eval_rollout_config(cfg: RunConfig) -> RolloutConfig:
    """The held-out rollouts: `diagnose.eval_n` episodes per task, no band."""
    n = cfg.diagnose.eval_n
    return rollout_config(cfg, n=n, band=(0, n))


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    return {
        "diagnose": cfg.diagnose.model_dump(mode="json"),
        # guidance difficulty starts where synthesis starts
        "start_levels": [cfg.synthesize.multihop, cfg.synthesize.dirtiness],
        "rollout": cfg.rollout.model_dump(mode="json"),
        "sandbox": cfg.sandbox.cache_slice(),
        # an edited external task re-runs the stage
        "eval_tasks": external_fingerprint(cfg.diagnose.eval_tasks),
        **policy_slice(cfg),
    }


def external_sets(paths: list[str]) -> list[tuple[str, list[Path]]]:
    """(label, task folders) per external eval set; the label is the set folder's name.
    TaskFolderError for a path that holds no task folder, or two sets of the same name."""
    sets = []
    for path in paths:
        label = Path(path).resolve().name or str(path)
        if label in {s[0] for s in sets}:
            raise TaskFolderError(f"two eval sets are named {label!r}; rename one folder")
        sets.append((label, task_folders(Path(path))))
    return sets


def external_fingerprint(paths: list[str]) -> list[Any]:
    """What the external eval sets hold, for the cache key: each task folder's sha256."""
    out: list[Any] = []
    for path in paths:
        try:
            out.append([str(path), [[t.name, folder_sha256(t)] for t in task_folders(Path(path))]])
        except (TaskFolderError, OSError) as exc:
            out.append([str(path), f"unreadable: {exc}"])
    return out


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
            header = read_task_header(folder)
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


def external_pass_rates(
    rows: list[dict[str, Any]], tasks: list[ExternalTask], iteration: int
) -> list[dict[str, Any]]:
    """EXTERNAL_PASS_RATES rows: per eval set, one row per capability and one for the whole set
    ("*"). Episodes that ended in an infrastructure fault are not counted; none left: NaN."""
    set_of = {row["task_id"]: row["eval_set"] for _, row, _ in tasks}
    out = []
    for label in dict.fromkeys(row["eval_set"] for _, row, _ in tasks):
        ids = {t for t, s in set_of.items() if s == label}
        mine = [r for r in rows if r["task_id"] in ids]
        caps = sorted({row["capability"] for _, row, _ in tasks if row["task_id"] in ids})
        for cap in [WHOLE_SET, *caps]:
            group = [r for r in mine if cap == WHOLE_SET or r["capability"] == cap]
            n_tasks = len({r["task_id"] for r in group}) if group else 0
            counted = [r for r in group if r["end_reason"] not in INFRA_END_REASONS]
            passed = sum(bool(r["passed"]) for r in counted)
            out.append(
                {
                    "iteration": iteration,
                    "eval_set": label,
                    "capability": cap,
                    "n_tasks": n_tasks,
                    "n_episodes": len(counted),
                    "n_passed": passed,
                    "pass_rate": passed / len(counted) if counted else math.nan,
                    "mean_reward": sum(float(r["reward"]) for r in counted) / len(counted)
                    if counted
                    else math.nan,
                    "external": True,
                }
            )
    return out


def _external_history(ctx: StageContext, rates: list[dict[str, Any]]) -> pd.DataFrame:
    """Earlier iterations' external_pass_rates rows (where they were written) + this one's."""
    frames = []
    for k in range(1, ctx.iteration):
        m = ctx.manifest("diagnose", k)
        if m is not None and "external_pass_rates.parquet" in {f.name for f in m.files}:
            frames.append(artifacts.read_table(ctx.stage_url("diagnose", k), "external_pass_rates"))
    frames.append(pd.DataFrame(rates, columns=EXTERNAL_PASS_RATES.names))
    return pd.concat([f for f in frames if not f.empty] or frames[-1:], ignore_index=True)


def _rate(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.0%}"


def external_report(history: pd.DataFrame, iteration: int) -> str:
    """report.md's section on the external eval sets: the whole-set pass rate per iteration, and
    this iteration's per capability."""
    lines = [
        "",
        "## External held-out eval (`diagnose.eval_tasks`)",
        "",
        "Harbor tasks from outside, graded by their own tests; kept apart from the held-out "
        "split above (not in its pass rates, failure summaries or guidance).",
        "",
        "| iteration | eval set | tasks | episodes | passed | pass rate |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    whole = history[history["capability"] == WHOLE_SET].sort_values(["iteration", "eval_set"])
    for r in whole.to_dict("records"):
        lines.append(
            f"| {r['iteration']} | {r['eval_set']} | {r['n_tasks']} | {r['n_episodes']} | "
            f"{r['n_passed']} | {_rate(r['pass_rate'])} |"
        )
    now = history[(history["iteration"] == iteration) & (history["capability"] != WHOLE_SET)]
    if not now.empty:
        lines += ["", f"Iteration {iteration} per capability:", "",
                  "| eval set | capability | tasks | episodes | pass rate |",
                  "|---|---|---:|---:|---:|"]  # fmt: skip
        lines += [
            f"| {r['eval_set']} | {r['capability']} | {r['n_tasks']} | {r['n_episodes']} | "
            f"{_rate(r['pass_rate'])} |"
            for r in now.to_dict("records")
        ]
    lines += ["", f"![external pass rate]({EXTERNAL_PLOT})", ""]
    return "\n".join(lines)


def plot_external(history: pd.DataFrame) -> bytes:
    """PNG: each external eval set's whole-set pass rate over iterations."""
    whole = history[history["capability"] == WHOLE_SET]
    title = "external held-out pass rate (diagnose.eval_tasks)"
    return pass_rate_png(whole, "eval_set", "external pass rate", title)


def external_summary(rates: list[dict[str, Any]], n_tasks: int) -> dict[str, Any]:
    """The stage summary's external_* figures (NaN written as None: the manifest is JSON)."""
    whole = [r for r in rates if r["capability"] == WHOLE_SET]
    episodes = sum(r["n_episodes"] for r in whole)
    passed = sum(r["n_passed"] for r in whole)
    return {
        "external_tasks": n_tasks,
        "external_episodes": episodes,
        "external_passed": passed,
        "external_pass_rate": passed / episodes if episodes else None,
        "external_pass_rates": {
            r["eval_set"]: None if math.isnan(r["pass_rate"]) else r["pass_rate"] for r in whole
        },
    }


def _history(ctx: StageContext) -> pd.DataFrame | None:
    frames = [
        artifacts.read_table(ctx.stage_url("diagnose", k), "pass_rates")
        for k in range(1, ctx.iteration)
        if ctx.manifest("diagnose", k) is not None
    ]
    return pd.concat(frames, ignore_index=True) if frames else None


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config
    workers = cfg.diagnose.workers
    # Every capability synthesized this iteration gets a weight, the user's own included.
    capabilities = sorted({str(r["capability"]) for r in ctx.rows("synthesize", "candidates")})
    previous = (
        read_guidance(ctx.stage_url("diagnose", ctx.iteration - 1)) if ctx.iteration > 1 else None
    )

    def fallback(row: dict[str, Any], exc: BaseException) -> dict[str, Any]:
        log.warning("summary of %s raised, heuristic used: %s", row.get("task_id"), exc)
        return summarize_failure(row, None, SummaryConfig(), iteration=ctx.iteration)

    def map_rows(fn: Callable[[dict], dict], rows: list[dict]) -> list[dict]:
        return ctx.map(summarize_one, rows, fallback, workers=workers, summarize=fn)

    with owned.temp_dir("clawloop-diagnose-") as tmp, ExitStack() as stack:
        out = Path(tmp) / "out"
        tasks = verified_tasks(ctx, "eval", Path(tmp) / "tasks")
        # before any policy is served: an external task that cannot run here stops the stage
        external = external_tasks(ctx, Path(tmp) / "external") if cfg.diagnose.eval_tasks else []
        evals: list[dict[str, Any]] = []
        ext_rows: list[dict[str, Any]] = []
        endpoint, served = None, "no policy served: no verified eval task"
        if tasks or external:
            policy, served = stack.enter_context(serve_policy(ctx, ctx.iteration))
            if tasks:
                evals = roll_out(ctx, tasks, policy, eval_rollout_config(cfg), workers)
            if external:
                ext_rows = roll_out_external(
                    ctx, external, policy, eval_rollout_config(cfg), workers
                )
            endpoint = policy.endpoint()
        res = diagnose_stage(
            pd.DataFrame(evals, columns=schemas.TRAJECTORIES.names),
            _history(ctx),
            diagnose_config(cfg),
            endpoint,
            out,
            ctx.iteration,
            prev_guidance=previous,
            capabilities=capabilities,
            map_rows=map_rows,
        )
        files = {n: (out / n).read_bytes() for n in FILES if (out / n).is_file()}
    tables = {"eval_trajectories": (with_host_column(schemas.TRAJECTORIES), evals), **res.tables()}
    summary = {"policy": served, "eval_tasks": len(tasks), **res.summary}
    if cfg.diagnose.eval_tasks:
        rates = external_pass_rates(ext_rows, external, ctx.iteration)
        history = _external_history(ctx, rates)
        tables["external_trajectories"] = (with_host_column(schemas.TRAJECTORIES), ext_rows)
        tables["external_pass_rates"] = (EXTERNAL_PASS_RATES, rates)
        report = files.get(REPORT_NAME, b"").decode()
        files[REPORT_NAME] = (report + external_report(history, ctx.iteration)).encode()
        files[EXTERNAL_PLOT] = plot_external(history)
        summary.update(external_summary(rates, len(external)))
    return StageResult(tables, files=files, summary=summary)


STAGE = StageSpec(
    "diagnose",
    run,
    config_slice,
    module=__name__,
    upstream=("synthesize", "forge", "verify", "train"),  # candidates name the capabilities
    previous=("diagnose",),
    workers=lambda cfg: cfg.diagnose.workers,
)
