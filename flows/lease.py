"""One writer per run: a lease object in the run folder (`<root>/<run_id>/lease.json`).

A process that writes a run (`clawloop run`, `rerun`, the `loop` and `rerun-stage` deployments)
holds its lease: host, pid, the pid's kernel start time, when it took it and a heartbeat it
refreshes from a background thread. Taking and refreshing are compare-and-swap writes
(storage/fs.py: a conditional PUT on S3, a hard link and an flock'd rename on a local disk), so
of two processes that start together exactly one wins. The other is refused, with who holds the
run. A lease is free when its holder released it, when its pid is gone on this host, or when its
heartbeat is older than the timeout (another host's process cannot be checked: it is trusted
until then); a free lease whose holder did not release it is taken over with a warning.

The lease is re-entrant within a process (the CLI takes it, then the flow it calls takes it
again), and a holder that finds it was taken over stops at the next stage (`check`).

CLAWLOOP_LEASE_TIMEOUT_S sets the timeout (default 600 s); the heartbeat runs every tenth of it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from clawloop.flows.names import check_run_id
from clawloop.harness import owned
from clawloop.storage import fs
from clawloop.tasks.stage import StageError

LEASE_FILE = "lease.json"
DEFAULT_TIMEOUT_S = 600.0
log = logging.getLogger("clawloop.lease")


class LeaseHeld(StageError):
    """Another live process writes this run."""


class LeaseLost(StageError):
    """This process's lease was taken over: it must stop writing."""


def timeout_s() -> float:
    """Seconds without a heartbeat after which a lease counts as abandoned."""
    raw = os.environ.get("CLAWLOOP_LEASE_TIMEOUT_S", "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        value = DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a run's lease."""

    host: str
    pid: int
    start: str  # the pid's kernel start time (harness/owned.py): a reused pid is another process
    started_at: float
    heartbeat: float
    token: str  # this holding's identity: a heartbeat writes only over its own lease
    command: str = ""
    released: bool = False

    @classmethod
    def from_doc(cls, doc: Any) -> Holder:
        if not isinstance(doc, dict):
            raise ValueError(f"the top level is a {type(doc).__name__}, not an object")
        try:
            return cls(
                host=str(doc["host"]),
                pid=int(doc["pid"]),
                start=str(doc.get("start", "")),
                started_at=float(doc.get("started_at", 0.0)),
                heartbeat=float(doc["heartbeat"]),
                token=str(doc["token"]),
                command=str(doc.get("command", "")),
                released=bool(doc.get("released", False)),
            )
        except KeyError as exc:
            raise ValueError(f"it has no {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a field has the wrong type ({exc})") from None

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=2, sort_keys=True).encode()

    def describe(self) -> str:
        return f"{self.host}, pid {self.pid}"


def why_free(holder: Holder, now: float, timeout: float, host: str | None = None) -> str | None:
    """None while `holder` counts as live; else why its lease may be taken (pure but for the
    /proc look-up of a pid on this host)."""
    if holder.released:
        return "released"
    here = holder.host == (host or socket.gethostname())
    if here and owned.start_time(holder.pid) != holder.start:
        return f"its process (pid {holder.pid} on {holder.host}) is gone"
    age = now - holder.heartbeat
    if age > timeout:
        return f"its heartbeat is {age:.0f}s old (timeout {timeout:.0f}s)"
    return None


def lease_url(root: str, run_id: str) -> str:
    return fs.join(root, run_id, LEASE_FILE)


def read_holder(root: str, run_id: str) -> tuple[Holder | None, str | None]:
    """(holder, None), (None, None) when there is no lease, or (None, what is wrong with it)."""
    url = lease_url(root, run_id)
    found = fs.read_versioned(url)
    if found is None:
        return None, None
    try:
        return Holder.from_doc(json.loads(found[0])), None
    except ValueError as exc:
        return None, f"{url} is damaged: {exc}"


def live_holder(root: str, run_id: str) -> Holder | None:
    """The process writing the run right now, if one is."""
    holder, _ = read_holder(root, run_id)
    if holder is None or why_free(holder, time.time(), timeout_s()) is not None:
        return None
    return holder


def in_progress(root: str, run_id: str) -> str:
    """ "" when no live process holds the run's lease (or this process does); else a sentence
    saying who is writing the run, for figures read from it (they are partial)."""
    holder = live_holder(root, run_id)
    if holder is None or (root, run_id) in _HELD:
        return ""
    return (
        f"run {run_id} is still being written ({holder.describe()} holds its lease, "
        f"running `{holder.command or 'clawloop'}`): these figures are partial"
    )


