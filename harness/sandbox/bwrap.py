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

This module is the sandbox class (lifecycle, exec, file transfer); beside it: bwrap_layout.py (the
read-only system, the writable mounts, the bwrap command line), bwrap_launch.py (rlimits, the
launcher or preexec start, draining output) and bwrap_host.py (the sandbox root, tmpfs, kills,
teardown and `sweep_bwrap`).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import stat
import subprocess
import tarfile
import threading
import time
from pathlib import Path

from . import cgroup
from .archive import pack, split_remote, unpack
from .base import WORKSPACE, ExecResult, Sandbox, SandboxConfig, SandboxError
from .bwrap_host import (
    _kill_uid,
    _mkdirs,
    _mount_tmpfs,
    _prepared_root,
    _teardown,
    sweep_bwrap,
)
from .bwrap_launch import _exit_code, _pump, _spawn, capped, rlimit_args, rlimits
from .bwrap_layout import MOUNTS, bwrap_argv, find_rootfs, system_binds
from .claim import OWNER_FILE, _claim, sandbox_root
from .command import TIMEOUT_EXIT, CappedBuffer, argv_for, env_for, wall_timeout

# The public names: BwrapSandbox is defined here, the rest beside it (imported here for
# backend.py, the tests and benchmarks/sandbox_overhead.py).
__all__ = [
    "OWNER_FILE",
    "BwrapSandbox",
    "bwrap_argv",
    "capped",
    "find_rootfs",
    "rlimit_args",
    "rlimits",
    "sweep_bwrap",
    "system_binds",
]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int, limit: int) -> bytes:
    parts, got = [], 0
    while got < limit and (chunk := os.read(fd, min(1 << 20, limit - got))):
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _force(func, path, _exc) -> None:  # noqa: ANN001 (shutil.rmtree's onerror signature)
    """rmtree's retry for an entry the sandbox made unwritable (a mode 000 folder)."""
    os.chmod(os.path.dirname(path), 0o755)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o755)
        shutil.rmtree(path, onerror=_force)
    else:
        os.unlink(path)


MAX_TREE_PATH = 1024  # bytes of a path read_tree copies (copied deeper, it must still fit)


