"""The Docker backend: one labelled container per sandbox, driven through the `docker` SDK.

The container runs a sleeper from `clawloop-base:latest` (scripts/build-base-image.sh) with no
network, no capabilities, no-new-privileges, cgroup memory/pids/CPU limits and RLIMIT_FSIZE/CPU
ulimits; each exec is wrapped in `timeout -s KILL N` because the Engine API has no exec timeout,
and guarded on the host too. Files move with put_archive/get_archive, so a remote engine
(DOCKER_HOST=tcp://... or ssh://...) works the same as the local socket. Every container carries
labels naming its owner process, so `sweep_docker()` can remove those a killed run left behind.
Inside a run (the pipeline sets CLAWLOOP_RUN_ID and CLAWLOOP_STAGE while a stage runs) a container
is also named `clawloop-<run id>-<stage>-<8 hex>` and labelled with the run id and stage, so a
person can find a run's sandboxes (`docker ps --filter label=clawloop.run_id=RUN`).

With `SandboxConfig.docker_hosts` the sandbox takes a slot on a host of the pool (pool.py) at
start and gives it back at stop; every fault of the engine (the SDK's errors and the connection
errors of a host that went away alike) is a SandboxError naming the host, which the pool hears
about, so a host that stopped answering is taken out and the item's retry goes elsewhere. The
container's limits are the same on every host (`run_kwargs`).

Disk: as on bubblewrap, the system is read-only and only the layout's dirs are writable, each a
size-capped tmpfs (`disk_mb`). Why not the alternatives: `storage_opt={"size": ...}` works only for
overlay2 over XFS mounted with pquota (engines on ext4, as here, refuse it), and plain `tmpfs=`
mounts live only in the container's mount namespace, where put_archive/get_archive cannot see
them (files uploaded there vanish). Anonymous volumes of the `local` driver with tmpfs options
are mounted by the engine itself, so the archive API reaches them, and `remove(v=True)` deletes
them with the container. Their pages are RAM charged to the container's memory cgroup: files the
sandbox writes count toward `memory_mb`.
"""

from __future__ import annotations

import contextlib
import posixpath
import resource
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from clawloop.storage.cache_key import data_text

from . import pool
from .archive import MAX_DOWNLOAD_BYTES, pack, split_remote, unpack
from .base import (
    GRADING_KIT,
    SEALED,
    SOLUTION,
    TESTS,
    VERIFIER_LOGS,
    WORKSPACE,
    ExecResult,
    Limits,
    Sandbox,
    SandboxConfig,
    SandboxError,
)
from .command import TIMEOUT_EXIT, CappedBuffer, argv_for, env_for, wall_timeout
from .docker_engine import (
    LABEL,
    LABEL_PID,
    container_name,
    engine_errors,
    owner_labels,
    shared_client,
)

# Seconds the host waits past an exec's limit before it stops trusting `timeout` (a process that
# escaped its process group can hold the output stream open) and kills everything in the box.
GRACE_S = 5.0
# The writable dirs of the sandbox layout, each a size-capped tmpfs volume. /logs/verifier rather
# than /logs: the engine does not copy image content into a volume with mount options, and the
# layout promises only /logs/verifier.
WRITABLE = (WORKSPACE, TESTS, SOLUTION, VERIFIER_LOGS, GRADING_KIT, "/tmp")
# Owner of the sealed dirs (base.SEALED) and of all that is put there: not the uid the
# sandbox's commands run as (the image's root, without capabilities, so without the power to
# override permissions, chown or chmod what it does not own), nor one they can become
# (no-new-privileges). Only the engine (uploads) and the host's own resets run as it.
SEALED_UID = 65534
# Kills every process in the container but docker-init and the sleeper (kill_strays.sh says how).
KILL_STRAYS_SH = data_text(__file__, "kill_strays.sh")
# Empties the dirs named as its arguments (taskenv.prepare_grading).
RESET_DIRS_SH = data_text(__file__, "reset_dirs.sh")