class Lease:
    """This process's hold on one run (see the module docstring)."""

    def __init__(self, root: str, run_id: str, command: str = "") -> None:
        self.root, self.run_id, self.url = root, run_id, lease_url(root, run_id)
        pid = os.getpid()
        now = time.time()
        self.holder = Holder(
            host=socket.gethostname(),
            pid=pid,
            start=owned.start_time(pid) or "",
            started_at=now,
            heartbeat=now,
            token=uuid.uuid4().hex,
            command=command,
        )
        self.version: str | None = None
        self.lost: str | None = None
        self.depth = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- taking ---------------------------------------------------------------------------------
    def acquire(self) -> None:
        fs.makedirs(fs.join(self.root, self.run_id))
        for _ in range(20):  # each lap loses a race to another writer; a live holder ends it
            found = fs.read_versioned(self.url)
            if found is None:
                self.version = fs.create_exclusive(self.url, self.holder.to_bytes())
                if self.version is not None:
                    return self._started()
                continue
            data, version = found
            try:
                old = Holder.from_doc(json.loads(data))
                why = why_free(old, time.time(), timeout_s())
            except ValueError as exc:
                old, why = None, f"{self.url} is damaged ({exc})"
            if why is None and old is not None:
                raise LeaseHeld(
                    f"run {self.run_id} is being written by another process ({old.describe()}, "
                    f"since {_when(old.started_at)}, heartbeat {time.time() - old.heartbeat:.0f}s "
                    f"ago{f': {old.command}' if old.command else ''}): wait for it to finish or "
                    f"stop it; its lease ({self.url}) is taken over once its heartbeat is older "
                    f"than {timeout_s():.0f}s"
                )
            self.version = fs.replace_if(self.url, self.holder.to_bytes(), version)
            if self.version is None:
                continue
            if why != "released":
                who = old.describe() if old is not None else "an unreadable lease"
                log.warning("took over run %s from %s: %s", self.run_id, who, why)
            return self._started()
        raise LeaseHeld(f"run {self.run_id}: could not take {self.url} (other writers kept "
                        "changing it): try again")  # fmt: skip

    def _started(self) -> None:
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.run_id}", daemon=True)
        self._thread.start()

    # -- holding --------------------------------------------------------------------------------
    def _beat(self) -> None:
        interval = max(0.05, timeout_s() / 10)
        while not self._stop.wait(interval):
            try:
                self.heartbeat()
            except Exception as exc:  # storage hiccup: the next beat tries again
                log.warning("lease heartbeat of run %s failed: %s", self.run_id, exc)
            if self.lost:
                return

    def heartbeat(self) -> None:
        """Refresh the heartbeat; note `lost` when another process took the lease."""
        with self._lock:
            found = fs.read_versioned(self.url)
            mine = None
            if found is not None:
                try:
                    mine = Holder.from_doc(json.loads(found[0]))
                except ValueError:
                    mine = None
            if mine is None or mine.token != self.holder.token or mine.released:
                who = mine.describe() if mine is not None else "nobody"
                self.lost = f"run {self.run_id}'s lease ({self.url}) now belongs to {who}"
                log.error("%s: this process stops writing at the next stage", self.lost)
                return
            beat = Holder(**{**asdict(self.holder), "heartbeat": time.time()})
            version = fs.replace_if(self.url, beat.to_bytes(), found[1])
            if version is not None:
                self.holder, self.version = beat, version

    def check(self) -> None:
        """LeaseLost once another process took this run over."""
        if self.lost:
            raise LeaseLost(
                f"{self.lost}: this process stopped writing; see `clawloop runs --run-id "
                f"{self.run_id}`"
            )

    # -- letting go -----------------------------------------------------------------------------
    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self._lock:
            found = fs.read_versioned(self.url)
            if found is None or self.lost:
                return
            try:
                mine = Holder.from_doc(json.loads(found[0]))
            except ValueError:
                return
            if mine.token == self.holder.token:
                done = Holder(**{**asdict(self.holder), "heartbeat": time.time(), "released": True})
                fs.replace_if(self.url, done.to_bytes(), found[1])


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# (root, run id) -> this process's lease on it: taking it again nests.
_HELD: dict[tuple[str, str], Lease] = {}
_HELD_LOCK = threading.Lock()


def _key(root: str, run_id: str) -> tuple[str, str]:
    """One key per run folder however its root is spelt (`runs`, `./runs/`, an absolute path)."""
    if fs.is_local(root):
        return os.path.realpath(fs.local_path(root)), run_id
    return root.rstrip("/"), run_id


def held(root: str, run_id: str) -> Lease | None:
    return _HELD.get(_key(root, run_id))


@contextmanager
def hold(root: str, run_id: str, command: str = "") -> Iterator[Lease]:
    """Hold `run_id`'s lease for the block (LeaseHeld when another live process does)."""
    key = _key(root, check_run_id(run_id))
    with _HELD_LOCK:
        lease = _HELD.get(key)
        if lease is None:
            lease = Lease(root, run_id, command)
            lease.acquire()
            _HELD[key] = lease
        lease.depth += 1
    try:
        yield lease
    finally:
        with _HELD_LOCK:
            lease.depth -= 1
            if lease.depth == 0:
                _HELD.pop(key, None)
                lease.release()


def check(root: str, run_id: str) -> None:
    """LeaseLost when this process held `run_id` and another took it over."""
    lease = held(root, run_id)
    if lease is not None:
        lease.check()
