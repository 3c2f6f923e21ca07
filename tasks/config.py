"""One run's configuration: a pydantic model read from one YAML file, with two profiles.

`local` (the default: CPU, bubblewrap or a local Docker engine, the tiny offline model; `clawloop
run` with no arguments uses it) and `cluster` (a vLLM endpoint, a remote Docker host, DeepSpeed).
Every section has defaults and one-line help per field; see configs/local.yaml and
configs/cluster.yaml. A bad file gets a `ConfigError` naming each wrong field and how to fix it.

Each stage's section is declared in its module in tasks/ (ForgeSettings in tasks/forge.py, ...);
the synthesize: and diagnose: sections are their stage's own config class, defaults and all
(synthesis.synthesize.SynthesizeConfig, diagnosis.diagnose.DiagnoseConfig); the rollout: and
train: sections take the fields, types and help of theirs (harness.rollout.RolloutConfig,
training.config.TrainConfig), with the CPU demo's defaults where they differ, plus the few keys
only the pipeline reads. Each stage module builds its stage config
(`tasks.rollout.rollout_config(cfg)`, ...); each is built once when the file loads, so a typo or
a bad value fails before any stage does work.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from clawloop.diagnosis.diagnose import DiagnoseConfig
from clawloop.harness.rollout import RolloutConfig
from clawloop.synthesis.synthesize import SynthesizeConfig
from clawloop.tasks import diagnose, rollout, train
from clawloop.tasks.forge import ForgeSettings
from clawloop.tasks.rollout import RolloutSettings
from clawloop.tasks.settings import (
    SET_ELSEWHERE,
    ExecutionSettings,
    LLMSettings,
    PrefectSettings,
    SandboxSettings,
    Section,
    StorageSettings,
)
from clawloop.tasks.train import TrainSettings
from clawloop.tasks.verify import VerifySettings
from clawloop.training.config import TrainConfig


class ConfigError(ValueError):
    """The run configuration is invalid; the message names the field and the fix."""


class RunConfig(Section):
    profile: Literal["local", "cluster"] = Field(
        "local", description="local: CPU demo; cluster: vLLM + Docker host + DeepSpeed"
    )
    seed: int = Field(0, description="run seed: synthesis is deterministic in (seed, iteration)")
    iterations: int = Field(2, ge=1, le=100, strict=True, description="K: iterations of the loop")
    storage: StorageSettings = Field(default_factory=StorageSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    synthesize: SynthesizeConfig = Field(default_factory=SynthesizeConfig)
    forge: ForgeSettings = Field(default_factory=ForgeSettings)
    verify: VerifySettings = Field(default_factory=VerifySettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    train: TrainSettings = Field(default_factory=TrainSettings)
    diagnose: DiagnoseConfig = Field(default_factory=DiagnoseConfig)
    prefect: PrefectSettings = Field(default_factory=PrefectSettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)

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

    @model_validator(mode="after")
    def _lora_reload_needs_an_unmerged_adapter(self) -> RunConfig:
        if self.llm.reload != "lora":
            return self
        if not self.train.lora:
            raise ValueError(
                "llm.reload: lora loads train's LoRA adapter into the running server, but "
                "train.lora is false (train writes full weights): set train.lora: true and "
                "train.merge_lora: false, or use llm.reload: restart"
            )
        if self.train.merge_lora:
            raise ValueError(
                "llm.reload: lora needs adapters relative to the base model the server serves, "
                "but train.merge_lora: true merges each phase and trains the next adapter on top "
                "of the merged weights: set train.merge_lora: false, or use llm.reload: restart"
            )
        return self

    @model_validator(mode="after")
    def _can_train(self) -> RunConfig:
        problems = train.untrainable(self.rollout_config(), self.train_config())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # ---- the stage configs these sections map to: each built by its stage module (which is
    # what the stage's cache key covers); kept here as methods for callers outside the stages.

    def rollout_config(self, **overrides: Any) -> RolloutConfig:
        return rollout.rollout_config(self, **overrides)

    def eval_rollout_config(self) -> RolloutConfig:
        return diagnose.eval_rollout_config(self)

    def train_config(self) -> TrainConfig:
        return train.train_config(self)

    def diagnose_config(self) -> DiagnoseConfig:
        return diagnose.diagnose_config(self)


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if field in SET_ELSEWHERE:
            msg = SET_ELSEWHERE[field]
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
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(
                f"invalid config {path}: the top level must be a mapping of sections "
                f"(iterations:, storage:, ...), got a {type(data).__name__}"
            )
    return parse_config(merge_overrides(data, overrides, source), source)


def merge_overrides(data: dict[str, Any], overrides: dict[str, Any], source: str) -> dict[str, Any]:
    """Command-line values over a config's, before validation (so `--runner dask` wins over the
    file's `runner: threads`): a dict merges into its section, None is "not given". A top-level
    value the file has for an overridden field must itself be valid: a bad file is not hidden."""
    out = dict(data)
    for key, value in overrides.items():
        if value is None:
            continue
        if key in data and not isinstance(value, dict) and key in RunConfig.model_fields:
            try:
                RunConfig.model_validate({key: data[key]})
            except ValidationError as exc:
                errors = [e for e in exc.errors() if e["loc"][:1] == (key,)]
                if errors:
                    raise ConfigError(
                        f"invalid config {source}: {key}: {errors[0]['msg']} (got "
                        f"{data[key]!r}); the command line overrides it, but fix the file"
                    ) from None
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out
