"""The pipeline: six stages in order, and the Prefect flows that run them: `loop` (K iterations)
-> `iteration` -> one flow per stage, and `rerun-stage`.

    synthesize -> forge -> verify -> rollout -> train -> diagnose

Each stage is one module in tasks/; these flows only compose: every decision (skip, cache key,
force, commit) is `tasks.engine`; per-item work runs as Prefect tasks through
`tasks.mapping.prefect_mapper` on the stage flow's task runner, sized by the stage's workers: a
thread pool, or (`execution.runner`, for forge, verify, rollout and diagnose) Prefect's Dask or
Ray task runner on a local cluster or the one at `execution.address`; each
stage flow publishes a table + markdown artifact. A stage flow that fails or is blocked ends in a Failed state
(visible in the UI) and the loop stops there; running the loop again with the same run id resumes
at that stage, since every completed stage before it skips on its manifest.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Our modules log through `logging`; let Prefect ship those records to the UI too.
os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "clawloop")

from prefect import Flow, flow  # noqa: E402
from prefect.states import Failed, State  # noqa: E402
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner  # noqa: E402

from clawloop.flows import lease, report, runs  # noqa: E402
from clawloop.flows.names import check_run_id  # noqa: E402
from clawloop.storage import fs  # noqa: E402
from clawloop.tasks import diagnose, engine, forge, rollout, synthesize, train, verify  # noqa: E402
from clawloop.tasks.artifacts import artifact_key, publish_stage  # noqa: E402
from clawloop.tasks.config import RunConfig, parse_config  # noqa: E402
from clawloop.tasks.mapping import prefect_mapper  # noqa: E402
from clawloop.tasks.policy import close_policy_servers  # noqa: E402
from clawloop.tasks.settings import RUNNER_PACKAGES, ExecutionSettings  # noqa: E402
from clawloop.tasks.stage import StageError, StageSpec  # noqa: E402

log = logging.getLogger("clawloop.pipeline")

STAGES: tuple[StageSpec, ...] = (
    synthesize.STAGE,
    forge.STAGE,
    verify.STAGE,
    rollout.STAGE,
    train.STAGE,
    diagnose.STAGE,
)
ORDER = tuple(s.name for s in STAGES)


def stage_spec(name: str) -> StageSpec:
    spec = next((s for s in STAGES if s.name == name), None)
    if spec is None:
        raise StageError(f"unknown stage {name!r}: this pipeline has {list(ORDER)}")
    return spec


def _why(outcome: engine.StageOutcome) -> str:
    """The short reason a stage failed or was blocked, for a flow run's state message."""
    return runs.error_summary(outcome.error) if outcome.error else outcome.reason


def _stage_body(
    stage: str, run_id: str, iteration: int, config: dict[str, Any], force: bool = False
) -> engine.StageOutcome | State[Any]:
    cfg = parse_config(config, source=f"run {run_id}")
    outcome = engine.run_stage(
        stage_spec(stage), STAGES, cfg, run_id, iteration, prefect_mapper, force=force
    )
    url = fs.stage_url(cfg.storage.root, run_id, iteration, stage)
    report_url = fs.join(url, "report.md")  # the diagnose stage's report, shown in the UI as is
    appendix = (
        fs.read_bytes(report_url).decode(errors="replace")
        if outcome.manifest and fs.exists(report_url)
        else ""
    )
    publish_stage(
        artifact_key(run_id, iteration, stage),
        stage,
        iteration,
        report.stage_table(outcome),
        report.stage_markdown(run_id, outcome, url, appendix),
    )
    if outcome.status in ("failed", "blocked"):
        return Failed(
            message=f"{stage} iteration {iteration} {outcome.status}: {_why(outcome)}",
            data=outcome,
        )
    return outcome


_STAGE_FLOW = flow(_stage_body, name="stage", persist_result=False, validate_parameters=False)
# One named flow per stage, so the UI lists synthesize, forge, verify, ... as their own flows.
STAGE_FLOWS: dict[str, Flow[..., Any]] = {
    name: _STAGE_FLOW.with_options(name=name, flow_run_name=f"{{run_id}}-iter-{{iteration}}-{name}")
    for name in ORDER
}


# The stages whose per-item tasks `execution.runner` places; synthesize and train keep threads.
DISTRIBUTED = ("forge", "verify", "rollout", "diagnose")


def local_cluster_size(workers: int, processes: int | None = None) -> tuple[int, int]:
    """(worker processes, threads each) of a local cluster running `workers` items at once:
    one process per core at most (or `processes`), the items shared out as threads."""
    procs = max(1, min(workers, processes or os.cpu_count() or 1))
    return procs, math.ceil(workers / procs)


