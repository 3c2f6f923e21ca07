"""One run's configuration: a pydantic model read from one YAML file.

A profile is one YAML file shipped in the package, tasks/profiles/<name>.yaml: `local` (the
default: CPU, bubblewrap or a local Docker engine, the tiny offline model; `clawloop run` with no
arguments uses it), `cluster` (a vLLM endpoint, a remote Docker host, DeepSpeed), `learning-cpu`.
`--config` takes a file path or a profile's name. Every section has defaults and one-line help per
field. A bad file gets a `ConfigError` naming each wrong field and how to fix it.

Each stage's section is its stage's own config class, defined once beside the stage's core,
defaults and all: synthesis.config.SynthesizeConfig, generators.forge.ForgeConfig,
generators.verify.VerifyConfig, harness.rollout.RolloutConfig, training.config.TrainConfig and
diagnosis.diagnose.DiagnoseConfig, all pydantic models (one style: a verb's CLI flags come from
such a model too, flows/cli/config_flags.py). Where the run config's default differs from a
stage library's (the CPU demo's small rollouts), the one place it is written is the `local`
profile's file, which lies under every config (a file says what differs from it). Each section is built when the file loads, so a typo or
a bad value fails before any stage does work.
"""

from __future__ import annotations

import copy
import difflib
import functools
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from clawloop.diagnosis.diagnose import DiagnoseConfig
from clawloop.generators.forge import ForgeConfig
from clawloop.generators.verify import VerifyConfig
from clawloop.harness.rollout import RolloutConfig
from clawloop.synthesis.config import SynthesizeConfig
from clawloop.tasks.settings import (
    ExecutionSettings,
    LLMSettings,
    PrefectSettings,
    SandboxSettings,
    Section,
    StorageSettings,
)
from clawloop.training.config import TrainConfig


class ConfigError(ValueError):
    """The run configuration is invalid; the message names the field and the fix."""


# The shipped profiles: one YAML file each, package data beside this module.
PROFILES = Path(__file__).parent / "profiles"
# The profile under every config: the run config's own defaults where they are not the stage
# libraries' (the CPU demo's small groups and short episodes; the cluster profile sets the
# paper's N=8, band [1, 5], 30 turns). `clawloop run` with no --config runs it as it is.
BASE_PROFILE = "local"


def profile_names() -> list[str]:
    """The shipped profiles' names (tasks/profiles/<name>.yaml)."""
    return sorted(p.stem for p in PROFILES.glob("*.yaml"))


def profile_path(name: str) -> Path:
    """The file of the shipped profile `name`; ConfigError naming the shipped ones if none."""
    path = PROFILES / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"no shipped profile {name!r} (in {PROFILES}): use one of "
            f"{', '.join(profile_names())}, or pass a YAML file's path"
        )
    return path


@functools.cache
def _profile_data(name: str) -> dict[str, Any]:
    return _read_yaml(profile_path(name))


