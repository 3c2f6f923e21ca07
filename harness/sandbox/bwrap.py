"""The bubblewrap backend: a daemonless sandbox, one `bwrap` process tree per exec.

Each sandbox owns a host directory (`$CLAWLOOP_BWRAP_ROOT/u<uid>/fs`, a size-capped tmpfs when we
can mount one) whose `workspace/ tests/ solution/ logs/ tmp/` are bound at the sandbox layout's
paths, over a read-only system: the debootstrap rootfs the Docker base image is made from when
present (identical environments across backends), else the host's /usr.

Isolation: every namespace unshared (network cut), no capabilities, a fresh session, a cleared
environment, and the whole tree dies with bwrap. Limits: RLIMIT_CPU/AS/FSIZE per process, and —
because root ignores RLIMIT_NPROC even inside a user namespace — each sandbox runs under its own
unprivileged host uid claimed from a range, so RLIMIT_NPROC counts that sandbox's processes only,
and `kill -1` as that uid ends everything it started.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import io
import json
import os
import random
import selectors
import shutil
import signal
import subprocess
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .archive import pack, split_remote, unpack
from .base import (
    SOLUTION,
    TESTS,
    WORKSPACE,
    ExecResult,
    Limits,
    Sandbox,
    SandboxConfig,
    SandboxError,
)
from .command import TIMEOUT_EXIT, CappedBuffer, argv_for, env_for, wall_timeout

DEFAULT_ROOTFS = "/var/cache/clawloop/rootfs-bookworm"
DEFAULT_ROOT = "/tmp/clawloop-bwrap"
UID_BASE = 3_000_000  # far above login users and the usual subuid ranges
UID_COUNT = 50_000
OWNER_FILE = "owner.json"
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


def sandbox_root() -> Path:
    return Path(os.environ.get("CLAWLOOP_BWRAP_ROOT", DEFAULT_ROOT))


def find_rootfs() -> Path | None:
    """The debootstrap rootfs (scripts/build-base-image.sh) if present, else None (host /usr)."""
    path = Path(os.environ.get("CLAWLOOP_ROOTFS", DEFAULT_ROOTFS))
    return path if (path / "usr/bin/python3").exists() else None


@dataclass(frozen=True)
class Owner:
    """Who claimed a sandbox dir: the sweep removes dirs whose owner process is gone."""

    pid: int
    start_ticks: int  # /proc/<pid>/stat start time: tells a live owner from a reused pid
    uid: int

    def alive(self) -> bool:
        return _start_ticks(self.pid) == self.start_ticks


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22, counted after the parenthesised command name (which may hold spaces).
    return int(stat.rsplit(")", 1)[1].split()[19])


def rlimit_args(limits: Limits, nproc: int | None) -> list[str]:
    """prlimit flags for one exec's limits (soft = hard, so the sandbox cannot raise them)."""
    args = [
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.memory_mb << 20}",
        f"--fsize={limits.file_size_mb << 20}",
        "--core=0",
    ]
    if nproc is not None:
        args.append(f"--nproc={nproc}")
    return args


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
        "--as-pid-1",  # no bwrap init: the monitor reaps the command itself, leaving no zombie
        "--new-session",
        "--cap-drop", "ALL",
        "--clearenv",
        "--chdir", cwd,
    ]  # fmt: skip
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--", *argv]


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, cfg: SandboxConfig | None = None) -> None:
        self.cfg = cfg or SandboxConfig(backend="bwrap")
        self.limits = self.cfg.limits
        self.rootfs = find_rootfs()
        self.uid: int | None = None  # host uid the sandbox runs as (None: not root, run as self)
        self.dir: Path | None = None
        self.mounted = False
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    @property
    def fs(self) -> Path:
        if self.dir is None:
            raise SandboxError("bwrap sandbox is not started: call start() or use `with`")
        return self.dir / "fs"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self.dir is not None:
            return
        if shutil.which("bwrap") is None:
            raise SandboxError("bubblewrap is not installed: apt-get install -y bubblewrap")
        root = sandbox_root()
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o711)  # sandbox uids may traverse to their own dir, not list others
        if os.geteuid() == 0:
            _check_traversable(root)
        self.dir, self.uid = _claim(root)
        try:
            fs = self.fs
            fs.mkdir()
            self.mounted = _mount_tmpfs(fs, self.limits)
            for sub in MOUNTS.values():
                (fs / sub).mkdir(exist_ok=True)
            (fs / "logs/verifier").mkdir(exist_ok=True)
            if self.uid is not None:
                for path in (self.dir, fs, *(p for p in fs.rglob("*"))):
                    os.chown(path, self.uid, self.uid)
        except Exception as exc:
            self.stop()
            raise SandboxError(f"bwrap sandbox start failed in {root}: {exc}") from exc

    def stop(self) -> None:
        if self.dir is None:
            return
        # Each exec's tree dies with its bwrap (pid namespace), so a uid-wide kill is needed only
        # while an exec is still running (stop() from another thread, or an exec that raised).
        with self._lock:
            running = bool(self._running)
            for proc in self._running:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        _teardown(self.dir, self.uid, kill=running)
        self.dir = None
        self.uid = None
        self.mounted = False

    # -- commands ----------------------------------------------------------------------------

    def exec(
        self,
        cmd: list[str] | str,
        timeout: float | None = None,
        cwd: str = WORKSPACE,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        wall = wall_timeout(timeout, self.limits)
        inner = bwrap_argv(self.fs, self.rootfs, argv_for(cmd), cwd, env_for(env))
        # The bwrap monitor counts against RLIMIT_NPROC too; the command's tree gets `pids`.
        nproc = self.limits.pids + 1 if self.uid is not None else None
        argv = ["prlimit", *rlimit_args(self.limits, nproc), "--", *inner]
        return self._run(argv, wall)

    def _run(self, argv: list[str], wall: float) -> ExecResult:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                user=self.uid,
                group=self.uid,
                extra_groups=[] if self.uid is not None else None,
            )
        except OSError as exc:
            raise SandboxError(f"could not run bwrap ({argv[0]}): {exc}") from exc
        with self._lock:
            self._running.add(proc)
        try:
            out, err = CappedBuffer(), CappedBuffer()
            timed_out = _pump(proc, {proc.stdout: out, proc.stderr: err}, start + wall)
            if timed_out:
                self._kill_all(proc)
            code = proc.wait()
        except BaseException:
            self._kill_all(proc)
            proc.wait()
            raise
        finally:
            with self._lock:
                self._running.discard(proc)
        return ExecResult(
            exit_code=TIMEOUT_EXIT if timed_out else _exit_code(code),
            stdout=out.text(),
            stderr=err.text(),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def _kill_all(self, proc: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        _kill_uid(self.uid)

    # -- files -------------------------------------------------------------------------------

    def _host_path(self, remote: str) -> Path:
        """Map a sandbox path onto the host, refusing anything outside the writable layout."""
        parent, name = split_remote(remote)
        full = f"{parent.rstrip('/')}/{name}"
        for mount, sub in MOUNTS.items():
            if full == mount or full.startswith(mount + "/"):
                return self.fs / sub / full[len(mount) :].lstrip("/")
        raise ValueError(
            f"bwrap sandbox path {remote!r} is outside {', '.join(MOUNTS)}: "
            "the system is read-only; put files under /workspace or /tmp"
        )

    def _inside(self, host: Path) -> None:
        """Refuse a host path that resolves (through a symlink the sandbox planted) outside it."""
        real, top = os.path.realpath(host), os.path.realpath(self.fs)
        if real != top and not real.startswith(top + os.sep):
            raise PermissionError(f"sandbox path resolves outside the sandbox ({host})")

    def upload(self, local: Path, remote: str) -> None:
        parent, name = split_remote(remote)
        data = pack(Path(local), name)
        # A directory upload lands in `remote`; a file upload lands at `remote`.
        dest = self._host_path(remote if Path(local).is_dir() else parent)
        _mkdirs(dest, self.fs, self.uid)
        self._inside(dest)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            # The data filter resolves existing symlinks and refuses members that would escape.
            tar.extractall(dest, filter="data")
            names = tar.getnames()
        if self.uid is not None:
            for member in names:
                with contextlib.suppress(FileNotFoundError):
                    os.chown(dest / member, self.uid, self.uid, follow_symlinks=False)

    def download(self, remote: str, local: Path) -> None:
        host = self._host_path(remote)
        if not host.exists() and not host.is_symlink():
            raise FileNotFoundError(f"no such path in the bwrap sandbox: {remote}")
        self._inside(host)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(host), arcname=split_remote(remote)[1])  # symlinks stay links
        unpack(buf.getvalue(), Path(local))


# -- helpers with side effects (processes, mounts, the claim dir) ------------------------------


def _pump(proc: subprocess.Popen, sinks: dict, deadline: float) -> bool:
    """Drain stdout/stderr into capped buffers until both close or the deadline passes.
    Returns True when the deadline passed."""
    sel = selectors.DefaultSelector()
    for stream, sink in sinks.items():
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ, sink)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            for key, _ in sel.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fileobj.fileno(), 65536)
                if chunk:
                    key.data.write(chunk)
                else:
                    sel.unregister(key.fileobj)
        # Pipes closed: the command ended (or closed them); wait for it within the deadline.
        left = deadline - time.monotonic()
        try:
            proc.wait(timeout=max(left, 0.001))
        except subprocess.TimeoutExpired:
            return True
        return False
    finally:
        sel.close()
        for stream in sinks:
            stream.close()