def _cap_to_hard(which: int, value: int) -> int:
    # Docker refuses a ulimit above the engine's own hard limit (it lacks CAP_SYS_RESOURCE there).
    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def tmpfs_mounts(disk_mb: int) -> list[Any]:
    """One anonymous tmpfs-backed volume per writable dir, each capped at `disk_mb`: open to all
    (1777), but the sealed ones, which belong to SEALED_UID and are read-only to others."""
    from docker.types import DriverConfig, Mount

    def opts(path: str) -> dict[str, str]:
        who = f"uid={SEALED_UID},gid={SEALED_UID},mode=0755" if path in SEALED else "mode=1777"
        return {"type": "tmpfs", "device": "tmpfs", "o": f"size={disk_mb}m,{who}"}

    return [
        Mount(
            target=path,
            source=None,
            type="volume",
            driver_config=DriverConfig("local", opts(path)),
        )
        for path in WRITABLE
    ]


def archive_target(remote_dir: str) -> tuple[str, str]:
    """(writable mount, path below it) for a sandbox directory; ValueError outside the writable
    layout, as on bubblewrap (the rest of the system is read-only)."""
    for mount in WRITABLE:
        if remote_dir == mount or remote_dir.startswith(mount + "/"):
            return mount, remote_dir[len(mount) :].lstrip("/")
    raise ValueError(
        f"docker sandbox path {remote_dir!r} is outside {', '.join(WRITABLE)}: "
        "the system is read-only; put files under /workspace or /tmp"
    )