def lay_under(base: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """`data` over `base`: mappings merge key by key, any other value of `data` replaces."""
    out = dict(base)
    for key, value in data.items():
        under = out.get(key)
        out[key] = (
            lay_under(under, value)
            if isinstance(under, dict) and isinstance(value, dict)
            else value
        )
    return out


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
    forge: ForgeConfig = Field(default_factory=ForgeConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    diagnose: DiagnoseConfig = Field(default_factory=DiagnoseConfig)
    prefect: PrefectSettings = Field(default_factory=PrefectSettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)

    @model_validator(mode="before")
    @classmethod
    def _base_profile_under_the_file(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return lay_under(copy.deepcopy(_profile_data(BASE_PROFILE)), data)

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
        if (
            not self.llm.base_url
            and self.llm.server == "local"
            and self.train.lora
            and not self.train.merge_lora
        ):
            # The policy would be base + adapter, and transformers serve only serves full weights:
            # rollout and diagnose would quietly run the base model.
            raise ValueError(
                "train.merge_lora: false keeps the policy as base model + LoRA adapter, which the "
                "local policy server cannot serve (llm.base_url is null): set train.merge_lora: "
                "true, or serve the policy with vLLM (llm.server: vllm, or llm.base_url with "
                "llm.reload: lora)"
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
                "but train.merge_lora: true merges each iteration's adapter and trains the next "
                "one on top of the merged weights: set train.merge_lora: false, or use llm.reload: "
                "restart"
            )
        return self

    @model_validator(mode="after")
    def _can_train(self) -> RunConfig:
        problems = untrainable(self.rollout, self.train)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def untrainable(rollout: RolloutConfig, train: TrainConfig) -> list[str]:
    """What in this rollout + train pair can never train, each with the fix; [] when it can.

    Pure and self-contained: RunConfig's validator below calls it once when the file loads, so
    a run that would report `nothing_to_train` every iteration is refused before any stage runs."""
    n, lo, hi = rollout.n, rollout.band_lo, rollout.band_hi
    band = f"rollout.band [{lo}, {hi}]"
    problems: list[str] = []
    if lo > n:
        problems.append(
            f"{band} keeps tasks with at least {lo} passes out of rollout.n={n}: no task can be "
            f"kept, so nothing is ever trained; set the band within [0, {n}], e.g. [1, {max(1, n - 1)}]"
        )
        return problems
    if train.run_grpo and rollout.temperature != 1.0:
        problems.append(
            f"GRPO (train.phases: {train.phases}) ratios the trainer's log-softmax at "
            f"temperature 1 against the sampler's logprobs, but rollout.temperature="
            f"{rollout.temperature:g} samples from another distribution (vLLM's "
            "processed_logprobs are tempered; a 0 is greedy and gives no spread): set "
            "rollout.temperature: 1, or train.phases: sft"
        )
    if train.run_grpo:
        if n < 2:
            problems.append(
                f"GRPO (train.phases: {train.phases}) compares the rollouts of one task, but "
                f"rollout.n={n} makes groups of one, which have no reward spread: set rollout.n to "
                "2 or more (8 in the GRPO papers), or train.phases: sft"
            )
        else:
            # Under the outcome reward a group has spread only with some but not all passed; a
            # shaped reward can still differ among all-failed groups, never among all-passed.
            spread_lo = 1 if train.reward == "outcome" else 0
            if hi < spread_lo or lo > n - 1:
                problems.append(
                    f"GRPO (train.phases: {train.phases}, train.reward: {train.reward}) needs "
                    f"kept groups whose rewards differ, but {band} with rollout.n={n} keeps only "
                    f"groups that all {'passed' if lo > n - 1 else 'failed'}: set the band "
                    f"within [{spread_lo}, {n - 1}], e.g. [1, {n - 1}]"
                )
    if train.run_sft and hi < 1:
        problems.append(
            f"SFT (train.phases: {train.phases}) trains on passed episodes of kept tasks, but "
            f"{band} keeps only tasks that never passed: set rollout.band's high end to 1 or "
            "more, or train.phases: grpo"
        )
    return problems


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        parent, _, name = field.rpartition(".")
        derived = _derived_field(parent, name)
        moved = _moved_field(parent, name)
        if moved and err["type"] in UNKNOWN_FIELD:
            msg = moved
        elif derived and err["type"] in UNKNOWN_FIELD:
            msg = derived
        elif err["type"] in UNKNOWN_FIELD:
            known = _known_fields(parent)
            close = difflib.get_close_matches(name, known, n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"known fields: {', '.join(known)}"
            msg = f"unknown field; {fix}"
        elif "input" in err and err["type"] != "missing" and not isinstance(err["input"], dict):
            # quote a wrong value, not the whole section or file a cross-field check failed on
            msg = f"{msg} (got {err['input']!r})"
        lines.append(f"  {field}: {msg}")
    return "\n".join(lines)


# What pydantic reports for a key a section does not have.
UNKNOWN_FIELD = ("extra_forbidden",)


def _section_class(dotted: str) -> type | None:
    """The model a dotted section path validates into."""
    model: type = RunConfig
    for part in filter(None, dotted.split(".")):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        info = model.model_fields.get(part)
        if info is None or not isinstance(info.annotation, type):
            return None
        model = info.annotation
    return model


def _known_fields(dotted: str) -> list[str]:
    model = _section_class(dotted)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return sorted(model.model_fields)
    return []


def _moved_field(dotted: str, name: str) -> str | None:
    """For a key of an older layout (a section class's MOVED, e.g. SynthesizeConfig's
    `domain_share`): where it is now."""
    moved = getattr(_section_class(dotted), "MOVED", {}).get(name)
    return f"moved to {moved}" if moved else None


def _derived_field(dotted: str, name: str) -> str | None:
    """For a key that names a value the section's class derives from another field (a property
    whose docstring says "set by X", e.g. RolloutConfig.concurrency): where to set it instead."""
    prop = getattr(_section_class(dotted), name, None)
    doc = (prop.__doc__ or "").strip() if isinstance(prop, property) else ""
    if not doc.startswith("set by "):
        return None
    return f"set by {dotted}.{doc.removeprefix('set by ')}; set that instead"


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
    """Read a YAML run config (`config_file(path)`) and apply top-level overrides."""
    file = config_file(path)
    return parse_config(merge_overrides(_read_yaml(file), overrides, str(file)), str(file))


def config_file(path: str | Path | None) -> Path:
    """The file a `--config` value names: a YAML file's path, or a shipped profile's name
    (`cluster`); None: the base profile (`local`). ConfigError when it is neither."""
    if path is None:
        return profile_path(BASE_PROFILE)
    if Path(path).is_file():
        return Path(path)
    if str(path) in profile_names():
        return profile_path(str(path))
    raise ConfigError(
        f"config file {path} does not exist: pass an existing YAML file or a shipped "
        f"profile's name ({', '.join(profile_names())}; their files are in {PROFILES})"
    )


def _read_yaml(path: Path) -> dict[str, Any]:
    """A run config file's mapping; ConfigError for bad YAML, an unreadable file, a non-mapping."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"invalid config {path}: the top level must be a mapping of sections "
            f"(iterations:, storage:, ...), got a {type(data).__name__}"
        )
    return data


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
