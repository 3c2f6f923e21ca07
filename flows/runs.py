"""Runs on disk: run ids, the config snapshot each run keeps, listing runs, and the plain loop.

`runs/<run_id>/run.json` stores the config a run started with, so resuming a killed run or re-running
one stage uses the same settings without the original YAML; it is read where it is found (the
root named wins over the one it saved) and a damaged one is one line (flows/records.py). A process
writes a run only while it holds the run's lease (flows/lease.py). `run_loop` is the whole pipeline
without Prefect (used by tests, the benchmark and `clawloop run --no-prefect`); the Prefect flows
call the same `tasks.engine` functions stage by stage.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from clawloop.flows import lease
from clawloop.flows.names import check_run_id
from clawloop.flows.records import RUN_FILE, RunRecordError, run_doc
from clawloop.storage import fs
from clawloop.storage.manifest import Manifest, check_manifest, read_failure, why_incomplete
from clawloop.tasks import engine
from clawloop.tasks.config import (
    ConfigError,
    RunConfig,
    load_config,
    merge_overrides,
    parse_config,
)
from clawloop.tasks.policy import close_policy_servers
from clawloop.tasks.stage import StageError, StageSpec

log = logging.getLogger("clawloop.runs")


def new_run_id() -> str:
    return datetime.now(UTC).strftime("run-%Y%m%d-%H%M%S")


def save_run_config(cfg: RunConfig, run_id: str) -> None:
    url = fs.join(cfg.storage.root, run_id, RUN_FILE)
    doc = {"run_id": run_id, "saved_at": time.time(), "config": cfg.model_dump(mode="json")}
    fs.write_bytes_atomic(url, json.dumps(doc, indent=2, sort_keys=True).encode())


def load_run_config(root: str, run_id: str) -> RunConfig | None:
    """The config run `run_id` under `root` was saved with, its storage.root set to `root`: the
    run lives where it was found (a moved run is read and written there, not at its old root)."""
    doc = run_doc(root, check_run_id(run_id))
    if doc is None:
        return None
    cfg = parse_config(doc["config"], source=fs.join(root, run_id, RUN_FILE))
    return with_root(cfg, root)


def record_root(cfg: RunConfig, run_id: str) -> None:
    """Make run.json say the run lives at cfg.storage.root (a moved run, resumed where it is now);
    the rest of the record is kept."""
    url = fs.join(cfg.storage.root, run_id, RUN_FILE)
    doc = run_doc(cfg.storage.root, run_id) or {
        "run_id": run_id,
        "config": cfg.model_dump(mode="json"),
    }
    saved = doc["config"].get("storage") or {}
    if saved.get("root") != cfg.storage.root:
        log.info("run %s moved: run.json now names %s (was %s)", run_id, cfg.storage.root,
                 saved.get("root"))  # fmt: skip
        doc["config"]["storage"] = {**saved, "root": cfg.storage.root}
        fs.write_bytes_atomic(url, json.dumps(doc, indent=2, sort_keys=True).encode())


def with_root(cfg: RunConfig, root: str) -> RunConfig:
    return cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"root": root})})


def resolve_config(
    config_path: str | None, run_id: str | None, root: str | None = None, **overrides: Any
) -> RunConfig:
    """An explicit YAML wins; else a resumed run's saved config; else the embedded defaults.
    The storage root named (`root`, else the YAML's storage.root) wins over a saved one."""
    if config_path is None and run_id is not None:
        saved = load_run_config(root or "runs", run_id)
        if saved is not None:
            source = f"{run_id}/{RUN_FILE}"
            data = merge_overrides(saved.model_dump(mode="json"), overrides, source)
            return parse_config(data, source=source)
    cfg = load_config(config_path, **overrides)
    return with_root(cfg, root) if root is not None else cfg


def apply_environment(cfg: RunConfig) -> None:
    """Process-wide settings the sandbox backends read: a remote Docker engine via DOCKER_HOST."""
    if cfg.sandbox.docker_host:
        os.environ["DOCKER_HOST"] = cfg.sandbox.docker_host


@contextmanager
def stage_owner(run_id: str, stage: str) -> Iterator[None]:
    """Name the run and stage that own the sandboxes started in this process for the block
    (harness/sandbox/docker.py names and labels its containers from these variables; a local
    Dask cluster's workers inherit them)."""
    from clawloop.harness.sandbox.docker_engine import ENV_RUN, ENV_STAGE

    before = {k: os.environ.get(k) for k in (ENV_RUN, ENV_STAGE)}
    os.environ[ENV_RUN], os.environ[ENV_STAGE] = run_id, stage
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def sweep_sandboxes() -> dict[str, list[str]]:
    """Remove sandboxes (labelled containers, bwrap roots) that killed runs left behind.

    Best effort: a sweep that races another process's cleanup must not stop the pipeline."""
    from clawloop.harness.sandbox.backend import sweep

    try:
        removed = sweep()
    except Exception as exc:
        log.warning("sandbox sweep failed (continuing): %s: %s", type(exc).__name__, exc)
        return {}
    if any(removed.values()):
        log.info("swept sandboxes left by killed runs: %s", {k: len(v) for k, v in removed.items()})
    return removed


@dataclass
class RunSummary:
    run_id: str
    root: str
    outcomes: list[engine.StageOutcome] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return engine.iteration_ok(self.outcomes)


def run_loop(
    cfg: RunConfig,
    run_id: str,
    stages: Sequence[StageSpec],
    mapper: engine.Mapper,
    force: Sequence[str] = (),
    on_outcome: Callable[[engine.StageOutcome], None] | None = None,
) -> RunSummary:
    """All K iterations, plain Python: completed stages skip, `force` re-runs stages + dependents."""
    check_run_id(run_id)
    t0 = time.time()
    forced: set[str] = set()
    fs.check_root(cfg.storage.root)  # a missing bucket or refused credentials: say so up front
    summary = RunSummary(run_id=run_id, root=cfg.storage.root)

    def runner(spec: StageSpec, k: int, force_it: bool) -> engine.StageOutcome:
        lease.check(cfg.storage.root, run_id)  # taken over: stop before writing another stage
        with stage_owner(run_id, spec.name):
            outcome = engine.run_stage(spec, stages, cfg, run_id, k, mapper, force=force_it)
        if on_outcome is not None:
            on_outcome(outcome)
        return outcome

    with lease.hold(cfg.storage.root, run_id, "clawloop run"):
        save_run_config(cfg, run_id)
        apply_environment(cfg)
        sweep_sandboxes()
        try:
            for k in range(1, cfg.iterations + 1):
                forced = engine.dependents(stages, force, forced)
                outcomes = engine.run_iteration(stages, k, forced, runner)
                summary.outcomes += outcomes
                if not engine.iteration_ok(outcomes):
                    break
        finally:
            close_policy_servers()  # the managed vLLM (llm.server: vllm) ends with the run
    summary.duration_s = time.time() - t0
    return summary


def rerun_stage(
    cfg: RunConfig,
    run_id: str,
    iteration: int,
    stage: str,
    stages: Sequence[StageSpec],
    mapper: engine.Mapper,
) -> engine.StageOutcome:
    """Re-run one stage of one iteration from its upstream's cached artifacts (forced)."""
    check_run_id(run_id)
    spec = next((s for s in stages if s.name == stage), None)
    if spec is None:
        raise StageError(f"unknown stage {stage!r}: this pipeline has {engine.stage_names(stages)}")
    if not 1 <= iteration <= cfg.iterations:
        raise ConfigError(f"--iteration {iteration} is outside run {run_id}'s 1..{cfg.iterations}")
    fs.check_root(cfg.storage.root)
    with lease.hold(cfg.storage.root, run_id, f"clawloop rerun --stage {stage}"):
        record_root(cfg, run_id)
        apply_environment(cfg)
        try:
            with stage_owner(run_id, stage):
                return engine.run_stage(spec, stages, cfg, run_id, iteration, mapper, force=True)
        finally:
            close_policy_servers()  # a managed vLLM the stage started ends with the re-run


# The reason of a stage that is itself up to date but reads a stale one.
DOWNSTREAM = "reads a stale stage: re-runs if that stage's new output differs"


@dataclass
class StageInfo:
    stage: str
    status: str  # complete | stale | failed | not run
    rows: dict[str, int]
    duration_s: float
    reason: str = ""  # why it is stale or failed


@dataclass
class RunInfo:
    run_id: str
    iterations: dict[int, list[StageInfo]]
    saved_at: float
    status: str = ""  # complete | running | failed at S | stale from S | incomplete
    reason: str = ""
    started_at: float = 0.0
    duration_s: float = 0.0
    k: int = 0


def without_traceback(error: str) -> str:
    """A stage's error (engine: message, then traceback) without its traceback."""
    return error.split("Traceback (most recent call last):")[0].strip()


def error_summary(error: str, limit: int = 300) -> str:
    """The lines of a stage's error that say what went wrong, without the traceback: the first
    line, and when it ends in ':' (its detail follows) the last line of that detail."""
    lines = [line.strip() for line in without_traceback(error).splitlines() if line.strip()]
    if not lines:
        return "no error recorded"
    head = lines[0]
    if head.endswith(":") and len(lines) > 1:
        head = f"{head} ... {lines[-1]}"
    return head[:limit]


def _stage_info(
    spec: StageSpec, stages: Sequence[StageSpec], cfg: RunConfig, run_id: str, k: int
) -> tuple[StageInfo | None, Manifest | None]:
    """What the next run would do with one stage (None if it never ran), and its manifest."""
    url = fs.stage_url(cfg.storage.root, run_id, k, spec.name)
    m, problem = check_manifest(url)
    if problem is not None:  # it re-runs; said here so a damaged record is never a silent "not run"
        return StageInfo(spec.name, "stale", {}, 0.0, f"{problem}: the stage re-runs"), None
    if m is None:
        failure = read_failure(url)
        if failure is None:
            return None, None
        error = error_summary(str(failure.get("error")))
        return StageInfo(spec.name, "failed", {}, 0.0, error), None
    rows = {f.name: f.rows for f in m.files if f.rows >= 0}
    try:
        key, _, _ = engine.stage_key(spec, stages, cfg, run_id, k)
    except StageError as exc:
        return StageInfo(spec.name, "stale", rows, m.duration_s, str(exc)), m
    why = why_incomplete(url, key)
    status = "stale" if why else "complete"
    return StageInfo(spec.name, status, rows, m.duration_s, why or ""), m


def run_info(
    root: str, run_id: str, stages: Sequence[StageSpec], cfg: RunConfig | None = None
) -> RunInfo:
    """One run's status as the next `clawloop run --run-id` would find it: per stage complete,
    stale (its inputs or code changed, or a stage it reads is stale: it will re-run), failed
    (with the reason) or not run; per run the first failed or stale stage, start and duration."""
    run_url = fs.join(root, run_id)
    doc = run_doc(root, run_id)
    if doc is None:
        raise StageError(f"no run {run_id!r} under {root}: list runs with `clawloop runs`")
    source = fs.join(run_url, RUN_FILE)
    cfg = with_root(cfg or parse_config(doc["config"], source=source), root)
    info = RunInfo(run_id, {}, float(doc.get("saved_at", 0.0)), k=cfg.iterations)
    starts, ends, previous = [], [], set()
    for k in range(1, cfg.iterations + 1):
        found, manifests = {}, []
        for spec in stages:
            found[spec.name], m = _stage_info(spec, stages, cfg, run_id, k)
            manifests += [m] if m is not None else []
        bad = {n for n, s in found.items() if s is not None and s.status != "complete"}
        previous = engine.dependents(stages, bad, previous)  # what reads them re-runs too
        for name, s in found.items():
            if s is not None and s.status == "complete" and name in previous:
                s.status, s.reason = "stale", DOWNSTREAM
        info.iterations[k] = [s for s in found.values() if s is not None]
        starts += [m.started_at for m in manifests]
        ends += [m.finished_at for m in manifests]
    info.started_at = min(starts, default=info.saved_at)
    info.duration_s = max(ends, default=info.started_at) - info.started_at
    every = [(k, s) for k, ss in info.iterations.items() for s in ss]
    failed = next(((k, s) for k, s in every if s.status == "failed"), None)
    stale = next(((k, s) for k, s in every if s.status == "stale"), None)
    done = sum(s.status == "complete" for _, s in every)
    holder = lease.live_holder(root, run_id)
    if holder is not None:
        info.status = f"running ({holder.host}, pid {holder.pid})"
    elif failed:
        info.status, info.reason = f"failed at iter {failed[0]} {failed[1].stage}", failed[1].reason
    elif stale:
        info.status, info.reason = f"stale from iter {stale[0]} {stale[1].stage}", stale[1].reason
    elif done < cfg.iterations * len(stages):
        info.status = f"incomplete: {done}/{cfg.iterations * len(stages)} stages"
    else:
        info.status = "complete"
    return info


def list_runs(root: str, stages: Sequence[StageSpec], run_id: str | None = None) -> list[RunInfo]:
    """Every run under `root` (or just `run_id`), oldest first; see `run_info`."""
    out = []
    if run_id is not None:
        check_run_id(run_id)
    fs.check_root(root)
    for rid in [run_id] if run_id else fs.listdir(root):
        if not fs.exists(fs.join(root, rid, RUN_FILE)):
            if run_id:
                raise StageError(f"no run {run_id!r} under {root}: list runs with `clawloop runs`")
            continue  # not a run folder (e.g. blobs/)
        try:
            out.append(run_info(root, rid, stages))
        except (ConfigError, RunRecordError) as exc:  # one damaged run hides no other
            out.append(RunInfo(rid, {}, 0.0, status="unreadable", reason=str(exc).splitlines()[0]))
    return sorted(out, key=lambda r: r.started_at or r.saved_at)