def run_kwargs(limits: Limits, owner: dict[str, str]) -> dict[str, Any]:
    """containers.run() keyword arguments for a sandbox (pure: testable without an engine)."""
    from docker.types import Ulimit

    fsize = _cap_to_hard(resource.RLIMIT_FSIZE, limits.file_size_mb << 20)
    cpu = _cap_to_hard(resource.RLIMIT_CPU, limits.cpu_seconds)
    return {
        "command": ["sleep", "infinity"],
        "detach": True,
        "init": True,  # reaps orphans of finished execs, which a plain sleeper would not
        "network_mode": "none",
        "mem_limit": f"{limits.memory_mb}m",
        "memswap_limit": f"{limits.memory_mb}m",  # no swap on top of the memory limit
        "pids_limit": limits.pids,
        "nano_cpus": int(limits.cpus * 1e9),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": [
            Ulimit(name="fsize", soft=fsize, hard=fsize),
            Ulimit(name="cpu", soft=cpu, hard=cpu),
            Ulimit(name="core", soft=0, hard=0),
        ],
        "read_only": True,
        "mounts": tmpfs_mounts(limits.disk_mb),
        "working_dir": WORKSPACE,
        "hostname": "sandbox",
        "labels": {LABEL: "1", **owner},
    }


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self, cfg: SandboxConfig | None = None) -> None:
        self.cfg = cfg or SandboxConfig(backend="docker")
        self.limits = self.cfg.limits
        self.client: Any = None
        self.container: Any = None
        self.host = ""  # the engine's URL, once started
        self._pool: Any = None  # pool.DockerPool when the config names docker_hosts
        self._use: pool.Use | None = None

    def start(self) -> None:
        if self.container is not None:
            return
        import docker.errors

        if self.cfg.docker_hosts:
            self._pool = pool.pool_for(self.cfg)
            self.host = self._pool.acquire()
        else:
            self.host = pool.default_host()
        try:
            self.client = shared_client(self.host if self._pool else None)
            owner = owner_labels()
            kwargs = run_kwargs(self.limits, owner)
            name = container_name(owner, uuid.uuid4().hex[:8])
            if name is not None:
                kwargs["name"] = name
            try:
                self.container = self.client.containers.run(self.cfg.image, **kwargs)
            except docker.errors.ImageNotFound as exc:
                raise SandboxError(
                    f"image {self.cfg.image} is missing from the engine at {self.host}: run "
                    f"DOCKER_HOST={self.host} scripts/build-base-image.sh"
                ) from exc
            except engine_errors() as exc:
                # A container created but not started still holds our label: remove it now.
                self._remove_leftovers()
                raise SandboxError(
                    f"docker sandbox start on {self.host} failed ({self.cfg.image}): {exc}"
                ) from exc
        except SandboxError as exc:
            self._fault(exc)
            self._release()
            raise
        except BaseException:
            self._release()
            raise
        self._use = pool.note(self.host)

    def _fault(self, exc: BaseException) -> SandboxError:
        """Tell the pool (a host that stopped answering leaves it) and this item's host record;
        the SandboxError to raise, naming the host."""
        if self._use is not None:
            self._use.faulted = True
        if self._pool is not None:
            self._pool.fault(self.host, exc)
        if isinstance(exc, SandboxError):
            return exc
        return SandboxError(f"docker engine at {self.host}: {type(exc).__name__}: {exc}")

    def _release(self) -> None:
        if self._pool is not None and self.host:
            self._pool.release(self.host)
            self._pool = None

    def _remove_leftovers(self) -> None:
        with contextlib.suppress(Exception):
            pid = owner_labels()[LABEL_PID]
            for c in self.client.containers.list(
                all=True,
                filters={"label": [f"{LABEL}=1", f"{LABEL_PID}={pid}"], "status": "created"},
            ):
                c.remove(force=True, v=True)

    def stop(self) -> None:
        if self.container is None:
            return
        import docker.errors
        import requests.exceptions

        container, self.container = self.container, None
        try:
            with contextlib.suppress(docker.errors.NotFound):
                try:
                    container.remove(force=True, v=True)
                except docker.errors.APIError as exc:
                    # "removal already in progress" is fine; anything else is worth one retry.
                    if "in progress" not in str(exc):
                        time.sleep(0.2)
                        container.remove(force=True, v=True)
        except requests.exceptions.RequestException as exc:
            # The engine went away: nothing to stop there now (a stop must not hide the fault the
            # sandbox already raised). The pool removes the container if the host comes back.
            self._fault(exc)
            if self._pool is not None:
                self._pool.orphan(self.host, container.id)
        finally:
            self._release()

    def _require(self) -> Any:
        if self.container is None:
            raise SandboxError("docker sandbox is not started: call start() or use `with`")
        return self.container

    def exec(
        self,
        cmd: list[str] | str,
        timeout: float | None = None,
        cwd: str = WORKSPACE,
        env: dict[str, str] | None = None,
    ) -> ExecResult:

        container = self._require()
        wall = wall_timeout(timeout, self.limits)
        argv = ["timeout", "-s", "KILL", f"{wall:g}", *argv_for(cmd)]
        api = self.client.api
        start = time.monotonic()
        try:
            exec_id = api.exec_create(
                container.id, argv, workdir=cwd, environment=env_for(env), stdout=True, stderr=True
            )["Id"]
            stream = api.exec_start(exec_id, stream=True, demux=True)
        except engine_errors() as exc:
            raise self._fault(
                SandboxError(f"docker exec failed in {container.short_id} on {self.host}: {exc}")
            ) from exc
        out, err = CappedBuffer(), CappedBuffer()
        reader = threading.Thread(target=_drain, args=(stream, out, err), daemon=True)
        reader.start()
        reader.join(wall + GRACE_S)
        forced = reader.is_alive()
        if forced:
            # Something outlived `timeout` (e.g. it left the process group): kill all of it.
            with contextlib.suppress(SandboxError):
                self.kill_strays()
            reader.join(GRACE_S)
            if reader.is_alive():
                raise self._fault(
                    SandboxError(
                        f"docker exec in {container.short_id} on {self.host} did not end after a kill"
                    )
                )
        duration = time.monotonic() - start
        try:
            code = api.exec_inspect(exec_id).get("ExitCode")
        except engine_errors() as exc:
            raise self._fault(
                SandboxError(
                    f"docker exec_inspect failed in {container.short_id} on {self.host}: {exc}"
                )
            ) from exc
        # `timeout -s KILL` exits 137 when it fired; a command that exits 137 on its own (an OOM
        # kill) does so before the deadline.
        timed_out = forced or (code == TIMEOUT_EXIT and duration >= wall * 0.98)
        return ExecResult(
            exit_code=TIMEOUT_EXIT if timed_out else int(code if code is not None else -1),
            stdout=out.text(),
            stderr=err.text(),
            duration_s=duration,
            timed_out=timed_out,
        )

    def kill_strays(self) -> bool:
        """Kill all but init and the sleeper (KILL_STRAYS_SH), in an exec of its own: not under
        `timeout`, whose process the script would stop. Execs share the container, so a
        background process outlives the exec that started it until this runs."""
        import docker.errors

        container = self._require()
        try:
            res = container.exec_run(["sh", "-c", KILL_STRAYS_SH], stdout=True, stderr=True)
        except docker.errors.APIError as exc:
            # The engine answered but could not start the killer: if the container still runs,
            # its leftovers fill the process table (a hostile box, not an engine fault).
            if _is_running(container):
                return False
            raise self._fault(
                SandboxError(
                    f"docker sandbox {container.short_id} on {self.host} stopped before its "
                    f"strays were killed: {exc}"
                )
            ) from exc
        except Exception as exc:  # connection errors come from requests, not docker.errors
            raise self._fault(
                SandboxError(
                    f"killing leftover processes in {container.short_id} on {self.host} failed: {exc}"
                )
            ) from exc
        return res.exit_code == 0

    def upload(self, local: Path, remote: str) -> None:
        self._put(local, remote, sealed=False)

    def upload_sealed(self, local: Path, remote: str) -> bool:
        """Upload owned by SEALED_UID, read-only (0444/0555), under a sealed dir: the engine
        writes it; the sandbox's commands (root without capabilities) may only read it."""
        self._put(local, remote, sealed=True)
        return True

    def reset_dirs(self, remotes: list[str]) -> str:
        """Empty each dir of `remotes` in an exec (reset_dirs.sh) while no other runs (call
        after kill_strays): the sealed ones as their owner SEALED_UID, the rest as the sandbox's
        root. Returns "" when done, else why not."""
        for who in ("0:0", f"{SEALED_UID}:{SEALED_UID}"):
            dirs = [d for d in remotes if (d in SEALED) == (who != "0:0")]
            if not dirs:
                continue
            container = self._require()
            try:
                res = container.exec_run(
                    ["sh", "-c", RESET_DIRS_SH, "reset_dirs", *dirs],
                    user=who,
                    workdir="/",
                    environment=env_for(None),
                )
            except engine_errors() as exc:
                raise self._fault(
                    SandboxError(
                        f"resetting {', '.join(dirs)} in {container.short_id} failed: {exc}"
                    )
                ) from exc
            if res.exit_code != 0:
                out = (res.output or b"").decode(errors="replace").strip()
                return out[-300:] or f"exit {res.exit_code}"
        return ""

    def _put(self, local: Path, remote: str, sealed: bool) -> None:
        container = self._require()
        parent, name = split_remote(remote)
        local = Path(local)
        # Members carry their path below the writable mount and go to that mount (the read-only
        # root refuses archives): the engine creates missing parents, so no `mkdir -p` exec.
        mount, below = archive_target(posixpath.join(parent, name) if local.is_dir() else parent)
        if sealed and mount not in SEALED:
            raise ValueError(f"a sealed upload goes under {' or '.join(SEALED)}, not {remote!r}")
        if sealed:
            data = pack(local, name, prefix=below, uid=SEALED_UID, readonly=True)
        else:
            data = pack(local, name, prefix=below)
        try:
            ok = container.put_archive(mount, data)
        except engine_errors() as exc:
            raise self._fault(
                SandboxError(
                    f"docker upload to {remote} in {container.short_id} on {self.host} failed: {exc}"
                )
            ) from exc
        if not ok:
            raise SandboxError(f"docker upload to {remote} in {container.short_id} was refused")

    def download(self, remote: str, local: Path) -> None:
        import docker.errors

        container = self._require()
        split_remote(remote)
        try:
            chunks, _ = container.get_archive(remote)
            data = bytearray()
            for chunk in chunks:
                data += chunk
                if len(data) > MAX_DOWNLOAD_BYTES:
                    raise OSError(f"download of {remote} exceeds {MAX_DOWNLOAD_BYTES} bytes")
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(f"no such path in the docker sandbox: {remote}") from exc
        except engine_errors() as exc:
            raise self._fault(
                SandboxError(
                    f"docker download of {remote} from {container.short_id} on {self.host} "
                    f"failed: {exc}"
                )
            ) from exc
        unpack(bytes(data), Path(local))


def _is_running(container: Any) -> bool:
    try:
        container.reload()
    except Exception:
        return False
    return container.status == "running"


def _drain(stream: Any, out: CappedBuffer, err: CappedBuffer) -> None:
    with contextlib.suppress(Exception):  # a broken stream ends the exec; inspect reports it
        for stdout, stderr in stream:
            if stdout:
                out.write(stdout)
            if stderr:
                err.write(stderr)
