"""The bubblewrap backend: a daemonless sandbox, one `bwrap` process tree per exec.

Each sandbox owns a host directory (`$CLAWLOOP_BWRAP_ROOT/u<uid>/fs`, a size-capped tmpfs when we
can mount one) whose `workspace/ tests/ solution/ logs/ tmp/` are bound at the sandbox layout's
paths, over a read-only system: the debootstrap rootfs the Docker base image is made from when
present (identical environments across backends), else the host's /usr.

Isolation: every namespace unshared (network cut), no capabilities, a fresh session, a cleared
environment, and the whole tree dies with bwrap. Limits: RLIMIT_CPU/AS/FSIZE per process, and —
because root ignores RLIMIT_NPROC even inside a user namespace — each sandbox runs under its own
unprivileged host uid claimed from a range (claim.py), so RLIMIT_NPROC counts that sandbox's processes only,
and `kill -1` as that uid ends everything it started. Total memory: a per-sandbox memory cgroup
(cgroup.py) caps all of a sandbox's processes together, where cgroups are writable.

One exec is one vfork and two execs: a tiny compiled launcher (launcher.py) moves itself into the
sandbox's cgroup, lowers its rlimits and becomes the sandbox uid, then execs bwrap; everything
bwrap starts inherits all three. Without a C compiler the same steps run in a preexec_fn of a
forked child (`_enter`): slower (fork copies this process), same isolation.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import io
import os
import resource
import selectors
import shutil
import signal
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from . import cgroup, launcher
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
from .claim import (
    OWNER_FILE,
    _check_traversable,
    _claim,
    _read_owner,
    _sweep_roots,
    sandbox_root,
)
from .command import TIMEOUT_EXIT, CappedBuffer, argv_for, env_for, wall_timeout

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


def rlimits(limits: Limits, nproc: int | None) -> dict[int, int]:
    """One exec's rlimits (set soft = hard, so the sandbox cannot raise them)."""
    values = {
        resource.RLIMIT_CPU: limits.cpu_seconds,
        resource.RLIMIT_AS: limits.memory_mb << 20,
        resource.RLIMIT_FSIZE: limits.file_size_mb << 20,
        resource.RLIMIT_CORE: 0,
    }
    if nproc is not None:
        values[resource.RLIMIT_NPROC] = nproc
    return values


_PRLIMIT_FLAGS = {
    resource.RLIMIT_CPU: "--cpu",
    resource.RLIMIT_AS: "--as",
    resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_CORE: "--core",
    resource.RLIMIT_NPROC: "--nproc",
}


def rlimit_args(limits: Limits, nproc: int | None) -> list[str]:
    """The same limits as prlimit(1) flags: how the benchmark's raw baseline applies them."""
    return [f"{_PRLIMIT_FLAGS[which]}={value}" for which, value in rlimits(limits, nproc).items()]


def capped(limits: dict[int, int]) -> dict[int, int]:
    """Rlimits no higher than our own hard limits (the most an unprivileged process may set)."""
    out = {}
    for which, value in limits.items():
        hard = resource.getrlimit(which)[1]
        out[which] = value if hard == resource.RLIM_INFINITY else min(value, hard)
    return out


def _enter(tasks_fd: int | None, limits: dict[int, int]) -> Callable[[], None]:
    """The fallback launcher: code the forked child (already the sandbox uid) runs just before it
    execs bwrap, doing what launcher.py's C launcher does.

    It joins the sandbox's memory cgroup by writing "0" to the cgroup's `tasks` file through an
    fd this (root) process opened: a thread moving itself skips the global lock that moving
    another process takes (a synchronize_rcu, ~10 ms per exec), and the fd carries root's
    permission, so the cgroup files need not be handed to the sandbox uid. Then it lowers its
    rlimits (already capped to ours, so no privilege is needed). Python's preexec_fn warning (a
    lock another thread held at fork time) does not bite: the hook only calls os.write and
    resource.setrlimit, bound before the fork, and CPython resets its own locks in the child as
    it does for os.fork()."""
    pairs = list(limits.items())
    setrlimit, write = resource.setrlimit, os.write

    def enter() -> None:
        if tasks_fd is not None:
            write(tasks_fd, b"0")
        for which, value in pairs:
            setrlimit(which, (value, value))

    return enter


