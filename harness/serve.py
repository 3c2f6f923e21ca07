"""Policy endpoints: how to serve the policy model behind an OpenAI-compatible URL.

Production (GPU host) — vLLM, which returns token ids and logprobs (store them; never rebuild
training tokens from text) and parses hermes-style tool calls for Qwen-family models:

    vllm serve /path/to/checkpoint --served-model-name policy \\
        --enable-auto-tool-choice --tool-call-parser hermes \\
        --logprobs-mode processed_logprobs \\
        --max-model-len 32768 --host 0.0.0.0 --port 8000
    # processed_logprobs: the logprobs of the distribution actually sampled (after temperature,
    # top-k/top-p/min-p). GRPO's trainer computes the model's plain log-softmax, so it refuses
    # rollout.temperature != 1 and the client pins the other knobs neutral: the two then agree
    # (as the local server's untempered logprobs do); train.tis_cap corrects what still differs.
    # --generation-config vllm: the model's generation_config.json defaults are not applied.
    # then: clawloop rollout TASK_DIR --base-url http://HOST:8000/v1 --model policy

Managed — `llm.server: vllm` (harness/vllm.py): clawloop starts this server itself, on a free
loopback port, restarts it on new weights or loads adapters into it, and stops it with the run.

Local (CPU) — clawloop's own small server (`harness/local_server.py`) on a model folder, offline:

    python -m clawloop.harness.local_server /path/to/model --host 127.0.0.1 --port 8000

It answers like vLLM: the prompt's token ids, the sampled ids and their logprobs (`return_token_ids`,
`logprobs`), hermes tool calls parsed out of the sampled text, `reasoning_content` for think
blocks. So local turns are trained from the sampled ids and GRPO's ratio is against the sampling
policy, as on vLLM. `local_policy_server(model_dir)` starts it on a free loopback port.
`transformers serve` (`local_policy_server(..., server="transformers")`) also works, but returns
no logprobs and refuses `return_token_ids` (HTTP 422; the client then asks without it), so its
trajectories are marked `needs_retokenize` and trained from their text. With the project's tiny
offline model this exercises the plumbing (HTTP, tool calls, sandboxes, verifier, artifacts) —
not skill: the tiny model solves nothing.

Any other OpenAI-compatible URL works too; the API key is read from the environment variable
named in the policy config and never written into artifacts.

New weights on a running vLLM (`llm.reload`): with LoRA training, `load_lora_adapter` registers
each iteration's adapter on the running server (vLLM's runtime LoRA API; the server needs
`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True` and `--enable-lora`, see `vllm_command(enable_lora=True)`)
and rollouts then ask for `model=<lora_name>`. Full-weight checkpoints need a vLLM restart on the
checkpoint folder; `served_models` tells whether the server already serves it.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from clawloop.harness import owned

log = logging.getLogger(__name__)

VLLM_COMMAND = (
    "vllm serve {model} --served-model-name {name} --enable-auto-tool-choice "
    "--tool-call-parser hermes --logprobs-mode processed_logprobs --generation-config vllm "
    "--max-model-len {context_len} --host 0.0.0.0 --port {port}"
)


class ServeError(RuntimeError):
    """The local policy server could not be started or did not become healthy."""


def vllm_command(
    model: str,
    name: str = "policy",
    context_len: int = 32768,
    port: int = 8000,
    *,
    enable_lora: bool = False,
    max_lora_rank: int = 16,
) -> str:
    """The documented vLLM launch line (tool-call parser flags included) for a checkpoint.

    enable_lora: the line `llm.reload: lora` needs: runtime adapter loading switched on
    (environment variable) and LoRA serving with a rank at least the trained adapter's."""
    line = VLLM_COMMAND.format(model=model, name=name, context_len=context_len, port=port)
    if enable_lora:
        line = f"VLLM_ALLOW_RUNTIME_LORA_UPDATING=True {line} --enable-lora --max-lora-rank {max_lora_rank}"
    return line


class AdapterLoadError(ServeError):
    """The running vLLM server refused or could not be asked to load a LoRA adapter."""


def server_root(base_url: str) -> str:
    """`http://host:8000/v1` -> `http://host:8000`: vLLM's admin routes hang off the server root."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _http_json(
    method: str, url: str, api_key: str, body: dict[str, Any] | None, timeout_s: float
) -> tuple[int, str]:
    """(status, body text) of one request; a connection failure is status 0 with the reason."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(getattr(exc, "reason", exc))


def served_models(
    base_url: str, api_key: str = "", timeout_s: float = 30.0
) -> list[dict[str, Any]]:
    """The entries of `GET <base_url>/models` (vLLM adds `root`: the folder each one was loaded from)."""
    status, text = _http_json("GET", base_url.rstrip("/") + "/models", api_key, None, timeout_s)
    if status != 200:
        raise ServeError(
            f"GET {base_url.rstrip('/')}/models answered {status or 'nothing'}: {text[:300]}"
        )
    try:
        data = json.loads(text).get("data") or []
    except (ValueError, AttributeError):
        raise ServeError(
            f"GET {base_url.rstrip('/')}/models did not answer a model list: {text[:300]}"
        ) from None
    return [m for m in data if isinstance(m, dict)]


