"""The `synthesize:` section of the run config: the sample's own settings at the top, then one
section per synthesis source and one for the generator writer the LLM sources share.

    synthesize:
      n_train: 4                 # the sample (the built-in library and your generator files)
      writer: {endpoint: null, workers: 2}   # the generator-writing LLM (llm, skills, domain)
      llm: {share: 0.0}          # LLM-written generators
      domain: {share: 0.25, ...} # domain-grounded tasks from executable domains
      skills: {share: 0.25, ...} # SkillSynth tasks from skill folders
      external: {tasks: []}      # imported task folders

Each source's cache key holds its own section (tasks/*_source.py dump it whole), so a new
setting of a source keys that source without a list to keep. A key of the old flat layout
(`synthesize.domain_share`) is refused with its new name (`MOVED`, read by tasks/config.py's
error messages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clawloop.synthesis.external import ExternalTaskSource

MAX_LEVEL = 3


def _existing(paths: list[str]) -> list[str]:
    missing = [p for p in paths if not Path(p).expanduser().exists()]
    if missing:
        raise ValueError(
            f"no such file or folder: {', '.join(missing)} (relative paths are from "
            f"{Path.cwd()}): fix the path, or remove it from the list"
        )
    return paths


class WriterEndpoint(BaseModel):
    """An OpenAI-compatible endpoint for the generator-writing LLM."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="OpenAI-compatible URL, e.g. http://gpu-host:8000/v1")
    model: str = Field(description="model name the endpoint serves")
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="environment variable holding the API key, if needed"
    )


class WriterSettings(BaseModel):
    """The generator-writing LLM the llm and skills sources write with (and the domain source
    rewrites instructions with)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: WriterEndpoint | None = Field(
        None,
        description="the generator-writing endpoint; null = the policy endpoint llm.* (no "
        "teacher); with neither, the built-in library is used and the stage says so",
    )
    workers: int = Field(
        2, ge=1, le=256, description="generators written concurrently (each forges in a sandbox)"
    )


# The old `synthesize.llm` was the writer's endpoint: its fields say where they went.
_ENDPOINT_MOVED = {
    name: f"synthesize.writer.endpoint.{name}" for name in ("base_url", "model", "api_key_env")
}


class LLMSource(BaseModel):
    """LLM-written generators (tasks/llm_source.py)."""

    model_config = ConfigDict(extra="forbid")
    MOVED: ClassVar[dict[str, str]] = _ENDPOINT_MOVED

    share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="fraction of train candidates whose generator the synthesis LLM writes (same "
        "spec; forged + verified in a sandbox; a failed one keeps its built-in generator)",
    )


class DomainSource(BaseModel):
    """Domain-grounded tasks from executable domains (tasks/domain_source.py)."""

    model_config = ConfigDict(extra="forbid")

    share: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="fraction of train candidates that are domain-grounded tasks (executable "
        "domains: the built-in ones and synthesize.domain.paths); 0 turns the source off",
    )
    paths: list[str] = Field(
        default_factory=list, description="your executable-domain folders (domain.toml, tools/)"
    )
    builtin: bool = Field(True, description="use the built-in executable domains")
    max_nodes: int = Field(6, ge=2, le=16, description="abstract task graph size")
    subgoals: int = Field(2, ge=1, le=4, description="sub-goals per domain task")
    error_recovery: bool = Field(True, description="domain tasks may need an error-recovery path")

    @field_validator("paths")
    @classmethod
    def _paths_exist(cls, paths: list[str]) -> list[str]:
        return _existing(paths)


class SkillsSource(BaseModel):
    """SkillSynth tasks from skill folders (tasks/skill_source.py)."""

    model_config = ConfigDict(extra="forbid")

    share: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="fraction of train candidates made by SkillSynth from synthesize.skills.dirs "
        "(a skill graph, sampled paths, Planner + Constructor through the writer endpoint); "
        "without dirs or an endpoint the source is off and the stage says so",
    )
    dirs: list[str] = Field(
        default_factory=list, description="folders of skill folders (each with a SKILL.md)"
    )
    scenarios: Literal["llm", "heuristic"] = Field(
        "llm", description="scenario inference: the writer endpoint (cached), or the offline one"
    )
    sampler: Literal["inverse", "uniform"] = Field(
        "inverse", description="path sampler: inverse visit frequency, or the uniform baseline"
    )
    path_len: tuple[int, int] = Field((2, 4), description="[min, max] skills per path")
    max_repairs: int = Field(3, ge=0, le=10, description="Constructor repairs per path")

    @field_validator("dirs")
    @classmethod
    def _paths_exist(cls, paths: list[str]) -> list[str]:
        return _existing(paths)

    @field_validator("path_len")
    @classmethod
    def _length_range(cls, v: tuple[int, int]) -> tuple[int, int]:
        if not 1 <= v[0] <= v[1]:
            raise ValueError(f"need 1 <= min <= max skills per path, got {list(v)}")
        return v


class ExternalSource(BaseModel):
    """Imported task folders mixed into the train split (tasks/external_source.py)."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[ExternalTaskSource] = Field(
        default_factory=list,
        description="imported tasks mixed into the train split: [{path: tasks.parquet from "
        "`clawloop import clawgym|harbor`, share: fraction of the train candidates}] (origin "
        "external:<domain>; rolled out and band-filtered as any train task)",
    )


