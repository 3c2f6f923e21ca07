"""What every stage module in tasks/ is made of: a `StageSpec` (its name, what it reads, its config
slice, its run function) and the `StageContext` its run function gets.

A stage module defines `run(ctx) -> StageResult`, `config_slice(cfg, iteration)` and
`STAGE = StageSpec(...)`; tasks/engine.py decides whether it runs (its cache key covers the source
of every project module the stage module imports, its config slice and the content hashes of the
artifacts it reads), runs it, and commits the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from clawloop.storage import artifacts, fs
from clawloop.storage.cache_key import PROJECT_ROOT, code_version
from clawloop.storage.manifest import Manifest, read_manifest, sha256_json
from clawloop.tasks.mapping import Mapper

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig


def resume_command(root: str, run_id: str) -> str:
    """The command that resumes `run_id` (naming the storage root unless it is the default)."""
    where = "" if root == "runs" else f" --root {root}"
    return f"clawloop run --run-id {run_id}{where}"


class StageError(RuntimeError):
    """A stage cannot run or failed: the message says what, where, and what to do."""


@dataclass
class StageResult:
    """What a stage function returns: tables to write, extra files, and key figures.

    `summary` goes into the manifest (timings and host facts belong there, not in rows, so an
    unchanged re-run writes byte-identical Parquet and downstream stages skip)."""

    tables: dict[str, tuple[pa.Schema, list[dict[str, Any]]]]
    files: dict[str, bytes] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    # Subfolders the stage wrote itself inside its folder (a model checkpoint): every file in them
    # is hashed into the manifest, so deleting or damaging one re-runs the stage.
    dirs: list[str] = field(default_factory=list)


@dataclass
class StageContext:
    """Everything a stage function may use; reading other stages goes through it."""

    run_id: str
    iteration: int
    config: RunConfig
    stage: str
    map: Mapper
    force: bool = False  # a forced run: a stage's own step caches (tasks/source.py) are not read

    @property
    def root(self) -> str:
        return self.config.storage.root

    @property
    def resume(self) -> str:
        """The command that resumes this run."""
        return resume_command(self.root, self.run_id)

    @property
    def url(self) -> str:
        return fs.stage_url(self.root, self.run_id, self.iteration, self.stage)

    def stage_url(self, stage: str, iteration: int | None = None) -> str:
        return fs.stage_url(
            self.root, self.run_id, self.iteration if iteration is None else iteration, stage
        )

    def rows(self, stage: str, table: str, iteration: int | None = None) -> list[dict[str, Any]]:
        return artifacts.read_rows(self.stage_url(stage, iteration), table)

    def manifest(self, stage: str, iteration: int | None = None) -> Manifest | None:
        return read_manifest(self.stage_url(stage, iteration))


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: Callable[[StageContext], StageResult]
    config_slice: Callable[[RunConfig, int], dict[str, Any]]  # (config, iteration) -> what matters
    module: str = ""  # the stage's module: its import closure is its code version ("": none)
    upstream: tuple[str, ...] = ()  # same-iteration stages whose artifacts it reads
    previous: tuple[str, ...] = ()  # previous-iteration stages it reads (guidance, checkpoint)
    workers: Callable[[RunConfig], int] = lambda cfg: 1  # items in flight in `ctx.map`
    # The modules whose import closures are its code when they depend on its config (synthesize:
    # its own and its enabled sources'); None: `module` alone.
    code_modules: Callable[[RunConfig], tuple[str, ...]] | None = None


def stage_code(spec: StageSpec, cfg: RunConfig, root: Path = PROJECT_ROOT) -> str:
    """The stage's code version: its module's import closure (storage/cache_key.py), or, for a
    stage whose code depends on its config, the versions of each of its `code_modules`."""
    if spec.code_modules is None:
        return code_version(spec.module, root) if spec.module else ""
    return sha256_json({m: code_version(m, root) for m in spec.code_modules(cfg)})


def fail_on_infra(ctx: StageContext, what: str, faults: list[str], total: int, fix: str) -> None:
    """Raise StageError when items hit infrastructure faults that outlived their retries: such
    items are not results, so the stage is not committed and a resumed run re-runs it."""
    if not faults:
        return
    raise StageError(
        f"{ctx.stage} (iteration {ctx.iteration}): {len(faults)} of {total} {what} hit "
        f"infrastructure faults that outlived their retries; first: {faults[0]}\n"
        f"{fix}, then resume: {ctx.resume}"
    )
