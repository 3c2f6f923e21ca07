"""The engine that runs stages, plain Python: cache keys, what to skip, running a stage, committing
it. What a stage is (`StageSpec`, `StageContext`, `StageResult`) is tasks/stage.py, which the stage
modules import; they never import this module, so editing the engine re-runs no stage.

Prefect (flows/pipeline.py) only
wraps `run_stage` in flows and tasks; everything that decides whether a stage runs or is skipped
lives here and is tested without Prefect. A stage's cache key is hash(config slice, content hashes
of the manifests it reads, code version = the source of every project module its module imports);
a stage whose committed manifest carries that key and whose files are intact is skipped, and says
so. A stage that raises is recorded as failed (failure.json, no manifest), so a resumed run re-runs
it.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from clawloop.storage import artifacts, fs
from clawloop.storage.cache_key import inputs_hash
from clawloop.storage.manifest import Manifest, read_manifest, why_incomplete
from clawloop.tasks.mapping import Mapper
from clawloop.tasks.stage import StageContext, StageError, StageSpec, stage_code

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig


log = logging.getLogger("clawloop.engine")


@dataclass
class StageOutcome:
    stage: str
    iteration: int
    status: Literal["ran", "skipped", "failed", "blocked"]
    reason: str  # why it ran / was skipped / failed
    duration_s: float = 0.0
    manifest: Manifest | None = None
    error: str = ""

    @property
    def rows(self) -> dict[str, int]:
        return (
            {} if self.manifest is None else {n: r for n, r in self.manifest.rows.items() if r >= 0}
        )


def stage_names(stages: Iterable[StageSpec]) -> list[str]:
    return [s.name for s in stages]


def dependents(
    stages: Sequence[StageSpec], names: Iterable[str], previous_forced: Iterable[str] = ()
) -> set[str]:
    """Stages to force in one iteration: `names`, stages reading a stage forced in the previous
    iteration (`previous_forced`), and every stage reading those within the iteration."""
    known = set(stage_names(stages))
    unknown = set(names) - known
    if unknown:
        raise StageError(
            f"unknown stage(s) {sorted(unknown)}: this pipeline has {stage_names(stages)}"
        )
    prev = set(previous_forced)
    out = set(names) | {s.name for s in stages if prev & set(s.previous)}
    for s in stages:  # stages are in pipeline order, so one pass closes over same-iteration reads
        if s.name not in out and out & set(s.upstream):
            out.add(s.name)
    return out


def upstream_hashes(
    spec: StageSpec, stages: Sequence[StageSpec], root: str, run_id: str, iteration: int
) -> dict[str, str]:
    """Content hashes of the manifests this stage reads; StageError if one is not complete."""
    present = set(stage_names(stages))
    wanted = [(iteration, u) for u in spec.upstream if u in present]
    if iteration > 1:
        wanted += [(iteration - 1, p) for p in spec.previous if p in present]
    out: dict[str, str] = {}
    for k, name in wanted:
        url = fs.stage_url(root, run_id, k, name)
        reason = why_incomplete(url)
        m = read_manifest(url)
        if reason is not None or m is None:
            raise StageError(
                f"{spec.name} (iter {iteration}) needs {name} of iter {k}, which is not complete ({reason}): run it first"
            )
        out[f"iter-{k}/{name}"] = m.content_hash()
    return out


def stage_key(
    spec: StageSpec, stages: Sequence[StageSpec], cfg: RunConfig, run_id: str, iteration: int
) -> tuple[str, dict[str, str], str]:
    """(cache key, upstream hashes, code version) for one stage of one iteration."""
    up = upstream_hashes(spec, stages, cfg.storage.root, run_id, iteration)
    code = stage_code(spec, cfg)
    return inputs_hash(spec.config_slice(cfg, iteration), up, code), up, code


def run_stage(
    spec: StageSpec,
    stages: Sequence[StageSpec],
    cfg: RunConfig,
    run_id: str,
    iteration: int,
    mapper: Mapper,
    force: bool = False,
) -> StageOutcome:
    """Skip the stage if its manifest matches, else run it and commit its artifact (manifest last)."""
    t0 = time.time()
    url = fs.stage_url(cfg.storage.root, run_id, iteration, spec.name)
    try:
        key, up, code = stage_key(spec, stages, cfg, run_id, iteration)
    except StageError as exc:
        log.warning("%s iter %d blocked: %s", spec.name, iteration, exc)
        return StageOutcome(spec.name, iteration, "blocked", str(exc))
    if not force:
        reason = why_incomplete(url, key)
        if reason is None:
            log.info(
                "%s iter %d skipped: manifest matches its inputs (cache key %s)",
                spec.name,
                iteration,
                key[:12],
            )
            return StageOutcome(
                spec.name,
                iteration,
                "skipped",
                "manifest matches its inputs",
                time.time() - t0,
                read_manifest(url),
            )
        log.info("%s iter %d runs: %s", spec.name, iteration, reason)
    else:
        reason = "forced"
        log.info("%s iter %d runs: forced", spec.name, iteration)
    artifacts.open_stage(url)  # from here on the folder does not look complete
    ctx = StageContext(
        run_id=run_id, iteration=iteration, config=cfg, stage=spec.name, map=mapper, force=force
    )
    try:
        result = spec.run(ctx)
        written = [
            artifacts.write_table(url, name, rows, schema)
            for name, (schema, rows) in result.tables.items()
        ]
        written += [artifacts.write_file(url, name, data) for name, data in result.files.items()]
        written += [entry for d in result.dirs for entry in artifacts.hash_folder(url, d)]
        manifest = artifacts.commit_stage(
            url,
            stage=spec.name,
            iteration=iteration,
            run_id=run_id,
            inputs_hash=key,
            code_version=code,
            upstream=up,
            files=written,
            started_at=t0,
            summary=result.summary,
        )
    except Exception as exc:  # a stage failure is an outcome; the loop reports it and stops
        log.error("%s iter %d failed: %s", spec.name, iteration, exc)
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        artifacts.record_failure(url, error)
        return StageOutcome(spec.name, iteration, "failed", reason, time.time() - t0, None, error)
    log.info(
        "%s iter %d wrote %s in %.2fs", spec.name, iteration, manifest.rows, manifest.duration_s
    )
    return StageOutcome(spec.name, iteration, "ran", reason, time.time() - t0, manifest)


StageRunner = Callable[[StageSpec, int, bool], StageOutcome]


def run_iteration(
    stages: Sequence[StageSpec], iteration: int, force: set[str], runner: StageRunner
) -> list[StageOutcome]:
    """Run the stages of one iteration in order; stop at the first failed or blocked stage.

    `force`: the stage names forced in this iteration (see `dependents`)."""
    outcomes = []
    for spec in stages:
        outcome = runner(spec, iteration, spec.name in force)
        outcomes.append(outcome)
        if outcome.status in ("failed", "blocked"):
            break
    return outcomes


def iteration_ok(outcomes: Sequence[StageOutcome]) -> bool:
    return all(o.status in ("ran", "skipped") for o in outcomes)