def _exit_code(code: int) -> int:
    # A signal death reads as 128+N, as a shell (and Docker) reports it.
    return 128 - code if code < 0 else code


def _claim(root: Path) -> tuple[Path, int | None]:
    """Claim a sandbox dir (and its uid) atomically with mkdir; write who owns it."""
    me = os.getpid()
    ticks = _start_ticks(me) or 0
    if os.geteuid() != 0:
        path = root / f"p{me}-{random.randrange(1 << 32):08x}"
        path.mkdir(mode=0o700)
        (path / OWNER_FILE).write_text(json.dumps({"pid": me, "start_ticks": ticks, "uid": -1}))
        return path, None
    offset = random.randrange(UID_COUNT)
    for i in range(UID_COUNT):
        uid = UID_BASE + (offset + i) % UID_COUNT
        path = root / f"u{uid}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        # No straggler can hold this uid: a crashed run's dir stays claimed until sweep() has
        # killed its processes and removed it.
        (path / OWNER_FILE).write_text(json.dumps({"pid": me, "start_ticks": ticks, "uid": uid}))
        return path, uid
    raise SandboxError(f"all {UID_COUNT} sandbox uids under {root} are taken: run clawloop sweep")


def _check_traversable(root: Path) -> None:
    """bwrap runs as the sandbox uid, which must be able to reach its dir under `root`."""
    for parent in root.resolve().parents:
        if not os.stat(parent).st_mode & 0o001:
            raise SandboxError(
                f"sandbox uids cannot traverse {parent} (mode {oct(os.stat(parent).st_mode)[-3:]}): "
                f"set CLAWLOOP_BWRAP_ROOT to a dir under a world-traversable path such as /tmp"
            )


