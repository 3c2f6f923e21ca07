"""Forge + verify throughput per sandbox backend, and our sandbox layer's overhead vs raw calls.

Forges and verifies N built-in tasks per backend with a thread pool and prints tasks/min and the
CPU time per task (this process plus its bwrap sandboxes: it depends far less than tasks/min on
what else the host runs, and 60000 * cores / cpu_ms bounds an idle host's rate). In the
same invocation it measures the raw cost of one sandboxed `true` (a bare `bwrap ... true`; a bare
docker SDK `containers.run(..., "true")`) against our layer doing the same (open_sandbox + exec
`true` + stop), and prints the ratio. Targets on 2 cores: bwrap >= 300 tasks/min; layer <= 1.5x.

    .venv/bin/python benchmarks/forge_verify.py [--tasks 200] [--workers 4] [--backends bwrap,docker]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from clawloop.generators.candidates import candidate_row  # noqa: E402
from clawloop.generators.contract import OUTPUT_FORMATS  # noqa: E402
from clawloop.generators.forge import forge_candidate  # noqa: E402
from clawloop.generators.library import capabilities, domains, render_generator  # noqa: E402
from clawloop.generators.verify import verify_task  # noqa: E402
from clawloop.harness.sandbox.backend import docker_available, open_sandbox  # noqa: E402
from clawloop.harness.sandbox.base import SandboxConfig  # noqa: E402

RAW_BWRAP = [
    "bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
    "/lib", "--symlink", "usr/lib64", "/lib64", "--ro-bind", "/etc", "/etc", "--proc", "/proc",
    "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all", "--unshare-user", "--uid", "0", "--gid",
    "0", "--die-with-parent", "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
    "true",
]  # fmt: skip


def candidates(n: int) -> list[dict]:
    """N candidates cycling through renderable capabilities x domains x formats x knobs."""
    caps = []
    for cap in capabilities():
        try:
            render_generator(cap, domains()[0])
            caps.append(cap)
        except Exception as exc:
            print(f"  (skipping capability {cap}: {type(exc).__name__}: {exc})")
    if not caps:
        raise SystemExit("no built-in capability renders; nothing to benchmark")
    combos = itertools.cycle(itertools.product(caps, OUTPUT_FORMATS, domains()))
    rows = []
    for i in range(n):
        cap, fmt, dom = next(combos)
        code = render_generator(cap, dom, multihop=i % 4, dirtiness=(i // 4) % 4, output_format=fmt)
        rows.append(candidate_row(code, i, origin="builtin"))
    return rows


def mean_ms(fn, repeat: int) -> float:
    fn()  # warm caches (page cache, docker image layers) before timing
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat * 1000


def ours(backend: str) -> None:
    with open_sandbox(SandboxConfig(backend=backend)) as sb:
        res = sb.exec(["true"])
    if not res.ok:
        raise SystemExit(f"our {backend} sandbox could not run `true`: {res.stderr.strip()}")


def ours_exec_only(backend: str, repeat: int) -> float:
    """ms per `true` exec inside one already started sandbox (no start/stop)."""
    with open_sandbox(SandboxConfig(backend=backend)) as sb:
        return mean_ms(lambda: sb.exec(["true"]), repeat)


def overhead(backend: str, repeat: int) -> tuple[float, float]:
    """(raw ms, ours ms) for one sandboxed `true`, start to stop."""
    if backend == "bwrap":
        raw = mean_ms(lambda: subprocess.run(RAW_BWRAP, check=True), repeat)
    else:
        import docker

        cli = docker.from_env()
        raw = mean_ms(
            lambda: cli.containers.run(
                "clawloop-base:latest", ["true"], remove=True, network_disabled=True
            ),
            repeat,
        )
        cli.close()
    return raw, mean_ms(lambda: ours(backend), repeat)


def cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for (bwrap sandboxes; Docker
    containers run under dockerd and are not counted)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def throughput(
    backend: str, cands: list[dict], workers: int
) -> tuple[float, float, int, list[str]]:
    """(tasks/min, CPU ms per task, tasks kept, problems) forging and verifying `cands`."""
    sb = SandboxConfig(backend=backend)

    def one(cand: dict) -> str:
        row = forge_candidate(cand, sb)
        if row["status"] != "ok":
            return f"forge {row['error_kind']}: {row['error'].splitlines()[0]}"
        _, verdict = verify_task(row, sb)
        return "" if verdict["kept"] else verdict["reason"]

    t0, cpu0 = time.perf_counter(), cpu_seconds()
    with ThreadPoolExecutor(workers) as pool:
        outcomes = list(pool.map(one, cands))
    took, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    kept = sum(1 for o in outcomes if not o)
    return len(cands) / took * 60, cpu / len(cands) * 1000, kept, [o for o in outcomes if o]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200, help="tasks forged+verified per backend")
    ap.add_argument("--workers", type=int, default=4, help="threads (sandbox-bound work)")
    ap.add_argument("--backends", default="bwrap,docker")
    ap.add_argument("--repeat", type=int, default=20, help="repeats of each overhead measurement")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"host: {os.cpu_count()} cores, load average {load:.1f} at start")
    cands = candidates(args.tasks)
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        if backend == "docker" and (why := docker_available()) is not None:
            print(f"[docker] skipped: {why}")
            continue
        repeat = args.repeat if backend == "bwrap" else max(3, args.repeat // 4)
        raw, our = overhead(backend, repeat)
        exec_only = ours_exec_only(backend, repeat)
        rate, cpu_ms, kept, problems = throughput(backend, cands, args.workers)
        # Tasks/min depends on what else runs on the host; CPU per task does not, and bounds
        # the rate an idle host could reach: cores * 60000 / cpu_ms.
        counted = "host + sandboxes" if backend == "bwrap" else "host side only"
        print(
            f"[{backend}] forge+verify {rate:.0f} tasks/min ({kept}/{len(cands)} kept, "
            f"{args.workers} workers); CPU {cpu_ms:.0f} ms/task ({counted})"
        )
        print(
            f"[{backend}] one sandboxed `true`: raw {raw:.1f} ms; ours start+exec+stop {our:.1f} ms "
            f"= {our / raw:.2f}x raw; ours exec in a started sandbox {exec_only:.1f} ms = {exec_only / raw:.2f}x raw"
        )
        for p in sorted(set(problems))[:5]:
            print(f"    dropped: {p[:200]}")
    print(f"host load average {os.getloadavg()[0]:.1f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
