"""One run's configuration: a pydantic model read from one YAML file, with two profiles.

`local` (the default: CPU, bubblewrap or a local Docker engine, the tiny offline model; `clawloop
run` with no arguments uses it) and `cluster` (a vLLM endpoint, a remote Docker host, DeepSpeed).
Every section has defaults and one-line help per field; see configs/local.yaml and
configs/cluster.yaml. A bad file gets a `ConfigError` naming each wrong field and how to fix it.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from generators.synthesize import SynthesizeConfig
from harness.sandbox.base import Limits, SandboxConfig


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
    # The rollout/train/diagnose stages own their option names; unknown keys pass through to them.
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
    # Other generators.diagnose.DiagnoseConfig fields pass through.
    workers: int = Field(2, ge=1, description="failure summaries requested concurrently")
    eval_n: int = Field(1, ge=1, description="episodes per held-out eval task")


class PrefectSettings(_Section):
    nightly_cron: str = Field(
        "0 2 * * *", description="when the nightly loop runs (cron, server time zone)"
    )
    work_pool: str = Field(
        "clawloop-process", description="process work pool for prefect.yaml deployments"
    )


class RunConfig(_Section):
    profile: Literal["local", "cluster"] = Field(
        "local", description="local: CPU demo; cluster: vLLM + Docker host + DeepSpeed"
    )
    seed: int = Field(0, description="run seed: synthesis is deterministic in (seed, iteration)")
    iterations: int = Field(1, ge=1, le=100, description="K: iterations of the loop")
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


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
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
