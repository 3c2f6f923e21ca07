"""One run's configuration: a pydantic model read from one YAML file, with two profiles.

`local` (the default: CPU, bubblewrap or a local Docker engine, the tiny offline model; `clawloop
run` with no arguments uses it) and `cluster` (a vLLM endpoint, a remote Docker host, DeepSpeed).
Every section has defaults and one-line help per field; see configs/local.yaml and
configs/cluster.yaml. A bad file gets a `ConfigError` naming each wrong field and how to fix it.

The rollout:, train: and diagnose: sections are the stage's own config class (harness.rollout.
RolloutConfig, training.config.TrainConfig, generators.diagnose.DiagnoseConfig): its fields, types
and help, with the CPU demo's defaults where they differ, plus the few keys only the pipeline reads
(declared below, each with its help). `RunConfig.rollout_config()`, `.train_config()` and
`.diagnose_config()` build the stage configs; each is built once when the file loads, so a typo or
a bad value fails before any stage does work.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from abc import abstractmethod
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator
from pydantic.fields import FieldInfo

from clawloop.generators.diagnosis.diagnose import DiagnoseConfig
from clawloop.generators.synthesize import SynthesizeConfig
from clawloop.harness.rollout import RolloutConfig
from clawloop.harness.sandbox.base import Limits, SandboxConfig
from clawloop.training.config import TrainConfig


class ConfigError(ValueError):
    """The run configuration is invalid; the message names the field and the fix."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StorageSettings(_Section):
    root: str = Field(
        "runs",
        description="where runs/<run_id>/iter-<k>/<stage>/ live: a path or fsspec URL (s3://...)",
    )


class SandboxSettings(_Section):
    backend: Literal["auto", "docker", "bwrap"] = Field(
        "auto", description="auto: Docker if an engine answers, else bubblewrap"
    )
    image: str = Field(
        "clawloop-base:latest", description="Docker image tasks run in (docker/README.md builds it)"
    )
    docker_host: str | None = Field(
        None, description="DOCKER_HOST for a remote engine, e.g. ssh://gpu-box or tcp://host:2376"
    )
    wall_seconds: float = Field(60.0, gt=0, description="default wall-clock limit per command")
    memory_mb: int = Field(1024, gt=0, description="memory limit per sandbox")
    cpus: float = Field(1.0, gt=0, description="CPU share per sandbox")

    def to_sandbox_config(self) -> SandboxConfig:
        limits = Limits(wall_seconds=self.wall_seconds, memory_mb=self.memory_mb, cpus=self.cpus)
        return SandboxConfig(backend=self.backend, image=self.image, limits=limits)


class LLMSettings(_Section):
    base_url: str | None = Field(
        None,
        description="OpenAI-compatible endpoint (vLLM: http://host:8000/v1); None = local tiny model",
    )
    model: str = Field("clawloop-tiny", description="model name the endpoint serves (the policy)")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="environment variable holding the API key, if the endpoint needs one",
    )
    reload: Literal["none", "lora", "restart"] = Field(
        "none",
        description=(
            "how a running endpoint gets each iteration's new checkpoint: none = keep serving the "
            "old weights (logged as a warning); lora = load train's LoRA adapter into vLLM at "
            "runtime and roll out with it (needs train.lora); restart = stop until you restart "
            "the server on the printed checkpoint, then resume the run"
        ),
    )


class ForgeSettings(_Section):
    workers: int = Field(
        2, ge=1, le=256, description="tasks forged concurrently (threads; each uses one sandbox)"
    )
    retries: int = Field(
        3, ge=0, le=10, description="retries of a transient sandbox failure per task"
    )


class VerifySettings(_Section):
    workers: int = Field(2, ge=1, le=256, description="tasks verified concurrently")


# Stage-config fields a section does not take, because the run config sets them another way.
_SET_ELSEWHERE = {
    "rollout.band_lo": "set by rollout.band: [low, high]; set that instead",
    "rollout.band_hi": "set by rollout.band: [low, high]; set that instead",
    "rollout.concurrency": "set by rollout.workers; set that instead",
    "diagnose.start_multihop": "set by synthesize.multihop (the difficulty synthesis starts at); set that instead",
    "diagnose.start_dirtiness": "set by synthesize.dirtiness (the difficulty synthesis starts at); set that instead",
}


