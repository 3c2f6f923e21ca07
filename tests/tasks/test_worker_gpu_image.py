"""Where the worker trains on GPUs (docker/compose.gpu.yaml over docker/compose.yaml) its image has
the `gpu` extra (DeepSpeed for `accelerate launch`), CUDA torch and the GPUs; the Dockerfile's
torch line works for both the CPU index and PyPI's CUDA build."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "worker" / "Dockerfile"


def _merge(base: dict, over: dict) -> dict:
    """Compose's merge of an override file: mappings merged key by key, the rest replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _gpu_worker() -> dict:
    base = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]["worker"]
    gpu = ROOT / "docker" / "compose.gpu.yaml"
    assert gpu.is_file(), "no GPU variant of the worker (docker/compose.gpu.yaml)"
    return _merge(base, yaml.safe_load(gpu.read_text())["services"]["worker"])


def _arg_default(name: str) -> str:
    m = re.search(rf"^ARG {name}=(.*)$", DOCKERFILE.read_text(), re.M)
    assert m, f"Dockerfile has no ARG {name}"
    return m.group(1).strip().strip('"')


def _run_line(pattern: str) -> str:
    lines = [ln for ln in DOCKERFILE.read_text().splitlines() if ln.startswith("RUN pip install")]
    found = [ln.removeprefix("RUN ") for ln in lines if re.search(pattern, ln)]
    assert len(found) == 1, (pattern, lines)
    return found[0]


def _pip_args(line: str, **build_args: str) -> list[str]:
    """The arguments `line` hands pip under `sh -c` (as RUN does) with these build args."""
    script = 'pip() { for a in "$@"; do printf "%s\\n" "$a"; done; }; ' + line
    env = {"PATH": "/usr/bin:/bin", **build_args}
    out = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_the_gpu_worker_is_built_with_the_gpu_extra_cuda_torch_and_the_gpus():
    worker = _gpu_worker()
    args = worker["build"]["args"]
    assert "gpu" in args["EXTRAS"].split(",")
    assert args["TORCH_INDEX"] == ""  # not the CPU index: PyPI's torch is the CUDA build
    assert worker["image"] != "clawloop-worker:latest"  # the CPU image keeps its tag
    assert worker["command"] == ["worker"]  # the pipeline (and its train stage) runs here
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert any("gpu" in d["capabilities"] for d in devices)
    assert worker["ipc"] == "host"


def test_the_dockerfile_installs_torch_from_the_cpu_index_or_from_pypi():
    line = _run_line(r"TORCH_SPEC")
    spec = _arg_default("TORCH_SPEC")
    cpu = _pip_args(line, TORCH_SPEC=spec, TORCH_INDEX=_arg_default("TORCH_INDEX"))
    assert cpu == ["install", "--no-cache-dir", "--extra-index-url",
                   "https://download.pytorch.org/whl/cpu", spec]  # fmt: skip
    assert _pip_args(line, TORCH_SPEC=spec, TORCH_INDEX="") == ["install", "--no-cache-dir", spec]


def test_the_gpu_extra_holds_what_launched_training_needs():
    line = _run_line(r"EXTRAS")
    assert _pip_args(line, EXTRAS="gpu")[-1] == ".[gpu]"
    assert _pip_args(line, EXTRAS="")[-1] == "."
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    gpu = extras["optional-dependencies"]["gpu"]
    assert any(dep.startswith("deepspeed") for dep in gpu)
    assert any(dep.startswith("accelerate") for dep in extras["dependencies"])