def _spawn(
    argv: list[str], uid: int | None, tasks_fd: int | None, report_fd: int, limits: dict[int, int]
) -> tuple[list[str], dict]:
    """The argv and Popen keyword arguments that start `argv` as `uid`, in the cgroup behind
    `tasks_fd`, under `limits`: through the compiled launcher (vfork; it reports a failed set-up
    on `report_fd`) when there is one, else through subprocess's user switch and a preexec_fn
    (fork; subprocess raises a failed set-up itself)."""
    limits = capped(limits)
    path = launcher.launcher_path()
    if path is not None:
        fds = (report_fd,) if tasks_fd is None else (report_fd, tasks_fd)
        argv = launcher.launcher_argv(path, uid, tasks_fd, report_fd, limits, argv)
        return argv, {"pass_fds": fds}
    return argv, {
        "preexec_fn": _enter(tasks_fd, limits),
        "user": uid,
        "group": uid,
        "extra_groups": [] if uid is not None else None,
    }


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


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, cfg: SandboxConfig | None = None) -> None:
        self.cfg = cfg or SandboxConfig(backend="bwrap")
        self.limits = self.cfg.limits
        self.rootfs = find_rootfs()
        self.uid: int | None = None  # host uid the sandbox runs as (None: not root, run as self)
        self.dir: Path | None = None
        self.cgroup: Path | None = None  # the sandbox's memory cgroup (None: cgroups unusable)
        self._tasks_fd: int | None = None  # its `tasks` file, open for writing (see _enter)
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
        root = _prepared_root(sandbox_root())
        try:
            self.dir, self.uid = _claim(root)
        except FileNotFoundError:  # the root was removed since it was prepared: once more
            _prepared_root.cache_clear()
            self.dir, self.uid = _claim(_prepared_root(root))
        try:
            fs = self.fs
            fs.mkdir()
            self.mounted = _mount_tmpfs(fs, self.limits)
            made = [fs / sub for sub in MOUNTS.values()] + [fs / "logs/verifier"]
            for path in made:
                path.mkdir(exist_ok=True)
            if self.uid is not None:
                for path in (self.dir, fs, *made):
                    os.chown(path, self.uid, self.uid)
            disk = self.limits.disk_mb if self.mounted else None
            self.cgroup = cgroup.create(
                self.dir.name, cgroup.memory_bytes(self.limits.memory_mb, disk)
            )
            if self.cgroup is not None:
                self._tasks_fd = cgroup.open_tasks(self.cgroup)
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
            if self._tasks_fd is not None:
                os.close(self._tasks_fd)
                self._tasks_fd = None
        _teardown(self.dir, self.uid, kill=running, group=self.cgroup)
        self.dir = None
        self.uid = None
        self.cgroup = None
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
        argv = bwrap_argv(self.fs, self.rootfs, argv_for(cmd), cwd, env_for(env))
        # The bwrap monitor counts against RLIMIT_NPROC too; the command's tree gets `pids`.
        nproc = self.limits.pids + 1 if self.uid is not None else None
        # This exec's own copy of the tasks fd: a concurrent stop() closing the sandbox's cannot
        # leave the child writing to whatever file reuses that fd number.
        with self._lock:
            tasks_fd = None if self._tasks_fd is None else os.dup(self._tasks_fd)
        # The launcher's only channel for "could not set the sandbox up": the command cannot
        # write to it (it is closed when bwrap starts), so its stderr cannot fake a set-up fault.
        report, report_w = os.pipe()
        argv, how = _spawn(argv, self.uid, tasks_fd, report_w, rlimits(self.limits, nproc))
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # Its own process group (so killpg ends it), not its own session: setsid() costs
                # a scheduler autogroup (~3 ms under load); bwrap --new-session gives the command
                # the session that keeps it off any terminal.
                process_group=0,
                **how,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            os.close(report)
            raise SandboxError(f"could not start bwrap in {self.dir}: {exc}") from exc
        finally:
            os.close(report_w)
            if tasks_fd is not None:
                os.close(tasks_fd)
        with self._lock:
            self._running.add(proc)
        try:
            out, err = CappedBuffer(), CappedBuffer()
            timed_out = _pump(proc, {proc.stdout: out, proc.stderr: err}, start + wall)
            if timed_out:
                self._kill_all(proc)
            code = proc.wait()
            failure = os.read(report, 4096)  # EOF at once: the launcher exec'd or exited
        except BaseException:
            self._kill_all(proc)
            proc.wait()
            raise
        finally:
            os.close(report)
            with self._lock:
                self._running.discard(proc)
        if failure:
            why = failure.decode(errors="replace")
            raise SandboxError(f"could not start bwrap in {self.dir}: clawloop-enter: {why}")
        return ExecResult(
            exit_code=TIMEOUT_EXIT if timed_out else _exit_code(code),
            stdout=out.text(),
            stderr=err.text(),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def kill_strays(self) -> bool:
        """Nothing to do, by construction: each exec is the pid 1 of its own pid namespace, and
        the kernel kills every process of a namespace when its pid 1 exits, so no process
        outlives the exec that started it (setsid, nohup and double forks included)."""
        if self.dir is None:
            raise SandboxError("bwrap sandbox is not started: call start() or use `with`")
        return True

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


@functools.lru_cache(maxsize=8)
def _prepared_root(root: Path) -> Path:
    """Check for bwrap and make the sandbox root, once per process and root."""
    if shutil.which("bwrap") is None:
        raise SandboxError("bubblewrap is not installed: apt-get install -y bubblewrap")
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)  # sandbox uids may traverse to their own dir, not list others
    if os.geteuid() == 0:
        _check_traversable(root)
    return root