# Where each key of the old flat `synthesize:` layout went.
MOVED = {
    "llm_share": "synthesize.llm.share",
    "llm_workers": "synthesize.writer.workers",
    "domain_share": "synthesize.domain.share",
    "domain_paths": "synthesize.domain.paths",
    "builtin_domains": "synthesize.domain.builtin",
    "domain_max_nodes": "synthesize.domain.max_nodes",
    "domain_subgoals": "synthesize.domain.subgoals",
    "domain_error_recovery": "synthesize.domain.error_recovery",
    "skill_graph_share": "synthesize.skills.share",
    "skills_dirs": "synthesize.skills.dirs",
    "skill_scenarios": "synthesize.skills.scenarios",
    "skill_sampler": "synthesize.skills.sampler",
    "skill_path_len": "synthesize.skills.path_len",
    "skill_max_repairs": "synthesize.skills.max_repairs",
    "external_tasks": "synthesize.external.tasks",
}


class SynthesizeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    MOVED: ClassVar[dict[str, str]] = MOVED
    # The sections that are not the sample's: each source's, and the writer they share.
    SECTIONS: ClassVar[tuple[str, ...]] = ("writer", "llm", "domain", "skills", "external")

    builtin: bool = Field(True, description="sample from the built-in generator library")
    generator_paths: list[str] = Field(
        default_factory=list, description="your generator .py files or folders of them"
    )
    n_train: int = Field(4, ge=0, le=100_000, description="train candidates per iteration")
    n_eval: int = Field(2, ge=0, le=100_000, description="held-out eval candidates per iteration")
    eval_fraction: float = Field(
        0.2,
        ge=0.0,
        lt=1.0,
        description="share of (capability, domain) groups held out for eval; with a single group, "
        "share of the candidates (seeds of the same generators) held out instead",
    )
    fixed_eval: bool = Field(
        False,
        description="every iteration evaluates on iteration 1's held-out candidates (same "
        "generators, seeds and difficulty), so pass rates compare across iterations; off: each "
        "iteration draws fresh eval seeds at the guidance's difficulty",
    )
    multihop: int = Field(0, ge=0, le=MAX_LEVEL, description="starting multi-hop level 0-3")
    dirtiness: int = Field(0, ge=0, le=MAX_LEVEL, description="starting dirtiness level 0-3")
    capabilities: list[str] = Field(
        default_factory=list, description="restrict the built-in library to these (empty: all)"
    )
    domains: list[str] = Field(
        default_factory=list, description="restrict the built-in library to these (empty: all)"
    )
    cache_dir: str = Field(
        "~/.cache/clawloop",
        description="LLM-derived synthesis caches: skill graphs (one per corpus hash and scenario "
        "source) and scenario replies under skill-graphs/, domain tool analyses under "
        "domain-analysis/",
    )
    writer: WriterSettings = Field(default_factory=WriterSettings)
    llm: LLMSource = Field(default_factory=LLMSource)
    domain: DomainSource = Field(default_factory=DomainSource)
    skills: SkillsSource = Field(default_factory=SkillsSource)
    external: ExternalSource = Field(default_factory=ExternalSource)

    @field_validator("generator_paths")
    @classmethod
    def _paths_exist(cls, paths: list[str]) -> list[str]:
        return _existing(paths)

    @model_validator(mode="before")
    @classmethod
    def _old_llm_endpoint(cls, data: Any) -> Any:
        # `llm: null` was the old layout's "no writer endpoint": say where that went.
        if isinstance(data, dict) and "llm" in data and data["llm"] is None:
            raise ValueError(
                "llm: null is the old generator-writing endpoint setting: moved to "
                "synthesize.writer.endpoint (null: the policy endpoint)"
            )
        return data

    def sample_dump(self) -> dict[str, Any]:
        """The sample's own settings (everything but the sections), as JSON values."""
        return self.model_dump(mode="json", exclude=set(self.SECTIONS) | {"cache_dir"})