def _tree(
    top: Path, max_bytes: int, max_entries: int
) -> dict[str, tuple[bytes, bool] | None] | None:
    """BwrapSandbox.read_tree's walk of the host folder `top`."""
    if os.stat(top).st_mode & 0o500 != 0o500:
        return None
    out: dict[str, tuple[bytes, bool] | None] = {}
    total = 0
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(top / rel) as it:
            entries = list(it)
        for entry in entries:
            name = f"{rel}{entry.name}"
            st = entry.stat(follow_symlinks=False)
            if len(out) >= max_entries or len(os.fsencode(name)) > MAX_TREE_PATH:
                return None
            if stat.S_ISDIR(st.st_mode):
                if st.st_mode & 0o500 != 0o500:  # the sandbox could not read it: nor may a copy
                    return None
                out[name] = None
                stack.append(name + "/")
                continue
            total += st.st_size
            if not stat.S_ISREG(st.st_mode) or total > max_bytes or not st.st_mode & 0o400:
                return None
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                data = _read_all(fd, st.st_size + 1)
            finally:
                os.close(fd)
            if len(data) != st.st_size:
                return None
            out[name] = (data, bool(st.st_mode & 0o111))
    return out


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
            for path in [*made, fs / "logs/grading"]:
                path.mkdir(exist_ok=True)
            if self.uid is not None:
                # /logs and /logs/grading stay the host root's (read-only inside): the grading
                # kit put there cannot be renamed away or replaced (upload_sealed).
                for path in (self.dir, fs, *made):
                    if path != fs / "logs":
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

    def upload_sealed(self, local: Path, remote: str) -> bool:
        """`upload`, then `seal` what landed (True), from the host while no exec runs; not
        sealed (False) when not run as root."""
        self.upload(local, remote)
        self.seal(remote)
        return self.uid is not None

    # -- direct file access (no tar): the sandbox's files are host files under self.fs ---------
    # Each is safe only between execs: every process an exec started is dead when it returns
    # (kill_strays), so nothing in the sandbox can swap a path while the host touches it.

    def _idle_dir(self, remote: str, create: bool) -> Path:
        """The host dir behind `remote`, inside the sandbox, while no exec runs."""
        with self._lock:
            if self._running:
                raise SandboxError("direct file access while an exec runs in the sandbox")
        dest = self._host_path(remote)
        if create:
            _mkdirs(dest, self.fs, self.uid)
        self._inside(dest)
        return dest

    def write_files(self, remote: str, files: dict[str, tuple[bytes, bool] | None]) -> None:
        """Write {relative path: (data, executable), or None for a folder} under the directory
        `remote`, as an upload of a folder holding them would (missing folders made, owned by
        the sandbox uid), without packing a tar. Refuses relative paths that escape `remote`
        and existing symlinks."""
        top = self._idle_dir(remote, create=True)
        made: dict[str, Path] = {"": top}

        def folder(rel: str) -> Path:
            # Parents first: a folder made here under a checked parent is inside the sandbox;
            # only one that was there already (perhaps a symlink an exec planted) is resolved.
            if rel not in made:
                path = folder(os.path.dirname(rel)) / os.path.basename(rel)
                try:
                    path.mkdir()
                except FileExistsError:
                    self._inside(path)
                else:
                    if self.uid is not None:
                        os.chown(path, self.uid, self.uid)
                made[rel] = path
            return made[rel]

        for rel, entry in sorted(files.items()):
            norm = os.path.normpath(rel)
            if rel.startswith("/") or norm.startswith("..") or norm == ".":
                raise ValueError(f"file {rel!r} escapes {remote}")
            if entry is None:
                folder(norm)
                continue
            data, executable = entry
            path = folder(os.path.dirname(norm)) / os.path.basename(norm)
            mode = 0o755 if executable else 0o644
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
            try:
                _write_all(fd, data)
                os.fchmod(fd, mode)
                if self.uid is not None:
                    os.fchown(fd, self.uid, self.uid)
            finally:
                os.close(fd)

    def read_file(self, remote: str, cap: int) -> bytes | None:
        """A regular file's bytes (no symlink followed), or None when it is missing or not a
        regular file; OverflowError (its size as the argument) when it is over `cap` bytes."""
        parent, name = split_remote(remote)
        try:
            top = self._idle_dir(parent, create=False)
            fd = os.open(top / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (OSError, ValueError):
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            data = _read_all(fd, cap + 1) if st.st_size <= cap else b""
            if st.st_size > cap or len(data) > cap:
                raise OverflowError(max(st.st_size, len(data)))
            return data
        finally:
            os.close(fd)

    def read_tree(
        self, remote: str, max_bytes: int, max_entries: int
    ) -> dict[str, tuple[bytes, bool] | None] | None:
        """Every folder (None) and regular file ((data, executable)) under the directory
        `remote`, as write_files takes them; None when the tree holds anything else (a symlink,
        a FIFO, a device), an entry its owner may not read (write_files would write it
        readable), a path over MAX_TREE_PATH bytes, or is over `max_bytes` in files or
        `max_entries` entries: then it cannot be copied as it is."""
        top = self._idle_dir(remote, create=False)
        try:
            return _tree(top, max_bytes, max_entries)
        except OSError:  # a folder or file the sandbox made unreadable
            return None

    def seal(self, remote: str, recursive: bool = True) -> None:
        """Make `remote` (and with `recursive` everything under it) owned by the host's root and
        not writable by others, from the host, while no exec runs: inside the sandbox it is then
        an unmapped owner's, which the sandbox's commands (no capabilities) may read but never
        change, replace or chmod. For grading files: code the verifier runs (the agent's
        program) cannot rewrite the rest of the verifier. A no-op when not run as root (the
        sandbox then runs as our own uid, which owns everything)."""
        if self.uid is None:
            return
        top = self._host_path(remote)
        with self._lock:
            if self._running:
                raise SandboxError("seal while an exec runs in the sandbox")
        self._inside(top)
        paths = [top]
        if recursive and top.is_dir() and not top.is_symlink():
            for parent, dirs, files in os.walk(top):
                paths += [Path(parent, n) for n in dirs + files]
        for path in paths:
            st = os.lstat(path)
            os.chown(path, 0, 0, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(
                    path,
                    stat.S_IMODE(st.st_mode) & ~0o022
                    | (0o555 if stat.S_ISDIR(st.st_mode) else 0o444),
                )

    def reset_dirs(self, remotes: list[str]) -> str:
        """Empty each directory of `remotes` from the host (what taskenv.prepare_grading's exec
        does): whatever an exec planted there is removed, a path it replaced with a file or a
        symlink is made a directory again. Returns "" when done, else why not."""
        for remote in remotes:
            try:
                host = self._host_path(remote)
                with self._lock:
                    if self._running:
                        return "an exec is still running in the sandbox"
                if host.is_symlink() or (host.exists() and not host.is_dir()):
                    host.unlink()
                if host.is_dir():
                    os.chmod(host, 0o755)
                    for child in os.scandir(host):
                        if child.is_dir(follow_symlinks=False):
                            shutil.rmtree(child.path, onerror=_force)
                        else:
                            os.unlink(child.path)
                self._idle_dir(remote, create=True)
                if os.listdir(host):
                    return f"could not empty {remote}"
            except OSError as exc:
                return f"could not empty {remote} ({exc})"
        return ""

    def download(self, remote: str, local: Path) -> None:
        host = self._host_path(remote)
        if not host.exists() and not host.is_symlink():
            raise FileNotFoundError(f"no such path in the bwrap sandbox: {remote}")
        self._inside(host)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(host), arcname=split_remote(remote)[1])  # symlinks stay links
        unpack(buf.getvalue(), Path(local))
