"""What a bwrap sandbox sees, as bwrap flags: the read-only system and the writable layout.

The system is the debootstrap rootfs the Docker base image is made from when present (identical
environments across backends), else the host's /usr and a few /etc files. Over it, the sandbox's
own host directories are bound at the sandbox layout's paths (`MOUNTS`). `bwrap_argv` is the full,
pure command line for one exec; bwrap.py runs it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .base import SOLUTION, TESTS, WORKSPACE

DEFAULT_ROOTFS = "/var/cache/clawloop/rootfs-bookworm"
# Directories of the sandbox layout, relative to the sandbox's host fs dir; /logs covers
# /logs/verifier.
MOUNTS = {
    WORKSPACE: "workspace",
    TESTS: "tests",
    SOLUTION: "solution",
    "/logs": "logs",
    "/tmp": "tmp",
}
# Host /etc files the host-system fallback exposes: what bash, python and TLS need, nothing more.
HOST_ETC = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
    "nsswitch.conf", "ssl", "ca-certificates", "python3", "python3.11", "mime.types", "profile",
    "bash.bashrc", "inputrc",
)  # fmt: skip


def find_rootfs() -> Path | None:
    """The debootstrap rootfs (scripts/build-base-image.sh) if present, else None (host /usr)."""
    path = Path(os.environ.get("CLAWLOOP_ROOTFS", DEFAULT_ROOTFS))
    return path if (path / "usr/bin/python3").exists() else None


def system_binds(rootfs: Path | None) -> list[str]:
    """bwrap flags for the read-only system: the rootfs, or the host's /usr and a few /etc files."""
    if rootfs is not None:
        return ["--ro-bind", str(rootfs), "/"]
    binds = ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "sbin", "lib", "lib64", "lib32"):
        target = Path("/", link)
        if target.is_symlink():
            binds += ["--symlink", os.readlink(target), f"/{link}"]
        elif target.is_dir():
            binds += ["--ro-bind", str(target), f"/{link}"]
    for name in HOST_ETC:
        if Path("/etc", name).exists():
            binds += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return binds


def bwrap_argv(
    fs: Path, rootfs: Path | None, argv: list[str], cwd: str, env: dict[str, str]
) -> list[str]:
    """The full bwrap command line for one exec (pure: testable without running it)."""
    args = ["bwrap", *system_binds(rootfs), "--proc", "/proc", "--dev", "/dev"]
    for remote, sub in MOUNTS.items():
        args += ["--bind", str(fs / sub), remote]
    args += [
        "--unshare-all",
        "--unshare-user",
        "--uid", "0",
        "--gid", "0",
        "--hostname", "sandbox",
        "--die-with-parent",
        # No bwrap init: its monitor would report the exit while init is still tearing the pid
        # namespace down; as pid 1 the command's exit is the namespace's end.
        "--as-pid-1",
        "--new-session",
        "--cap-drop", "ALL",
        "--clearenv",
        "--chdir", cwd,
    ]  # fmt: skip
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--", *argv]