def _pump(proc: subprocess.Popen, sinks: dict, deadline: float) -> bool:
    """Drain stdout/stderr into capped buffers until both close and the process has exited, or
    the deadline passes. Returns True when the deadline passed. The exit is watched through a
    pidfd in the same select: Popen.wait(timeout) would poll with sleeps (0.5 ms, 1 ms, ...)."""
    sel = selectors.DefaultSelector()
    for stream, sink in sinks.items():
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ, sink)
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # Linux < 5.3: fall back to Popen.wait below
        pidfd = None
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ, None)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            for key, _ in sel.select(timeout=min(left, 1.0)):
                if key.data is None:  # the pidfd: the process has exited
                    sel.unregister(key.fileobj)
                    continue
                chunk = os.read(key.fileobj.fileno(), 65536)
                if chunk:
                    key.data.write(chunk)
                else:
                    sel.unregister(key.fileobj)
        if pidfd is None:
            # Pipes closed: the command ended (or closed them); wait for it within the deadline.
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
            except subprocess.TimeoutExpired:
                return True
        return False
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        for stream in sinks:
            stream.close()


def _exit_code(code: int) -> int:
    # A signal death reads as 128+N, as a shell (and Docker) reports it.
    return 128 - code if code < 0 else code


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


def _teardown(path: Path, uid: int | None, kill: bool = True, group: Path | None = None) -> None:
    """Kill what runs in a sandbox, unmount its tmpfs, remove its cgroup, then its dir (releasing
    the uid). A cgroup that stays busy keeps the dir, so a later sweep still finds both."""
    if kill:
        _kill_uid(uid)
    fs = path / "fs"
    if os.path.ismount(fs):
        _umount(fs)
    if group is not None and not cgroup.remove(group):
        _kill_uid(uid)
        if not cgroup.remove(group, wait_s=2.0):
            return
    # The tmpfs is gone, so usually only owner.json and empty dirs are left: remove them
    # directly, and walk the tree only when the host-dir fallback left files behind.
    try:
        (path / OWNER_FILE).unlink(missing_ok=True)
        fs.rmdir()
        path.rmdir()
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def sweep_bwrap() -> list[str]:
    """Remove sandbox dirs whose owner process is dead (a killed run); return what was removed."""
    removed: list[str] = []
    # Cgroups are listed before the dirs: a sandbox claims its dir before it creates its cgroup
    # and removes the cgroup before its dir, so a cgroup listed here whose dir is missing from
    # the later listing is truly orphaned, never one being set up right now.
    groups = cgroup.list_groups()
    live: set[str] = set()
    for root in _sweep_roots():
        if not root.is_dir():
            continue
        for path in root.iterdir():
            try:
                owner = _read_owner(path)
                if owner is not None and owner.alive():
                    live.add(path.name)
                    continue
                if owner is None and time.time() - path.stat().st_mtime < 60:
                    live.add(path.name)
                    continue  # being claimed right now: the owner file is written after mkdir
            except FileNotFoundError:
                continue  # its owner (or another sweep) removed it meanwhile
            uid = owner.uid if owner is not None and owner.uid >= 0 else None
            group = Path(owner.cgroup) if owner is not None and owner.cgroup else None
            _teardown(path, uid, group=group)
            if path.exists():
                live.add(path.name)  # its cgroup is still busy: the next sweep retries
            else:
                removed.append(str(path))
    cgroup.remove_orphans(groups, live)
    return removed
