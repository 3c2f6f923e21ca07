"""Policy endpoints: how to serve the policy model behind an OpenAI-compatible URL.

Production (GPU host) — vLLM, which returns token ids and logprobs (store them; never rebuild
training tokens from text) and parses hermes-style tool calls for Qwen-family models:

    vllm serve /path/to/checkpoint --served-model-name policy \\
        --enable-auto-tool-choice --tool-call-parser hermes \\
        --logprobs-mode processed_logprobs \\
        --max-model-len 32768 --host 0.0.0.0 --port 8000
    # processed_logprobs: the returned logprobs are those of the distribution actually sampled
    # (after temperature), which GRPO's importance ratio needs; vLLM's default is raw logprobs.
    # then: clawloop rollout TASK_DIR --base-url http://HOST:8000/v1 --model policy

Local (CPU) — `transformers serve` on a model folder, offline:

    HF_HUB_OFFLINE=1 transformers serve /path/to/model --device cpu --host 127.0.0.1 --port 8000

It parses tool calls but returns no logprobs and refuses `return_token_ids` (HTTP 422; the client
then asks without it), so its trajectories are marked `needs_retokenize`. With the project's tiny offline model this exercises the plumbing (HTTP, tool
calls, sandboxes, verifier, artifacts) — not skill: the tiny model solves nothing.

Any other OpenAI-compatible URL works too; the API key is read from the environment variable
named in the policy config and never written into artifacts.
"""

from __future__ import annotations

import logging
import os
import shutil
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
from typing import IO

log = logging.getLogger(__name__)

VLLM_COMMAND = (
    "vllm serve {model} --served-model-name {name} --enable-auto-tool-choice "
    "--tool-call-parser hermes --logprobs-mode processed_logprobs "
    "--max-model-len {context_len} --host 0.0.0.0 --port {port}"
)


class ServeError(RuntimeError):
    """The local policy server could not be started or did not become healthy."""


def vllm_command(
    model: str, name: str = "policy", context_len: int = 32768, port: int = 8000
) -> str:
    """The documented vLLM launch line (tool-call parser flags included) for a checkpoint."""
    return VLLM_COMMAND.format(model=model, name=name, context_len=context_len, port=port)


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


@contextmanager
def local_policy_server(model_dir: Path, startup_timeout_s: float = 180.0) -> Iterator[str]:
    """Serve `model_dir` with `transformers serve` on a free port; yields the /v1 base URL."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise ServeError(f"{model_dir} has no config.json: not a model folder")
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    log.warning(
        "serving %s with `transformers serve` on CPU: this exercises the plumbing, not skill",
        model_dir,
    )
    with tempfile.TemporaryFile(prefix="clawloop-serve-") as out:
        proc = subprocess.Popen(
            transformers_serve_argv(model_dir, port),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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