class _StageSection(_Section):
    """A section holding a stage config's fields; building that config when the file loads runs
    the stage's own checks (ranges, allowed names) before any stage does work."""

    @abstractmethod
    def stage_config(self, **set_elsewhere: Any) -> Any:
        """The stage's config class from this section (plus fields other sections set)."""

    @model_validator(mode="after")
    def _stage_accepts_it(self) -> _StageSection:
        self.stage_config()
        return self


def _stage_section(stage: type, section: str, **defaults: Any) -> type[_StageSection]:
    """A section model with `stage`'s fields (a dataclass's or a pydantic model's): their types,
    constraints and help, with `defaults` in place of the stage's own, less _SET_ELSEWHERE."""
    skip = {key.partition(".")[2] for key in _SET_ELSEWHERE if key.startswith(f"{section}.")}
    fields: dict[str, Any] = {}
    if issubclass(stage, BaseModel):
        for name, info in stage.model_fields.items():
            if name in defaults:
                info = FieldInfo.merge_field_infos(info, default=defaults[name])
            fields[name] = (info.annotation, info)
    else:
        hints = typing.get_type_hints(stage)
        for f in dataclasses.fields(stage):
            default = defaults.get(f.name, f.default)
            fields[f.name] = (hints[f.name], Field(default, description=f.metadata.get("help")))
    kept = {name: spec for name, spec in fields.items() if name not in skip}
    return create_model(f"{stage.__name__}Fields", __base__=_StageSection, **kept)


class RolloutSettings(_stage_section(RolloutConfig, "rollout", n=2, max_turns=3, max_tokens=64)):
    # The CPU demo's defaults (small groups, short episodes); configs/cluster.yaml sets the
    # paper's N=8, band [1, 5], 30 turns.
    band: tuple[int, int] = Field(
        (1, 1), description="keep tasks whose pass count is in [low, high]"
    )
    workers: int = Field(2, ge=1, description="episodes run concurrently")

    def stage_config(self, **set_elsewhere: Any) -> RolloutConfig:
        return RolloutConfig.from_settings({**self.model_dump(), **set_elsewhere})


class TrainSettings(_stage_section(TrainConfig, "train")):
    base_model: str | None = Field(
        None, description="policy checkpoint to start from; None = the tiny offline model"
    )

    def stage_config(self, **set_elsewhere: Any) -> TrainConfig:
        return TrainConfig.from_dict({**self.model_dump(exclude={"base_model"}), **set_elsewhere})


class DiagnoseSettings(_stage_section(DiagnoseConfig, "diagnose")):
    eval_n: int = Field(1, ge=1, description="episodes per held-out eval task")

    def stage_config(self, **set_elsewhere: Any) -> DiagnoseConfig:
        return DiagnoseConfig(**self.model_dump(exclude={"eval_n"}), **set_elsewhere)


class PrefectSettings(_Section):
    nightly_cron: str = Field(
        "0 2 * * *", description="when the nightly loop runs (cron, server time zone)"
    )


