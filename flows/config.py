"""One run's configuration: a pydantic model read from one YAML file, with two profiles.

`local` (the default: CPU, bubblewrap or a local Docker engine, the tiny offline model; `clawloop
run` with no arguments uses it) and `cluster` (a vLLM endpoint, a remote Docker host, DeepSpeed).
Every section has defaults and one-line help per field; see configs/local.yaml and
configs/cluster.yaml. A bad file gets a `ConfigError` naming each wrong field and how to fix it.

The rollout:, train: and diagnose: sections name a few options here (with the CPU demo's
defaults) and pass every other key to the stage's own config class (harness.rollout.RolloutConfig,
training.config.TrainConfig, generators.diagnose.DiagnoseConfig). `RunConfig.rollout_config()`,
`.train_config()` and `.diagnose_config()` are the one mapping from sections to those classes; the
config is checked through them when it is loaded, so a typo fails before any stage does work.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from generators.synthesize import SynthesizeConfig
from harness.sandbox.base import Limits, SandboxConfig

if TYPE_CHECKING:
    from generators.diagnose import DiagnoseConfig
    from harness.rollout import RolloutConfig
    from training.config import TrainConfig


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


class _OpenSection(BaseModel):
    # The rollout/train/diagnose stages own their option names: other keys pass through to them,
    # and RunConfig checks them against the stage's config class when the file is loaded.
    model_config = ConfigDict(extra="allow")


class RolloutSettings(_OpenSection):
    # Defaults are the CPU demo's (small groups, short episodes); configs/cluster.yaml sets the
    # paper's N=8, band [1, 5], 30 turns. Other harness.rollout.RolloutConfig fields pass through.
    n: int = Field(2, ge=1, description="rollouts per task (the GRPO group size)")
    band: tuple[int, int] = Field(
        (1, 1), description="keep tasks whose pass count is in [low, high]"
    )
    workers: int = Field(2, ge=1, description="episodes run concurrently")
    max_turns: int = Field(3, ge=1, description="assistant replies per episode")
    max_tokens: int = Field(64, ge=1, description="completion tokens per reply")


class TrainSettings(_OpenSection):
    deepspeed: str | None = Field(
        None, description="DeepSpeed config file (cluster); None = plain CPU/GPU training"
    )
    base_model: str | None = Field(
        None, description="policy checkpoint to start from; None = the tiny offline model"
    )


class DiagnoseSettings(_OpenSection):
    # Other generators.diagnose.DiagnoseConfig fields pass through, except its start_multihop and
    # start_dirtiness: those are synthesize.multihop and synthesize.dirtiness.
    workers: int = Field(2, ge=1, description="failure summaries requested concurrently")
    eval_n: int = Field(1, ge=1, description="episodes per held-out eval task")


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
        extra = self.train.model_extra or {}
        if not self.llm.base_url and extra.get("lora") is True and extra.get("merge_lora") is False:
            # The policy would be base + adapter, and transformers serve only serves full weights:
            # rollout and diagnose would quietly run the base model.
            raise ValueError(
                "train.merge_lora: false keeps the policy as base model + LoRA adapter, which the "
                "local policy server cannot serve (llm.base_url is null): set train.merge_lora: "
                "true, or serve the policy with vLLM (llm.base_url, llm.reload: lora)"
            )
        return self

    @model_validator(mode="after")
    def _stage_sections_fit_their_stages(self) -> RunConfig:
        errors = _stage_section_errors(self)
        if errors:
            raise StageSectionError(errors)
        return self

    # ---- the stage configs these sections map to (the stages call these) -----------------------

    def rollout_config(self, **overrides: Any) -> RolloutConfig:
        """harness.rollout.RolloutConfig from `rollout:`; `overrides` replace section keys."""
        from harness.rollout import RolloutConfig

        return RolloutConfig.from_settings({**self.rollout.model_dump(), **overrides})

    def eval_rollout_config(self) -> RolloutConfig:
        """The diagnose stage's held-out rollouts: `diagnose.eval_n` episodes per task, no band."""
        n = self.diagnose.eval_n
        return self.rollout_config(n=n, band=(0, n))

    def train_config(self) -> TrainConfig:
        """training.config.TrainConfig from `train:` (base_model is the engine's, not the trainer's)."""
        from training.config import TrainConfig

        section = self.train.model_dump(exclude={"base_model"})
        return TrainConfig.from_dict({k: v for k, v in section.items() if v is not None})

    def diagnose_config(self) -> DiagnoseConfig:
        """generators.diagnose.DiagnoseConfig from `diagnose:`; its difficulty starts where
        synthesis starts (synthesize.multihop/dirtiness), so guidance never drops below it."""
        from generators.diagnose import DiagnoseConfig

        return DiagnoseConfig(
            **self.diagnose.model_dump(exclude={"eval_n"}),
            start_multihop=self.synthesize.multihop,
            start_dirtiness=self.synthesize.dirtiness,
        )