def task_runner(stage: str, execution: ExecutionSettings, workers: int) -> TaskRunner[Any]:
    """The task runner of `stage`'s flow: threads, or Prefect's Dask / Ray task runner."""
    if execution.runner == "threads" or stage not in DISTRIBUTED:
        return ThreadPoolTaskRunner(max_workers=workers)
    module, how = RUNNER_PACKAGES[execution.runner]
    try:
        integration = __import__(module)
    except ImportError as exc:
        raise StageError(
            f"execution.runner: {execution.runner} needs {module.replace('_', '-')}, which does "
            f"not import ({exc}): {how}, or set execution.runner: threads"
        ) from exc
    if execution.runner == "dask":
        if execution.address:
            return integration.DaskTaskRunner(address=execution.address)
        procs, threads = local_cluster_size(workers, execution.processes)
        return integration.DaskTaskRunner(
            cluster_kwargs={
                "n_workers": procs,
                "threads_per_worker": threads,
                "processes": True,
                "dashboard_address": None,
            }
        )
    if execution.address:
        return integration.RayTaskRunner(address=execution.address)
    # One CPU per Ray task (Ray's default), so `workers` CPUs = `workers` items in flight.
    return integration.RayTaskRunner(
        init_kwargs={"num_cpus": workers, "include_dashboard": False, "log_to_driver": False}
    )


def _no_api(execution: ExecutionSettings) -> str:
    return (
        f"execution.address {execution.address}: workers on other hosts report task runs to "
        "the Prefect API, but PREFECT_API_URL is not set (this run uses a temporary server "
        "inside its own process): start one (`clawloop serve` or `prefect server start "
        "--host 0.0.0.0`) and export PREFECT_API_URL=http://<this-host>:4200/api"
    )


def check_preconditions(cfg: RunConfig) -> None:
    """What would stop a stage later, refused before any runs (StageError): a cluster at
    execution.address without a Prefect API its workers can reach, a runner whose package does
    not import."""
    from prefect.settings import PREFECT_API_URL

    execution = cfg.execution
    if execution.runner == "threads":
        return
    module, how = RUNNER_PACKAGES[execution.runner]
    try:
        __import__(module)
    except ImportError as exc:
        raise StageError(
            f"execution.runner: {execution.runner} needs {module.replace('_', '-')}, which does "
            f"not import ({exc}): {how}, or set execution.runner: threads"
        ) from exc
    if execution.address and not PREFECT_API_URL.value():
        raise StageError(_no_api(execution))


@contextmanager
def api_for_workers(execution: ExecutionSettings, stage: str) -> Iterator[None]:
    """Worker processes report their task runs to the Prefect API in the settings the task
    runner sends along. A run without PREFECT_API_URL talks to a temporary server in this
    process: name it in the settings, so a local cluster's workers report there too. Workers of
    a cluster elsewhere cannot reach that server: StageError, saying what to set."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if execution.runner == "threads" or stage not in DISTRIBUTED or PREFECT_API_URL.value():
        yield
        return
    if execution.address:
        raise StageError(_no_api(execution))
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    if not server.running:
        yield
        return
    with temporary_settings({PREFECT_API_URL: server.api_url}):
        yield


def _run_stage_flow(
    spec: StageSpec,
    run_id: str,
    iteration: int,
    config: dict[str, Any],
    force: bool,
    execution: ExecutionSettings,
    runner: TaskRunner[Any],
) -> State[Any]:
    with api_for_workers(execution, spec.name):
        stage_flow = STAGE_FLOWS[spec.name].with_options(task_runner=runner)
        return stage_flow(spec.name, run_id, iteration, config, force, return_state=True)


def _call_stage(
    spec: StageSpec,
    run_id: str,
    iteration: int,
    config: dict[str, Any],
    force: bool,
    workers: int,
) -> engine.StageOutcome:
    execution = ExecutionSettings.model_validate(config.get("execution") or {})
    root = str((config.get("storage") or {}).get("root", "runs"))
    try:
        lease.check(root, run_id)  # taken over by another process: stop before this stage
        with runs.stage_owner(run_id, spec.name):  # before the runner: a local cluster inherits it
            runner = task_runner(spec.name, execution, workers)
            state = _run_stage_flow(spec, run_id, iteration, config, force, execution, runner)
    except StageError as exc:
        return engine.StageOutcome(spec.name, iteration, "failed", str(exc), error=str(exc))
    result = state.result(raise_on_failure=False)
    if isinstance(result, engine.StageOutcome):
        return result
    return engine.StageOutcome(
        spec.name, iteration, "failed", "the stage flow crashed", error=f"{state.message}: {result}"
    )


@flow(
    name="iteration",
    flow_run_name="{run_id}-iter-{iteration}",
    persist_result=False,
    validate_parameters=False,
)
def iteration_flow(
    run_id: str, iteration: int, config: dict[str, Any], force: list[str] | None = None
) -> list[engine.StageOutcome] | State[Any]:
    """One iteration: each existing stage in order, as its own subflow.

    force: stage names to re-run in this iteration (the loop adds their dependents)."""
    cfg = parse_config(config, source=f"run {run_id}")
    outcomes = engine.run_iteration(
        STAGES,
        iteration,
        set(force or []),
        lambda spec, k, f: _call_stage(spec, run_id, k, config, f, spec.workers(cfg)),
    )
    if not engine.iteration_ok(outcomes):
        bad = outcomes[-1]
        return Failed(
            message=f"iteration {iteration} stopped at {bad.stage} ({bad.status})", data=outcomes
        )
    return outcomes


def _loop_run_name() -> str:
    from prefect.runtime import flow_run

    return str(flow_run.parameters.get("run_id") or "new-run")


def mark_crashed(run_id: str) -> list[str]:
    """Flow runs of `run_id` still Pending or Running in the Prefect API when it is resumed belong
    to a process that is gone (a run id is driven by one process at a time): set them Crashed,
    saying so, so the UI stops showing them as running. Returns their names."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.context import FlowRunContext
    from prefect.states import Crashed

    ctx = FlowRunContext.get()
    mine = {ctx.flow_run.id} if ctx and ctx.flow_run else set()
    live = FlowRunFilterStateType(any_=[StateType.RUNNING, StateType.PENDING])
    wanted = FlowRunFilter(
        name=FlowRunFilterName(like_=run_id), state=FlowRunFilterState(type=live)
    )
    marked = []
    with get_client(sync_client=True) as client:
        for fr in client.read_flow_runs(flow_run_filter=wanted):
            ours = fr.name == run_id or fr.name.startswith(f"{run_id}-iter-")
            if fr.id in mine or not ours:
                continue
            message = (
                f"its process is gone: run {run_id} was resumed by flow run {_loop_run_name()}"
            )
            client.set_flow_run_state(fr.id, Crashed(message=message), force=True)
            marked.append(fr.name)
    if marked:
        log.warning("marked %d flow run(s) of a killed process as Crashed: %s", len(marked), marked)
    return marked


