"""Sandbox overhead: our layer against the raw tools, measured in the same invocation.

    .venv/bin/python benchmarks/sandbox_overhead.py [--n 40] [--backend all|bwrap|docker]

Each row times a raw baseline and our layer on the same machine, interleaved (raw, ours, ours,
raw, ...: load drifts hit both alike), after one untimed warm-up of each, and prints the median
milliseconds of each and the ratio ours/raw (target: <= 1.5):

  bwrap:  raw `bwrap --ro-bind ROOTFS / ... true` (subprocess)   vs start + exec(true) + stop
          our exact isolation run raw (our launcher, else prlimit
          as the sandbox uid, + our bwrap flags; no cgroup)       vs BwrapSandbox.exec(["true"])
  docker: raw containers.run(image, "true", remove=True)         vs start + exec(true) + stop
          raw container.exec_run("true")                         vs DockerSandbox.exec(["true"])
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from clawloop.harness.sandbox.backend import docker_available  # noqa: E402
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.sandbox.bwrap import (  # noqa: E402
    BwrapSandbox,
    bwrap_argv,
    capped,
    find_rootfs,
    rlimit_args,
    rlimits,
    system_binds,
)
from clawloop.harness.sandbox.command import env_for  # noqa: E402
from clawloop.harness.sandbox.launcher import launcher_argv, launcher_path  # noqa: E402

RAW_BWRAP_TAIL = [
    "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all", "--unshare-user",
    "--uid", "0", "--gid", "0", "--die-with-parent", "--new-session", "--clearenv",
    "--setenv", "PATH", "/usr/bin:/bin", "true",
]  # fmt: skip


def paired_medians(raw: Callable[[], object], ours: Callable[[], object], n: int) -> tuple:
    """Median ms of `raw` and of `ours`, run alternately (ABBA order) n times each."""
    raw(), ours()  # warm caches (page cache, image layers, imports) outside the measurement
    times: dict[str, list[float]] = {"raw": [], "ours": []}
    for i in range(n):
        order = (("raw", raw), ("ours", ours)) if i % 2 == 0 else (("ours", ours), ("raw", raw))
        for name, fn in order:
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1000)
    return statistics.median(times["raw"]), statistics.median(times["ours"])


def row(name: str, raw: float, ours: float) -> None:
    print(f"{name:<34} raw {raw:8.1f} ms   ours {ours:8.1f} ms   ratio {ours / raw:5.2f}x")


def bench_bwrap(n: int) -> None:
    rootfs = find_rootfs()
    if rootfs is not None:
        raw_argv = ["bwrap", "--ro-bind", str(rootfs), "/", *RAW_BWRAP_TAIL]
    else:
        raw_argv = ["bwrap", *system_binds(None), *RAW_BWRAP_TAIL]

    def raw() -> None:
        subprocess.run(raw_argv, check=True)

    def ours() -> None:
        sb = BwrapSandbox(SandboxConfig(backend="bwrap"))
        sb.start()
        try:
            if not sb.exec(["true"]).ok:
                raise RuntimeError("exec(true) failed in the bwrap sandbox")
        finally:
            sb.stop()

    row("bwrap start+exec+stop", *paired_medians(raw, ours, n))

    # The same isolation without our Python layer: our exact command line, run directly.
    sb = BwrapSandbox(SandboxConfig(backend="bwrap"))
    sb.start()
    try:
        nproc = sb.limits.pids + 1 if sb.uid is not None else None
        inner = bwrap_argv(sb.fs, sb.rootfs, ["true"], "/workspace", env_for(None))
        uid, path = sb.uid, launcher_path()
        if path is not None:  # what exec runs, minus the cgroup; stderr stands in for the report fd
            same = launcher_argv(path, uid, None, 2, capped(rlimits(sb.limits, nproc)), inner)
            as_uid = {}
        else:
            same = ["prlimit", *rlimit_args(sb.limits, nproc), "--", *inner]
            as_uid = {"user": uid, "group": uid, "extra_groups": [] if uid else None}

        def raw_same() -> None:
            subprocess.run(same, check=True, **as_uid)

        row("bwrap same flags vs exec", *paired_medians(raw_same, lambda: sb.exec(["true"]), n))
    finally:
        sb.stop()


def bench_docker(n: int) -> None:
    import docker
    from clawloop.harness.sandbox.docker import DockerSandbox

    cfg = SandboxConfig(backend="docker")
    cli = docker.from_env()

    def raw_run() -> None:
        cli.containers.run(cfg.image, "true", remove=True, network_mode="none")

    def ours() -> None:
        with DockerSandbox(cfg) as sb:
            if not sb.exec(["true"]).ok:
                raise RuntimeError("exec(true) failed in the docker sandbox")

    row("docker run vs start+exec+stop", *paired_medians(raw_run, ours, n))

    with DockerSandbox(cfg) as sb:
        raw_c = cli.containers.get(sb.container.id)
        row(
            "docker exec_run vs exec",
            *paired_medians(lambda: raw_c.exec_run(["true"]), lambda: sb.exec(["true"]), n),
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="timed repetitions per measurement")
    parser.add_argument("--backend", choices=["all", "bwrap", "docker"], default="all")
    args = parser.parse_args()
    if args.backend in ("all", "bwrap"):
        bench_bwrap(args.n)
    if args.backend in ("all", "docker"):
        reason = docker_available()
        if reason:
            print(f"docker: skipped ({reason})")
        else:
            bench_docker(max(5, args.n // 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