class RunConfig(_Section):
    profile: Literal["local", "cluster"] = Field(
        "local", description="local: CPU demo; cluster: vLLM + Docker host + DeepSpeed"
    )
    seed: int = Field(0, description="run seed: synthesis is deterministic in (seed, iteration)")
    iterations: int = Field(2, ge=1, le=100, description="K: iterations of the loop")
    storage: StorageSettings = Field(default_factory=StorageSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    synthesize: SynthesizeConfig = Field(default_factory=SynthesizeConfig)
    forge: ForgeSettings = Field(default_factory=ForgeSettings)
    verify: VerifySettings = Field(default_factory=VerifySettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    train: TrainSettings = Field(default_factory=TrainSettings)
    diagnose: DiagnoseSettings = Field(default_factory=DiagnoseSettings)
    prefect: PrefectSettings = Field(default_factory=PrefectSettings)

    @model_validator(mode="after")
    def _cluster_needs_endpoints(self) -> RunConfig:
        if self.profile == "cluster":
            if not self.llm.base_url:
                raise ValueError(
                    "profile 'cluster' needs llm.base_url: set it to your vLLM server, e.g. http://gpu-box:8000/v1"
                )
            if self.sandbox.backend == "bwrap":
                raise ValueError(
                    "profile 'cluster' runs sandboxes on Docker: set sandbox.backend to 'docker' or 'auto'"
                )
        return self

    @model_validator(mode="after")
    def _local_serving_needs_merged_weights(self) -> RunConfig:
        if not self.llm.base_url and self.train.lora and not self.train.merge_lora:
            # The policy would be base + adapter, and transformers serve only serves full weights:
            # rollout and diagnose would quietly run the base model.
            raise ValueError(
                "train.merge_lora: false keeps the policy as base model + LoRA adapter, which the "
                "local policy server cannot serve (llm.base_url is null): set train.merge_lora: "
                "true, or serve the policy with vLLM (llm.base_url, llm.reload: lora)"
            )
        return self

    # ---- the stage configs these sections map to (the stages call these) -----------------------

    def rollout_config(self, **overrides: Any) -> RolloutConfig:
        """clawloop.harness.rollout.RolloutConfig from `rollout:`; `overrides` replace section keys."""
        return self.rollout.stage_config(**overrides)

    def eval_rollout_config(self) -> RolloutConfig:
        """The diagnose stage's held-out rollouts: `diagnose.eval_n` episodes per task, no band."""
        n = self.diagnose.eval_n
        return self.rollout_config(n=n, band=(0, n))

    def train_config(self) -> TrainConfig:
        """clawloop.training.config.TrainConfig from `train:` (base_model is the engine's, not the trainer's)."""
        return self.train.stage_config()

    def diagnose_config(self) -> DiagnoseConfig:
        """clawloop.generators.diagnosis.diagnose.DiagnoseConfig from `diagnose:`; its difficulty starts where
        synthesis starts (synthesize.multihop/dirtiness), so guidance never drops below it."""
        return self.diagnose.stage_config(
            start_multihop=self.synthesize.multihop, start_dirtiness=self.synthesize.dirtiness
        )


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if field in _SET_ELSEWHERE:
            msg = _SET_ELSEWHERE[field]
        elif err["type"] == "extra_forbidden":
            parent, _, name = field.rpartition(".")
            known = _known_fields(parent)
            close = difflib.get_close_matches(name, known, n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"known fields: {', '.join(known)}"
            msg = f"unknown field; {fix}"
        elif "input" in err and err["type"] != "missing" and not isinstance(err["input"], dict):
            # quote a wrong value, not the whole section or file a cross-field check failed on
            msg = f"{msg} (got {err['input']!r})"
        lines.append(f"  {field}: {msg}")
    return "\n".join(lines)


def _known_fields(dotted: str) -> list[str]:
    model: type[BaseModel] = RunConfig
    for part in filter(None, dotted.split(".")):
        ann = model.model_fields.get(part)
        if (
            ann is None
            or not isinstance(ann.annotation, type)
            or not issubclass(ann.annotation, BaseModel)
        ):
            return []
        model = ann.annotation
    return sorted(model.model_fields)


def parse_config(data: dict[str, Any], source: str = "<dict>") -> RunConfig:
    """Validate a config mapping; ConfigError lists every bad field."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"invalid config {source}: the top level must be a mapping of sections, got {type(data).__name__}"
        )
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, source)) from None


def load_config(path: str | Path | None = None, **overrides: Any) -> RunConfig:
    """Read a YAML run config (None: embedded local defaults) and apply top-level overrides."""
    data: dict[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        source = str(path)
        p = Path(path)
        if not p.is_file():
            raise ConfigError(
                f"config file {path} does not exist: pass an existing YAML file (see configs/local.yaml)"
            )
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    data = {**data, **{k: v for k, v in overrides.items() if v is not None}}
    return parse_config(data, source)