class StageSectionError(ValueError):
    """rollout:/train:/diagnose: keys their stage rejects; one 'section.field: problem' per line."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


# Keys of a section that belong to the engine or another section, not to the stage's class.
_DERIVED = {
    "diagnose": {
        "start_multihop": "set by synthesize.multihop (the difficulty synthesis starts at); set that instead",
        "start_dirtiness": "set by synthesize.dirtiness (the difficulty synthesis starts at); set that instead",
    }
}


def _stage_classes() -> dict[str, tuple[type, set[str], Callable[[RunConfig], Any]]]:
    """section -> (stage config class, keys the section accepts, builder); sections whose stage
    code is not installed in this checkout are left out (that stage is not in the pipeline)."""
    out: dict[str, tuple[type, set[str], Callable[[RunConfig], Any]]] = {}
    try:
        from harness.rollout import RolloutConfig

        keys = set(RolloutConfig.__dataclass_fields__) | {"band", "workers"}
        out["rollout"] = (RolloutConfig, keys, RunConfig.rollout_config)
    except ImportError:
        pass
    try:
        from training.config import TrainConfig

        keys = set(TrainConfig.__dataclass_fields__)
        out["train"] = (TrainConfig, keys, RunConfig.train_config)
    except ImportError:
        pass
    try:
        from generators.diagnose import DiagnoseConfig

        keys = set(DiagnoseConfig.model_fields) - set(_DERIVED["diagnose"])
        out["diagnose"] = (DiagnoseConfig, keys, RunConfig.diagnose_config)
    except ImportError:
        pass
    return out


def _type_errors(name: str, cls: type, values: dict[str, Any]) -> list[str]:
    """Values of a dataclass config whose type is wrong (dataclasses do not check types)."""
    hints = typing.get_type_hints(cls)
    lines = []
    for key, value in values.items():
        if key not in hints:
            continue
        try:
            TypeAdapter(hints[key]).validate_python(value, strict=True)
        except ValidationError as exc:
            msg = exc.errors()[0]["msg"]
            lines.append(f"{name}.{key}: {msg} (got {value!r})")
    return lines


def _stage_section_errors(cfg: RunConfig) -> list[str]:
    lines: list[str] = []
    for name, (cls, keys, build) in _stage_classes().items():
        section: BaseModel = getattr(cfg, name)
        accepted = keys | set(type(section).model_fields)
        extra = dict(section.model_extra or {})
        bad = False
        for key in sorted(extra):
            if key in _DERIVED.get(name, {}):
                lines.append(f"{name}.{key}: {_DERIVED[name][key]}")
            elif key not in accepted:
                close = difflib.get_close_matches(key, sorted(accepted), n=1)
                fix = (
                    f"did you mean '{close[0]}'?"
                    if close
                    else f"known fields: {', '.join(sorted(accepted))}"
                )
                lines.append(f"{name}.{key}: unknown field; {fix}")
            else:
                continue
            bad = True
        if bad:
            continue
        if isinstance(cls, type) and hasattr(cls, "__dataclass_fields__"):
            type_lines = _type_errors(name, cls, extra)
            if type_lines:
                lines += type_lines
                continue
        try:
            build(cfg)
        except ValidationError as exc:  # a pydantic stage config (diagnose) names the field
            for err in exc.errors():
                field = ".".join(str(p) for p in err["loc"])
                lines.append(f"{name}.{field}: {err['msg']} (got {err.get('input')!r})")
        except (TypeError, ValueError) as exc:
            lines.append(f"{name}: {exc}")
    return lines


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
        stage_error = (err.get("ctx") or {}).get("error")
        if isinstance(stage_error, StageSectionError):
            lines += [f"  {line}" for line in stage_error.lines]
            continue
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            parent, _, name = field.rpartition(".")
            known = _known_fields(parent)
            close = difflib.get_close_matches(name, known, n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"known fields: {', '.join(known)}"
            msg = f"unknown field; {fix}"
        elif "input" in err and err["type"] != "missing":
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
