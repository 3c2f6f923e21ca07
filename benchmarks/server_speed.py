"""Our local policy server (the GGUF converted to float32, harness/local_server.py) against
llama.cpp's OpenAI-compatible server (llama-cpp-python, the GGUF as it is) on one model: prefill
and decode tokens/s on one identical prompt, and llama.cpp's speed as a ratio of ours.

    nice -n 10 .venv/bin/python benchmarks/server_speed.py --gguf /work/models/qwen-1.5b.gguf \\
        --llama-python /work/llvenv/bin/python [--threads 1] [--max-tokens 64] [--repeat 2] [--log-dir D]

The prompt is the agent's first turn on the echo task (system prompt, instruction, the tool
schemas). Each request opens with a different nonce, so neither server can reuse an earlier
prompt's cache. Per server: a 1-token request (prefill) and a --max-tokens request at
temperature 0; prefill tok/s = prompt tokens / the first's seconds, decode tok/s = (completion
tokens - 1) / (the second's seconds - the first's). The servers run one after the other, never
together; each one's peak RSS is read from /proc before it stops. llama-cpp-python is an external
server, like vLLM: it lives in its own venv (--llama-python), never in the project's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ECHO = ROOT / "tests" / "fixtures" / "tasks" / "echo_violet"


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM of a live process, in MB (None when /proc does not say)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        return None
    return None


def messages(nonce: int) -> list[dict[str, Any]]:
    from clawloop.harness.prompts import initial_messages

    msgs = initial_messages((ECHO / "instruction.md").read_text())
    first = dict(msgs[0], content=f"[request {nonce:04d}] " + str(msgs[0]["content"]))
    return [first, *msgs[1:]]


def timed(client: Any, model: str, nonce: int, max_tokens: int) -> tuple[float, int, int]:
    """(seconds, prompt tokens, completion tokens) of one request."""
    from clawloop.harness.llm import chat
    from clawloop.harness.tools import TOOLS

    start = time.monotonic()
    reply = chat(client, model, messages(nonce), tools=TOOLS, max_tokens=max_tokens,
                 temperature=0.0, want_token_ids=False)  # fmt: skip
    return (
        time.monotonic() - start,
        int(reply.prompt_tokens or 0),
        int(reply.completion_tokens or 0),
    )


def measure(base_url: str, model: str, max_tokens: int, repeat: int, nonce0: int) -> dict[str, Any]:
    from clawloop.harness.llm import LLMEndpoint, make_client

    client = make_client(LLMEndpoint(base_url, model, "", request_timeout_s=1800, max_retries=0))
    timed(client, model, nonce0, 1)  # warm-up: first-request costs (loading, allocation)
    prefill, decode, prompt_tokens, completion = [], [], 0, 0
    for i in range(repeat):
        t1, prompt_tokens, _ = timed(client, model, nonce0 + 2 * i + 1, 1)
        tn, _, completion = timed(client, model, nonce0 + 2 * i + 2, max_tokens)
        prefill.append(prompt_tokens / t1)
        if completion > 1 and tn > t1:
            decode.append((completion - 1) / (tn - t1))
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "prefill_tok_s": round(statistics.median(prefill), 2),
        "decode_tok_s": round(statistics.median(decode), 2) if decode else None,
    }


def serve(argv: list[str], base: str, startup_s: float, log: Path | None) -> subprocess.Popen:
    from clawloop.harness.serve import wait_healthy

    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - the server's lifetime
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(base, proc, startup_s)
    except Exception:
        proc.kill()
        raise
    return proc


def run_server(name: str, argv: list[str], port: int, model: str, args: argparse.Namespace,
               nonce0: int) -> dict[str, Any]:  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    start = time.monotonic()
    log = args.log_dir / f"{name.split()[0]}.log" if args.log_dir else None
    proc = serve(argv, base, 1800, log)
    try:
        load_s = round(time.monotonic() - start, 1)
        out = measure(base + "/v1", model, args.max_tokens, args.repeat, nonce0)
        return {"server": name, "load_s": load_s, **out, "peak_rss_mb": peak_rss_mb(proc.pid)}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    from clawloop.harness.serve import free_port, local_server_argv
    from clawloop.training.gguf import model_folder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gguf", type=Path, required=True, help="the model, a .gguf file")
    p.add_argument("--llama-python", required=True, help="a python with llama-cpp-python[server]")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads (README)")
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--log-dir", type=Path, help="write each server's output here (its own timings)")
    args = p.parse_args(argv)

    port = free_port()
    llama_argv = [args.llama_python, "-m", "llama_cpp.server", "--model", str(args.gguf),
                  "--n_ctx", str(args.n_ctx), "--n_threads", str(args.threads),
                  "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    llama = run_server("llama.cpp", llama_argv, port, str(args.gguf), args, 0)
    print(json.dumps(llama), flush=True)
    folder = model_folder(args.gguf)  # converted once to float32, cached
    port = free_port()
    ours = run_server("clawloop local (fp32)", local_server_argv(folder, port), port,
                      str(folder), args, 100)  # fmt: skip
    print(json.dumps(ours), flush=True)
    for key in ("prefill_tok_s", "decode_tok_s"):
        a, b = llama[key], ours[key]
        ratio = f"{a / b:.1f}x" if a and b else "n/a"
        print(f"{key}: llama.cpp {a} vs ours {b} -> llama.cpp is {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