def load_lora_adapter(
    base_url: str,
    lora_name: str,
    lora_path: str,
    api_key: str = "",
    timeout_s: float = 300.0,
    *,
    replace: bool = True,
) -> str:
    """Register a LoRA adapter folder on a running vLLM under `lora_name`; returns what happened.

    replace: ask with `load_inplace`, so an adapter of that name already loaded (a re-run train
    stage wrote new weights under the same name) is replaced by the folder's weights; a server
    that still answers 400 "already loaded" gets the old one unloaded, then the new one loaded.
    That answer is never taken as success: the server would keep serving the old weights.
    Raises AdapterLoadError saying what failed, where, and what to do."""
    root = server_root(base_url)
    url = root + "/v1/load_lora_adapter"
    body: dict[str, Any] = {"lora_name": lora_name, "lora_path": lora_path}
    if replace:
        body["load_inplace"] = True
    status, text = _http_json("POST", url, api_key, body, timeout_s)
    if status == 400 and "already" in text.lower() and replace:
        _http_json("POST", root + "/v1/unload_lora_adapter", api_key, {"lora_name": lora_name}, 60)
        status, text = _http_json("POST", url, api_key, body, timeout_s)
        if status == 200:
            return f"replaced adapter {lora_name} with {lora_path} (unloaded, then loaded)"
    if status == 200:
        return f"loaded adapter {lora_name} from {lora_path}" + (" (in place)" if replace else "")
    if status == 0:
        fix = "check that the vLLM server is up and llm.base_url points at it"
    elif status == 400 and "already" in text.lower():
        fix = (
            "an adapter of that name is loaded and was not replaced: unload it "
            "(POST /v1/unload_lora_adapter) or load with replace=True"
        )
    elif status in (404, 405):
        fix = (
            "the server has no runtime LoRA API: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True "
            "and --enable-lora (README, 'A vLLM endpoint'), or set llm.reload: restart"
        )
    else:
        fix = (
            "check that the adapter folder is readable from the vLLM host at the same path (shared "
            "disk), that --max-lora-rank is at least train.lora_r, and that the server runs with "
            "--enable-lora"
        )
    raise AdapterLoadError(
        f"loading LoRA adapter {lora_name!r} from {lora_path} via POST {url} failed "
        f"({status or 'no answer'}: {text.strip()[:400]}): {fix}"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def transformers_serve_argv(model_dir: Path, port: int) -> list[str]:
    """argv for `transformers serve` on a local folder, CPU, preloaded, bound to loopback."""
    exe = shutil.which(
        "transformers",
        path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    )
    if exe is None:
        raise ServeError(
            "the `transformers` CLI is not installed: pip install 'transformers[serving]'"
        )
    return [
        exe,
        "serve",
        str(model_dir),
        "--device",
        "cpu",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]


def local_server_argv(model_dir: Path, port: int) -> list[str]:
    """argv for clawloop's own server (`harness.local_server`) on a local folder, bound to loopback;
    the served model name is the folder path, as `tasks.policy` asks for it."""
    return [
        sys.executable,
        "-m",
        "clawloop.harness.local_server",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


SERVERS = {"clawloop": local_server_argv, "transformers": transformers_serve_argv}


def wait_healthy(base: str, proc: subprocess.Popen | None, timeout_s: float) -> None:
    """Poll `<base>/health` (then `/v1/models`) until it answers 200, the process dies, or time's up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServeError(f"policy server exited early with code {proc.returncode}")
        for path in ("/health", "/v1/models"):
            try:
                with urllib.request.urlopen(base + path, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.25)
    raise ServeError(f"policy server at {base} not healthy after {timeout_s:g}s")


def _tail(out: IO[bytes], limit: int = 3000) -> str:
    out.seek(0)
    return out.read()[-limit:].decode(errors="replace")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the next run's sweep (harness.owned) still stops it


@contextmanager
def local_policy_server(
    model_dir: Path, startup_timeout_s: float = 180.0, server: str = "clawloop"
) -> Iterator[str]:
    """Serve `model_dir` on a free loopback port; yields the /v1 base URL.

    server: "clawloop" (`harness.local_server`: token ids + logprobs, the local profile's) or
    "transformers" (`transformers serve`: neither)."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise ServeError(f"{model_dir} has no config.json: not a model folder")
    if server not in SERVERS:
        raise ServeError(f"unknown local server {server!r}: one of {sorted(SERVERS)}")
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    log.warning(
        "serving %s locally (%s server, CPU): this exercises the plumbing, not skill",
        model_dir,
        server,
    )
    with tempfile.TemporaryFile(prefix="clawloop-serve-") as out:
        proc = subprocess.Popen(
            SERVERS[server](model_dir, port),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        pidfile = owned.record_child(proc)  # a SIGKILLed run's server is swept at the next start
        base = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_healthy(base, proc, startup_timeout_s)
            except ServeError as exc:
                raise ServeError(f"{exc}; server output:\n{_tail(out)}") from exc
            yield base + "/v1"
        finally:
            if proc.poll() is not None:
                # It died while in use: its last words explain the server errors callers saw.
                log.error("policy server exited with %s; output:\n%s", proc.returncode, _tail(out))
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            pidfile.unlink(missing_ok=True)
