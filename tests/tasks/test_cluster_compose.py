"""docker/compose.yaml's vLLM service serves what tasks/profiles/cluster.yaml asks for, with the flags
clawloop's policy path needs (the same ones the managed vLLM starts with, harness/vllm.py)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from clawloop.harness.vllm import vllm_argv
from clawloop.tasks.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def _service() -> dict:
    return yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]["vllm"]


def _flags(command: list[str]) -> dict[str, str]:
    """--name=value and --name value alike ("" for a switch)."""
    out = {}
    for i, arg in enumerate(command):
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            nxt = command[i + 1] if i + 1 < len(command) else "--"
            out[name] = value if eq else ("" if nxt.startswith("--") else nxt)
    return out


def _default(value: str) -> str:
    """`${VAR:-default}` -> default (what compose uses when the variable is unset)."""
    m = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
    return m.group(1) if m else value


def test_compose_serves_the_cluster_configs_model_under_its_name():
    cfg = load_config("cluster")
    command = _service()["command"]
    flags = _flags(command)
    assert not command[0].startswith("--"), "the model is vLLM's positional argument"
    assert _default(command[0]) == cfg.train.base_model
    assert flags["--served-model-name"] == cfg.llm.model
    port = int(flags["--port"])
    assert cfg.llm.base_url and cfg.llm.base_url.rstrip("/").endswith(f":{port}/v1")
    assert f"{port}:{port}" in _service()["ports"]
    assert int(flags["--max-model-len"]) >= cfg.rollout.context_len


def test_compose_starts_vllm_as_the_policy_path_needs():
    cfg = load_config("cluster")
    svc = _service()
    flags = _flags(svc["command"])
    assert re.fullmatch(r"vllm/vllm-openai:v\d+\.\d+\.\d+", svc["image"]), "pin the image tag"
    assert flags["--logprobs-mode"] == "processed_logprobs"
    assert flags["--dtype"] == "bfloat16"
    # runtime LoRA (llm.reload: lora): the route, the switch, a rank the adapters fit
    assert "--enable-lora" in flags
    assert svc["environment"]["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert int(flags["--max-lora-rank"]) >= cfg.train.lora_r
    # every flag the managed vLLM starts with, with the same value (the loopback host aside)
    managed = _flags(vllm_argv("python", "M", 8000)[3:])
    for name in ("--logprobs-mode", "--generation-config", "--tool-call-parser"):
        assert flags[name] == managed[name], name
    assert "--enable-auto-tool-choice" in flags