@flow(name="loop", flow_run_name=_loop_run_name, persist_result=False, validate_parameters=False)
def loop_flow(
    run_id: str | None = None,
    config: dict[str, Any] | None = None,
    force: list[str] | None = None,
) -> runs.RunSummary | State[Any]:
    """The self-improvement loop: K iterations of synthesize -> forge -> verify -> ...; resumable.

    run_id: None starts a new run; an existing id resumes it. config: None = embedded defaults."""
    run_id = check_run_id(run_id or runs.new_run_id())  # a deployment parameter, too
    cfg = parse_config(config or {}, source=f"run {run_id}")
    config = cfg.model_dump(mode="json")
    engine.dependents(STAGES, force or [])  # unknown stage names fail here, before any work
    check_preconditions(cfg)
    summary = runs.RunSummary(run_id=run_id, root=cfg.storage.root)
    t0 = time.time()
    forced: set[str] = set()
    with lease.hold(cfg.storage.root, run_id, "loop flow"):
        runs.save_run_config(cfg, run_id)
        runs.apply_environment(cfg)
        runs.sweep_sandboxes()
        try:
            mark_crashed(run_id)
        except Exception as exc:  # the UI's view only: never a reason to stop the run
            log.warning("could not mark the flow runs of killed processes: %s", exc)
        try:
            for k in range(1, cfg.iterations + 1):
                forced = engine.dependents(STAGES, force or [], forced)
                state = iteration_flow(run_id, k, config, sorted(forced), return_state=True)
                summary.outcomes += state.result(raise_on_failure=False) or []
                summary.duration_s = time.time() - t0
                if not state.is_completed():
                    return Failed(message=state.message, data=summary)
        finally:
            close_policy_servers()  # the managed vLLM (llm.server: vllm) ends with the run
    return summary


def nightly(
    config_path: str | None = None, iterations: int | None = None
) -> runs.RunSummary | State[Any]:
    """Entry point of the `nightly` deployment: a fresh run id, config from a file or defaults."""
    cfg = runs.resolve_config(config_path, None, iterations=iterations)
    return loop_flow(runs.new_run_id(), cfg.model_dump(mode="json"))


nightly_flow = flow(nightly, name="nightly", persist_result=False)


@flow(
    name="rerun-stage",
    flow_run_name="{run_id}-iter-{iteration}-{stage}-rerun",
    persist_result=False,
)
def rerun_stage_flow(
    run_id: str, iteration: int, stage: str, root: str = "runs"
) -> engine.StageOutcome | State[Any]:
    """Re-run one stage of one iteration of an existing run, from its upstream's cached artifacts."""
    check_run_id(run_id)  # a deployment parameter: never a path out of the root
    cfg = runs.load_run_config(root, run_id)
    if cfg is None:
        raise StageError(f"no run {run_id!r} under {root}: list runs with `clawloop runs`")
    if not 1 <= iteration <= cfg.iterations:
        raise StageError(f"iteration {iteration} is outside run {run_id}'s 1..{cfg.iterations}")
    spec = stage_spec(stage)
    with lease.hold(cfg.storage.root, run_id, f"rerun-stage {stage}"):
        runs.record_root(cfg, run_id)
        runs.apply_environment(cfg)
        try:
            outcome = _call_stage(
                spec, run_id, iteration, cfg.model_dump(mode="json"), True, spec.workers(cfg)
            )
        finally:
            close_policy_servers()  # a managed vLLM the stage started ends with the flow run
    if outcome.status != "ran":
        return Failed(
            message=f"{stage} {outcome.status}: {_why(outcome)}",
            data=outcome,
        )
    return outcome
