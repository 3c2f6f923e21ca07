"""The managed vLLM eager (`--enforce-eager`) against compiled (torch.compile, vLLM's default) on
one model: start-to-ready and decode throughput, and eager's ratio to compiled. It decides
`llm.vllm_eager: auto` (eager on CPU, compiled on GPU; harness/vllm.py runs_eager). Modes `bf16`
and `fp32` serve eager in that dtype (`--dtype bfloat16` / `float32`) and print fp32's ratio to
bf16: it decides `cpu_dtype_flags` (float32 on a CPU without bf16 in hardware).

    VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python benchmarks/vllm_eager.py [--model DIR]
        [--modes compiled,eager | bf16,fp32] [--max-tokens 512] [--streams 8] [--repeats 3]
        [--log-dir D]

Per mode, one after the other (never two servers at once), through ManagedVLLM exactly as a run
starts it (default model: the tiny offline one): `start s` is serve() until /health answers;
`engine init s` is vLLM's own "init engine ... took" line (where torch.compile runs);
`cache` says whether the log shows vLLM-CPU compiling again because it could not load its cache.
Decode: one warm-up request, then `--repeats` times one stream and `--streams` concurrent
streams of `--max-tokens` tokens each (the median of the repeats is printed) (ignore_eos, pinned sampling at T=1, a different prompt per stream so
no prefix is cached) through /v1/completions. Throughput is given per wall second and per CPU
second of the server's process group (utime + stime from /proc: the host is shared, so the CPU
figure is the one that holds when other work competes for the cores). The load average is
printed beside each row.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from clawloop.harness.owned import proc_stat
from clawloop.harness.vllm import ManagedVLLM, model_len
from clawloop.training.tiny_model import ensure_tiny_model

INIT_RE = re.compile(r"init engine \(.*?\) took ([0-9.]+) s")
CACHE_MISS = "Compiling model again due to a load failure"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def group_cpu_s(pgid: int) -> float:
    """utime + stime of every live process in process group `pgid`, in seconds."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = proc_stat(int(entry.name))
        if stat is not None and stat.pgrp == pgid:
            total += stat.utime + stat.stime
    return total / CLK_TCK


def complete(base_url: str, model: str, prompt: str, max_tokens: int) -> int:
    """One /v1/completions request; returns the completion tokens vLLM reports."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
    }
    req = urllib.request.Request(
        base_url + "/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=900) as resp:
        return int(json.loads(resp.read())["usage"]["completion_tokens"])


def decode(server: ManagedVLLM, streams: int, max_tokens: int, tag: str) -> dict[str, float]:
    """`streams` concurrent requests of `max_tokens` tokens: tokens, wall s, server CPU s."""
    counts = [0] * streams
    pgid = server._proc.pid if server._proc else 0  # the guard leads vLLM's process group

    def one(i: int) -> None:
        counts[i] = complete(server.base_url, server.name, f"{tag} {i}: count on", max_tokens)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    cpu0, t0 = group_cpu_s(pgid), time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.monotonic() - t0, group_cpu_s(pgid) - cpu0
    return {"tokens": sum(counts), "wall_s": wall, "cpu_s": cpu}


MODES = ("compiled", "eager", "bf16", "fp32")


def run_mode(mode: str, model: Path, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    log = log_dir / f"vllm-{mode}.log"
    log.unlink(missing_ok=True)
    eager = "off" if mode == "compiled" else "on"
    dtype = {"bf16": ("--dtype", "bfloat16"), "fp32": ("--dtype", "float32")}.get(mode, ())
    row: dict[str, Any] = {"mode": mode}
    server = ManagedVLLM(log, context_len=model_len(model, 2048), eager=eager, extra_args=dtype)
    try:
        t0 = time.monotonic()
        server.serve(model)
        row["start_s"] = time.monotonic() - t0
        text = log.read_text(errors="replace")
        inits = INIT_RE.findall(text)
        row["init_s"] = float(inits[-1]) if inits else float("nan")
        row["cache_miss"] = CACHE_MISS in text
        row["load_start"] = os.getloadavg()[0]
        complete(server.base_url, server.name, "warm up", 8)
        for key, streams in (("one", 1), ("many", args.streams)):
            runs = [
                decode(server, streams, args.max_tokens, f"{mode} {key} {r}")
                for r in range(args.repeats)
            ]
            row[f"{key}_tok_s"] = statistics.median(d["tokens"] / d["wall_s"] for d in runs)
            row[f"{key}_tok_cpu_s"] = statistics.median(
                d["tokens"] / d["cpu_s"] if d["cpu_s"] else float("nan") for d in runs
            )
        row["load_decode"] = os.getloadavg()[0]
    finally:
        server.close()
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, help="model folder (default: the tiny offline model)")
    ap.add_argument("--modes", default="compiled,eager", help="order the servers start in")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3, help="decode runs per row (median)")
    ap.add_argument("--log-dir", type=Path, help="where the vLLM logs go (default: a temp dir)")
    args = ap.parse_args()
    if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        print("note: VLLM_CPU_KVCACHE_SPACE unset, the managed default (2 GB) applies")
    model = args.model or ensure_tiny_model()
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="vllm-eager-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        print(f"--modes takes some of {', '.join(MODES)}, got {args.modes!r}", file=sys.stderr)
        return 2
    print(f"model {model}; logs in {log_dir}; {args.streams} streams x {args.max_tokens} tokens")
    rows = {m: run_mode(m, model, args, log_dir) for m in modes}
    cols = [
        ("start s", "start_s", "{:.1f}"),
        ("engine init s", "init_s", "{:.1f}"),
        ("1-stream tok/s", "one_tok_s", "{:.1f}"),
        ("1-stream tok/CPU-s", "one_tok_cpu_s", "{:.1f}"),
        (f"{args.streams}-stream tok/s", "many_tok_s", "{:.1f}"),
        (f"{args.streams}-stream tok/CPU-s", "many_tok_cpu_s", "{:.1f}"),
    ]
    print("\n| mode | " + " | ".join(c[0] for c in cols) + " | cache reload failed | load |")
    print("|" + "---|" * (len(cols) + 3))
    for m, r in rows.items():
        cells = " | ".join(fmt.format(r[key]) for _, key, fmt in cols)
        load = f"{r['load_start']:.1f}/{r['load_decode']:.1f}"
        print(f"| {m} | {cells} | {'yes' if r['cache_miss'] else 'no'} | {load} |")
    if {"eager", "compiled"} <= rows.keys():
        e, c = rows["eager"], rows["compiled"]
        print(
            "\neager vs compiled (ratio; start: compiled / eager, speedup of eager; decode: eager / compiled):"
        )
        print(f"  start-to-ready  {c['start_s'] / e['start_s']:.2f}x faster eager")
        print(f"  engine init     {c['init_s'] / e['init_s']:.2f}x faster eager")
        for _, key, _fmt in cols[2:]:
            print(f"  {key:<15} {e[key] / c[key]:.2f}x")
    if {"bf16", "fp32"} <= rows.keys():
        print("\nfp32 vs bf16 (ratio fp32 / bf16; above 1: float32 decodes faster here):")
        for _, key, _fmt in cols[2:]:
            print(f"  {key:<15} {rows['fp32'][key] / rows['bf16'][key]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
