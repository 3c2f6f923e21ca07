"""Forge + verify throughput per sandbox backend, and our sandbox layer's overhead vs raw calls.

Forges and verifies N built-in tasks per backend with a thread pool and prints tasks/min and the
CPU time per task (the measuring process plus its bwrap sandboxes, split host / sandboxes: it
depends far less than tasks/min on what else the host runs, and 60000 * cores / cpu_ms bounds an
idle host's rate). Each measurement runs in a fresh process (cold caches, as a stage's first
tasks). With --baseline REV the same candidates are also forged and verified by the code of git
revision REV (exported to a temp dir), alternating rounds with this checkout's code, and the
ratios are printed: before/after under the same load. In the same invocation it measures the raw
cost of one sandboxed `true` (a bare `bwrap ... true`; a bare docker SDK
`containers.run(..., "true")`) against our layer doing the same (open_sandbox + exec `true` +
stop), and prints the ratio. Targets on 2 cores: bwrap >= 1000 tasks/min (120 ms CPU per task);
layer <= 1.5x.

    .venv/bin/python benchmarks/forge_verify.py [--tasks 200] [--workers 4] [--batch 8]
        [--backends bwrap,docker] [--baseline REV] [--rounds 2]
    .venv/bin/python benchmarks/forge_verify.py --split [--tasks 96] [--baseline REV]  # where the CPU goes
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from clawloop.generators.candidates import candidate_row  # noqa: E402
from clawloop.generators.forge import forge_candidate  # noqa: E402
from clawloop.generators.meta import OUTPUT_FORMATS  # noqa: E402
from clawloop.generators.verify import verify_task  # noqa: E402
from clawloop.harness.sandbox.backend import docker_available, open_sandbox  # noqa: E402
from clawloop.harness.sandbox.base import SandboxConfig  # noqa: E402
from clawloop.synthesis.library import capabilities, domains, render_generator  # noqa: E402

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


def paired_ms(a, b, repeat: int) -> tuple[float, float]:
    """Median ms of `a` and of `b`, timed alternately (a, b, a, b, ...): load that comes and goes
    during the measurement hits both alike, and the median drops the calls it stalled."""
    a(), b()  # warm caches (page cache, docker image layers) before timing
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, out in ((a, times[0]), (b, times[1])):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def overhead(backend: str, repeat: int) -> tuple[float, float]:
    """(raw ms, ours ms) for one sandboxed `true`, start to stop."""
    if backend == "bwrap":
        return paired_ms(
            lambda: subprocess.run(RAW_BWRAP, check=True), lambda: ours(backend), repeat
        )
    import docker

    cli = docker.from_env()
    try:
        return paired_ms(
            lambda: cli.containers.run(
                "clawloop-base:latest", ["true"], remove=True, network_disabled=True
            ),
            lambda: ours(backend),
            repeat,
        )
    finally:
        cli.close()


def cpu_seconds() -> tuple[float, float]:
    """(this process, the children it has waited for: bwrap sandboxes) CPU seconds. Docker
    containers run under dockerd and are not counted."""
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def throughput(backend: str, cands: list[dict], workers: int, batch: int) -> dict:
    """Forge and verify `cands` here, as the stages do (forge per task, verify per batch of
    `batch` tasks, verify.batch; a revision before batched verify verifies each task alone):
    tasks/min, CPU ms per task (host, sandboxes), kept."""
    sb = SandboxConfig(backend=backend)
    try:
        from clawloop.generators.verify import verify_tasks
    except ImportError:  # a --baseline revision from before batched gradings
        verify_tasks = None

    def one(group: list[dict]) -> list[str]:
        rows, out = [], {}
        for cand in group:
            row = forge_candidate(cand, sb)
            if row["status"] != "ok":
                out[cand["task_id"]] = f"forge {row['error_kind']}: {row['error'].splitlines()[0]}"
            else:
                rows.append(row)
        if verify_tasks is not None:
            checked = verify_tasks(rows, sb)
        else:
            checked = [verify_task(row, sb) for row in rows]
        for _, verdict in checked:
            out[verdict["task_id"]] = "" if verdict["kept"] else verdict["reason"]
        return list(out.values())

    per = max(1, min(batch, -(-len(cands) // workers)))
    groups = [cands[i : i + per] for i in range(0, len(cands), per)]
    t0, (host0, kids0) = time.perf_counter(), cpu_seconds()
    with ThreadPoolExecutor(workers) as pool:
        outcomes = [o for group in pool.map(one, groups) for o in group]
    took, (host1, kids1) = time.perf_counter() - t0, cpu_seconds()
    n = len(cands)
    return {
        "rate": n / took * 60,
        "host_ms": (host1 - host0) / n * 1000,
        "sandbox_ms": (kids1 - kids0) / n * 1000,
        "kept": sum(1 for o in outcomes if not o),
        "problems": [o for o in outcomes if o],
    }


def split(cands: list[dict], batch: int) -> None:
    """Forge and verify `cands` in one thread (batches of `batch`) and print the CPU per task of
    the host and of each kind of bubblewrap exec (forge's build; verify's solve, alone or a
    batch's built-ins together; the grading), each exec's children CPU measured around it."""
    from clawloop.harness.sandbox.bwrap import BwrapSandbox

    try:
        from clawloop.generators.verify import verify_tasks
    except ImportError:  # a --baseline revision from before batched verify: each task alone

        def verify_tasks(rows: list[dict], sb: SandboxConfig) -> list:
            return [verify_task(row, sb) for row in rows]

    spent: dict[str, list[float]] = {}
    real = BwrapSandbox.exec

    def timed(self, cmd, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        before = cpu_seconds()[1]
        try:
            return real(self, cmd, *args, **kwargs)
        finally:
            text = " ".join(cmd) if isinstance(cmd, list) else cmd
            kind = next((k for k, needle in EXEC_KINDS if needle in text), text.split(" ")[0][:20])
            spent.setdefault(kind, []).append(cpu_seconds()[1] - before)

    BwrapSandbox.exec = timed  # type: ignore[method-assign]
    sb = SandboxConfig(backend="bwrap")
    host0 = cpu_seconds()[0]
    for i in range(0, len(cands), batch):
        rows = [forge_candidate(c, sb) for c in cands[i : i + batch]]
        verify_tasks(rows, sb)
    host = cpu_seconds()[0] - host0
    n = len(cands)
    print(f"{n} tasks, batches of {batch}, one worker; CPU ms per task:")
    print(f"  host (this process)          {host / n * 1000:6.1f}")
    for kind, times in sorted(spent.items()):
        print(f"  {kind:28s} {sum(times) / n * 1000:6.1f}   ({len(times)} execs)")


EXEC_KINDS = [
    ("forge build", "driver.py build"),
    ("solve, built-ins together", "solve-batch"),
    ("solve + rebuild, alone", "driver.py solve"),
    ("grading", "clawloop-probes/driver.py"),
]


# Makes `clawloop` the package tree at argv[1] (a revision exported by --baseline), ahead of the
# editable install's mapping, then runs this script's --measure mode from that tree's modules.
SHIM = (
    "import runpy, sys, types; m = types.ModuleType('clawloop'); m.__path__ = [sys.argv[1]]; "
    "sys.modules['clawloop'] = m; sys.argv = sys.argv[2:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def measure_in_process(tree: str | None, backend: str, n: int, workers: int, batch: int) -> dict:
    """One measurement in a fresh interpreter, with this checkout's code or the tree's: its
    own library renders the N built-in candidates, so verify knows them for built-ins (their
    ablation runs) exactly as that revision's pipeline would."""
    argv = [__file__, "--measure", "--tasks", str(n), "--backends", backend]
    argv += ["--workers", str(workers), "--batch", str(batch)]
    cmd = [sys.executable, *argv] if tree is None else [sys.executable, "-c", SHIM, tree, *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measurement failed ({tree or 'this checkout'}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def export_revision(rev: str, dest: str) -> str:
    """`git archive REV` of this repository unpacked in dest (the package tree's root)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    archive = subprocess.run(
        ["git", "-C", repo, "archive", "--format=tar", rev], capture_output=True, check=True
    ).stdout
    os.makedirs(dest, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return dest


def _line(label: str, m: dict, n: int, workers: int) -> str:
    cpu = m["host_ms"] + m["sandbox_ms"]
    return (
        f"{label}: {m['rate']:.0f} tasks/min ({m['kept']}/{n} kept, {workers} workers); CPU "
        f"{cpu:.0f} ms/task = host {m['host_ms']:.0f} + sandboxes {m['sandbox_ms']:.0f}"
    )


def _mean(ms: list[dict]) -> dict:
    keys = ("rate", "host_ms", "sandbox_ms", "kept")
    out = {k: sum(m[k] for m in ms) / len(ms) for k in keys}
    out["kept"] = min(m["kept"] for m in ms)
    out["problems"] = sorted({p for m in ms for p in m["problems"]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200, help="tasks forged+verified per backend")
    ap.add_argument("--workers", type=int, default=4, help="threads (sandbox-bound work)")
    ap.add_argument("--batch", type=int, default=8, help="tasks per verify batch (verify.batch)")
    ap.add_argument("--backends", default="bwrap,docker")
    ap.add_argument("--repeat", type=int, default=20, help="repeats of each overhead measurement")
    ap.add_argument("--baseline", default="", help="git revision to compare with (before/after)")
    ap.add_argument(
        "--after", default="", help="git revision measured as 'after' (default: this checkout)"
    )
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds with --baseline")
    ap.add_argument(
        "--split",
        action="store_true",
        help="only where the CPU goes: one worker, CPU per task of each kind of bwrap exec",
    )
    # internal: one measurement, in this process
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if args.measure:
        cands = candidates(args.tasks)
        print(json.dumps(throughput(backends[0], cands, args.workers, args.batch)))
        return 0
    if args.split:
        if args.baseline:  # the same split by the baseline revision's code, first
            with tempfile.TemporaryDirectory(prefix="clawloop-bench-") as tmp:
                tree = export_revision(args.baseline, os.path.join(tmp, "baseline"))
                argv = [__file__, "--split", "--tasks", str(args.tasks), "--batch", str(args.batch)]
                print(f"before ({args.baseline}):", flush=True)
                subprocess.run([sys.executable, "-c", SHIM, tree, *argv], check=True)
            print("after (this checkout):", flush=True)
        split(candidates(args.tasks), args.batch)
        return 0
    load = os.getloadavg()[0]
    print(f"host: {os.cpu_count()} cores, load average {load:.1f} at start")
    n = args.tasks
    with tempfile.TemporaryDirectory(prefix="clawloop-bench-") as tmp:
        base = after_tree = None
        if args.baseline:
            base = export_revision(args.baseline, os.path.join(tmp, "baseline"))
        if args.after:
            after_tree = export_revision(args.after, os.path.join(tmp, "after"))
        for backend in backends:
            if backend == "docker" and (why := docker_available()) is not None:
                print(f"[docker] skipped: {why}")
                continue
            repeat = args.repeat if backend == "bwrap" else max(3, args.repeat // 4)
            raw, our = overhead(backend, repeat)
            exec_only = ours_exec_only(backend, repeat)
            rounds = max(1, args.rounds) if base else 1
            before, after = [], []
            for _ in range(rounds):  # alternating, so load drift hits both alike
                if base:
                    before.append(measure_in_process(base, backend, n, args.workers, args.batch))
                after.append(measure_in_process(after_tree, backend, n, args.workers, args.batch))
            now = _mean(after)
            if base:
                was = _mean(before)
                print(f"[{backend}] " + _line(f"before ({args.baseline})", was, n, args.workers))
            print(
                f"[{backend}] "
                + _line(
                    f"after ({args.after or 'this checkout'})" if base else "forge+verify",
                    now,
                    n,
                    args.workers,
                )
            )
            cpu = now["host_ms"] + now["sandbox_ms"]
            print(
                f"[{backend}] idle-host bound: {os.cpu_count()} cores x 60000 / {cpu:.0f} ms = "
                f"{os.cpu_count() * 60000 / cpu:.0f} tasks/min"
                + (" (sandbox CPU not counted for docker)" if backend == "docker" else "")
            )
            if base:
                was_cpu = was["host_ms"] + was["sandbox_ms"]
                print(
                    f"[{backend}] after/before: CPU per task {cpu / was_cpu:.2f}x "
                    f"(host {now['host_ms'] / was['host_ms']:.2f}x, sandboxes "
                    f"{now['sandbox_ms'] / max(was['sandbox_ms'], 1e-9):.2f}x), "
                    f"tasks/min {now['rate'] / was['rate']:.2f}x ({rounds} rounds each)"
                )
            print(
                f"[{backend}] one sandboxed `true` (medians, alternating): raw {raw:.1f} ms; ours start+exec+stop "
                f"{our:.1f} ms = {our / raw:.2f}x raw; ours exec in a started sandbox "
                f"{exec_only:.1f} ms = {exec_only / raw:.2f}x raw"
            )
            for p in now["problems"][:5]:
                print(f"    dropped: {p[:200]}")
    print(f"host load average {os.getloadavg()[0]:.1f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
