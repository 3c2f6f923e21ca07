"""Runs on disk: run ids, the config snapshot each run keeps, listing runs, and the plain loop.

`runs/<run_id>/run.json` stores the config a run started with, so resuming a killed run or re-running
one stage uses the same settings without the original YAML. `run_loop` is the whole pipeline
without Prefect (used by tests, the benchmark and `clawloop run --no-prefect`); the Prefect flows
call the same `flows.engine` functions stage by stage.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from clawloop.flows import engine
from clawloop.storage import fs
from clawloop.storage.manifest import read_failure, read_manifest
from clawloop.tasks.config import ConfigError, RunConfig, load_config, parse_config

RUN_FILE = "run.json"
log = logging.getLogger("clawloop.runs")


def new_run_id() -> str:
    return datetime.now(UTC).strftime("run-%Y%m%d-%H%M%S")


def save_run_config(cfg: RunConfig, run_id: str) -> None:
    url = fs.join(cfg.storage.root, run_id, RUN_FILE)
    doc = {"run_id": run_id, "saved_at": time.time(), "config": cfg.model_dump(mode="json")}
    fs.write_bytes_atomic(url, json.dumps(doc, indent=2, sort_keys=True).encode())


def load_run_config(root: str, run_id: str) -> RunConfig | None:
    url = fs.join(root, run_id, RUN_FILE)
    if not fs.exists(url):
        return None
    return parse_config(json.loads(fs.read_bytes(url))["config"], source=url)


def resolve_config(
    config_path: str | None, run_id: str | None, root: str | None = None, **overrides: Any
) -> RunConfig:
    """An explicit YAML wins; else a resumed run's saved config; else the embedded defaults."""
    if config_path is None and run_id is not None:
        saved = load_run_config(root or "runs", run_id)
        if saved is not None:
            data = saved.model_dump(mode="json")
            data.update({k: v for k, v in overrides.items() if v is not None})
            return parse_config(data, source=f"{run_id}/{RUN_FILE}")
    cfg = load_config(config_path, **overrides)
    if root is not None:
        cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"root": root})})
    return cfg


def apply_environment(cfg: RunConfig) -> None:
    """Process-wide settings the sandbox backends read: a remote Docker engine via DOCKER_HOST."""
    if cfg.sandbox.docker_host:
        os.environ["DOCKER_HOST"] = cfg.sandbox.docker_host


def sweep_sandboxes() -> None:
    """Remove sandboxes (labelled containers, bwrap roots) that killed runs left behind.

    Best effort: a sweep that races another process's cleanup must not stop the pipeline."""
    from clawloop.harness.sandbox.backend import sweep

    try:
        removed = sweep()
    except Exception as exc:
        log.warning("sandbox sweep failed (continuing): %s: %s", type(exc).__name__, exc)
        return
    if any(removed.values()):
        log.info("swept sandboxes left by killed runs: %s", {k: len(v) for k, v in removed.items()})


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
    stages: Sequence[engine.StageSpec],
    mapper: engine.Mapper,
    force: Sequence[str] = (),
    on_outcome: Callable[[engine.StageOutcome], None] | None = None,
) -> RunSummary:
    """All K iterations, plain Python: completed stages skip, `force` re-runs stages + dependents."""
    t0 = time.time()
    forced: set[str] = set()
    save_run_config(cfg, run_id)
    apply_environment(cfg)
    sweep_sandboxes()
    summary = RunSummary(run_id=run_id, root=cfg.storage.root)

    def runner(spec: engine.StageSpec, k: int, force_it: bool) -> engine.StageOutcome:
        outcome = engine.run_stage(spec, stages, cfg, run_id, k, mapper, force=force_it)
        if on_outcome is not None:
            on_outcome(outcome)
        return outcome

    for k in range(1, cfg.iterations + 1):
        forced = engine.dependents(stages, force, forced)
        outcomes = engine.run_iteration(stages, k, forced, runner)
        summary.outcomes += outcomes
        if not engine.iteration_ok(outcomes):
            break
    summary.duration_s = time.time() - t0
    return summary


def rerun_stage(
    cfg: RunConfig,
    run_id: str,
    iteration: int,
    stage: str,
    stages: Sequence[engine.StageSpec],
    mapper: engine.Mapper,
) -> engine.StageOutcome:
    """Re-run one stage of one iteration from its upstream's cached artifacts (forced)."""
    spec = next((s for s in stages if s.name == stage), None)
    if spec is None:
        raise engine.StageError(
            f"unknown stage {stage!r}: this pipeline has {engine.stage_names(stages)}"
        )
    if not 1 <= iteration <= cfg.iterations:
        raise ConfigError(f"--iteration {iteration} is outside run {run_id}'s 1..{cfg.iterations}")
    apply_environment(cfg)
    return engine.run_stage(spec, stages, cfg, run_id, iteration, mapper, force=True)


@dataclass
class StageInfo:
    stage: str
    status: str  # complete | failed | incomplete
    rows: dict[str, int]
    duration_s: float
    reason: str = ""  # why it failed (the first line of its error)


@dataclass
class RunInfo:
    run_id: str
    iterations: dict[int, list[StageInfo]]
    saved_at: float


def list_runs(root: str) -> list[RunInfo]:
    """Every run under `root`, with each stage's status and row counts (from manifests)."""
    out = []
    for run_id in fs.listdir(root):
        run_url = fs.join(root, run_id)
        if not fs.exists(fs.join(run_url, RUN_FILE)):
            continue  # not a run folder (e.g. blobs/)
        saved = json.loads(fs.read_bytes(fs.join(run_url, RUN_FILE))).get("saved_at", 0.0)
        iters: dict[int, list[StageInfo]] = {}
        for name in fs.listdir(run_url):
            if not name.startswith("iter-") or not name[5:].isdigit():
                continue
            infos = []
            for stage in fs.listdir(fs.join(run_url, name)):
                m = read_manifest(fs.join(run_url, name, stage))
                failure = read_failure(fs.join(run_url, name, stage)) if m is None else None
                if failure is not None:
                    error = str(failure.get("error") or "").strip()
                    reason = error.splitlines()[0] if error else "no error recorded"
                    infos.append(StageInfo(stage, "failed", {}, 0.0, reason))
                elif m is None:
                    infos.append(StageInfo(stage, "incomplete", {}, 0.0))
                else:
                    infos.append(
                        StageInfo(
                            stage,
                            m.status,
                            {f.name: f.rows for f in m.files if f.rows >= 0},
                            m.duration_s,
                        )
                    )
            iters[int(name[5:])] = infos
        out.append(RunInfo(run_id, dict(sorted(iters.items())), saved))
    return sorted(out, key=lambda r: r.saved_at)