def _read_owner(path: Path) -> Owner | None:
    try:
        raw = json.loads((path / OWNER_FILE).read_text())
        return Owner(int(raw["pid"]), int(raw["start_ticks"]), int(raw["uid"]))
    except (OSError, ValueError, KeyError):
        return None


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


_LIBC = _libc()
MNT_DETACH = 2


def _mount_tmpfs(fs: Path, limits: Limits) -> bool:
    """A size-capped tmpfs under the sandbox dir caps its total disk use (RLIMIT_FSIZE caps only
    single files). Needs root; without it the plain host directory is used. Called through libc:
    a `mount` subprocess would cost more than the rest of start()."""
    if os.geteuid() != 0 or _LIBC is None:
        return False
    opts = f"size={limits.disk_mb}m,mode=0755".encode()
    return _LIBC.mount(b"clawloop-sandbox", str(fs).encode(), b"tmpfs", 0, opts) == 0


def _umount(fs: Path) -> None:
    if _LIBC is not None and _LIBC.umount2(str(fs).encode(), MNT_DETACH) == 0:
        return
    subprocess.run(["umount", "-l", str(fs)], capture_output=True)


def _kill_uid(uid: int | None) -> None:
    """SIGKILL every process of a sandbox uid (`kill -1` as that uid reaches exactly those)."""
    if uid is None:
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["kill", "-KILL", "-1"],
            user=uid,
            group=uid,
            extra_groups=[],
            capture_output=True,
            timeout=10,
        )


def _mkdirs(dest: Path, top: Path, uid: int | None) -> None:
    """Create `dest` and its missing parents, owned by the sandbox uid."""
    missing = []
    probe = dest
    while not probe.exists() and probe != top:
        missing.append(probe)
        probe = probe.parent
    for path in reversed(missing):
        path.mkdir()
        if uid is not None:
            os.chown(path, uid, uid)


def _teardown(path: Path, uid: int | None, kill: bool = True) -> None:
    """Kill what runs in a sandbox, unmount its tmpfs, remove its dir (releasing the uid)."""
    if kill:
        _kill_uid(uid)
    fs = path / "fs"
    if os.path.ismount(fs):
        _umount(fs)
    shutil.rmtree(path, ignore_errors=True)


def sweep_bwrap() -> list[str]:
    """Remove sandbox dirs whose owner process is dead (a killed run); return what was removed."""
    root = sandbox_root()
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for path in root.iterdir():
        owner = _read_owner(path)
        if owner is not None and owner.alive():
            continue
        if owner is None and time.time() - path.stat().st_mtime < 60:
            continue  # being claimed right now: the owner file is written just after mkdir
        uid = owner.uid if owner is not None and owner.uid >= 0 else None
        _teardown(path, uid)
        removed.append(str(path))
    return removed
