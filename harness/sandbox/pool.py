"""A pool of Docker engines for sandboxes (`sandbox.docker_hosts`), and which host each item used.

    cfg = SandboxConfig(backend="docker", docker_hosts=(DockerHost("unix:///var/run/docker.sock", 4),
                                                         DockerHost("tcp://box2:2375", 8)))
    with open_sandbox(cfg) as sb: ...      # the container runs on a host with a free slot

Placement: each sandbox start takes a slot on the answering host with the lowest load (sandboxes
in use / capacity; config order on a tie) and gives it back when the sandbox stops; when every
answering host is full, the start waits for a slot. Capacity is counted per clawloop process (a
Dask or Ray worker process has its own counts).

Eviction: when a sandbox on a host fails (a `SandboxError`), the host is pinged; a host that does
not answer is taken out of the pool (one warning naming it) and the item's fault propagates as the
transient `SandboxError` it is, so the item's existing retry starts its next sandbox on another
host. A host taken out comes back only when the pool is checked again (`check()`, which every
sandboxed stage runs at its start). When no host is left, every start raises a SandboxError naming
each host and why it is out, so the stage fails instead of committing items as results.

Start check (`check()`): every host is pinged and must hold the image. A host that does not answer
is left out with a warning (the others run the stage); a host that answers without the image stops
the stage with the command that builds it there; none answering stops it too.

Rows say where their sandboxes ran: a stage's per-item task wraps its work in `hosts_used()`, every
sandbox start notes its host there (`note`), a sandbox whose host failed is marked so (`Use.faulted`),
and `Hosts.label()` is the column value (the hosts whose sandboxes produced the result).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .base import DockerHost, SandboxConfig, SandboxError
from .docker_engine import image_missing, ping, remove_containers, sweep_docker

if TYPE_CHECKING:  # imported where a stage writes its tables: a sandbox does not need it
    import pyarrow as pa

log = logging.getLogger("clawloop.sandbox.pool")

DEFAULT_HOST = "unix:///var/run/docker.sock"
# The row column naming where an item's sandboxes ran: a Docker engine URL, or "bwrap".
HOST_COLUMN = "sandbox_host"
FIX_HOST = (
    "start the engine there (scripts/start-dockerd.sh on that machine; a tcp:// engine also needs "
    "`--host tcp://0.0.0.0:2375`), or remove it from sandbox.docker_hosts"
)


def with_host_column(schema: pa.Schema) -> pa.Schema:
    """A stage table's schema plus the `sandbox_host` column (its rows come from sandboxes)."""
    import pyarrow as pa

    return (
        schema if HOST_COLUMN in schema.names else schema.append(pa.field(HOST_COLUMN, pa.string()))
    )


def default_host() -> str:
    """The engine a sandbox without a pool runs on: DOCKER_HOST, else the local socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


# ---- which hosts an item's sandboxes ran on -------------------------------------------------------


@dataclass
class Use:
    host: str
    faulted: bool = False


@dataclass
class Hosts:
    uses: list[Use] = field(default_factory=list)

    def label(self) -> str:
        """The hosts whose sandboxes gave the result (in order, each once); when every sandbox
        failed, the hosts they failed on; "" when none started."""
        good = [u.host for u in self.uses if not u.faulted] or [u.host for u in self.uses]
        return ",".join(dict.fromkeys(good))


_current: contextvars.ContextVar[Hosts | None] = contextvars.ContextVar(
    "clawloop_sandbox_hosts", default=None
)


@contextlib.contextmanager
def hosts_used() -> Iterator[Hosts]:
    """Collect the hosts of every sandbox started inside (this thread): `with hosts_used() as h:`
    ... `row[HOST_COLUMN] = h.label()`."""
    hosts = Hosts()
    token = _current.set(hosts)
    try:
        yield hosts
    finally:
        _current.reset(token)


def note(host: str) -> Use:
    """Record a sandbox started on `host` (kept only inside `hosts_used()`)."""
    use = Use(host)
    hosts = _current.get()
    if hosts is not None:
        hosts.uses.append(use)
    return use


# ---- placement and eviction (pure) ----------------------------------------------------------------


@dataclass
class Slot:
    """One host's state in a pool."""

    url: str
    capacity: int
    in_use: int = 0
    down: str = ""  # why it is out of the pool; "" while it is in

    @property
    def up(self) -> bool:
        return not self.down


def choose(slots: Sequence[Slot]) -> int | None:
    """The index of the host the next sandbox goes to: of the hosts in the pool with a free slot,
    the least loaded (in_use / capacity), the first in config order on a tie. None when every
    host in the pool is full (or none is in the pool: see `all_down`)."""
    free = [i for i, s in enumerate(slots) if s.up and s.in_use < s.capacity]
    if not free:
        return None
    return min(free, key=lambda i: (slots[i].in_use / slots[i].capacity, i))


def all_down(slots: Sequence[Slot]) -> bool:
    return not any(s.up for s in slots)


def evict(slots: Sequence[Slot], url: str, why: str) -> bool:
    """Take `url` out of the pool; True when it was in (the caller logs it once)."""
    for s in slots:
        if s.url == url and s.up:
            s.down = why or "does not answer"
            return True
    return False


def down_message(slots: Sequence[Slot], image: str) -> str:
    """The error when no host is left: every host, why it is out, and what to do."""
    each = "; ".join(f"{s.url} ({s.down or 'in the pool'})" for s in slots)
    return (
        f"no Docker host of sandbox.docker_hosts is usable: {each}. Start those engines "
        "(scripts/start-dockerd.sh on each machine; a tcp:// engine also needs "
        f"`--host tcp://0.0.0.0:2375`) with the image {image} "
        "(DOCKER_HOST=<host> scripts/build-base-image.sh), fix sandbox.docker_hosts, or set "
        "sandbox.backend: bwrap"
    )


class DockerPool:
    """The hosts of one `docker_hosts` list in this process: slots, evictions, the start check."""

    def __init__(
        self,
        hosts: Sequence[DockerHost],
        image: str = "clawloop-base:latest",
        probe: Callable[[str], str | None] = ping,
        inspect: Callable[[str, str], str | None] = image_missing,
    ) -> None:
        if not hosts:
            raise ValueError("a Docker pool needs at least one host")
        self.image = image
        self.slots = [Slot(h.url, h.capacity) for h in hosts]
        self._probe = probe
        self._inspect = inspect
        self._cond = threading.Condition()
        self._checked = False
        # Containers a dead host still holds (their stop could not reach it): removed when the
        # host is back in the pool.
        self.orphans: dict[str, list[str]] = {}

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.slots]

    def _slot(self, url: str) -> Slot:
        for s in self.slots:
            if s.url == url:
                return s
        raise KeyError(url)

    def check(self) -> None:
        """Ping every host and look for the image (in parallel): a host that answers with the
        image is (back) in the pool; one that does not answer is out, with a warning; one that
        answers without the image raises SandboxError saying how to build it there. SandboxError
        when no host is left."""
        with ThreadPoolExecutor(max_workers=min(16, len(self.slots))) as ex:
            found = list(ex.map(lambda u: self._inspect(u, self.image), self.urls))
        lacking = [
            u for u, why in zip(self.urls, found, strict=True) if why and why.startswith("no image")
        ]
        if lacking:
            raise SandboxError(
                f"sandbox host{'s' if len(lacking) > 1 else ''} {', '.join(lacking)} "
                f"answer{'' if len(lacking) > 1 else 's'} but lack{'' if len(lacking) > 1 else 's'} "
                f"the image {self.image}: build it there with "
                f"`DOCKER_HOST={lacking[0]} scripts/build-base-image.sh` (or copy it: "
                f"`docker save {self.image} | DOCKER_HOST={lacking[0]} docker load`), "
                "or remove the host from sandbox.docker_hosts"
            )
        back: list[str] = []
        with self._cond:
            for s, why in zip(self.slots, found, strict=True):
                if why is None:
                    if s.down:
                        back.append(s.url)
                    s.down = ""
                else:
                    s.down = why.removeprefix("down: ")
                    log.warning(
                        "sandbox host %s does not answer (%s): left out of the pool; %s",
                        s.url,
                        s.down,
                        FIX_HOST,
                    )
            self._checked = True
            self._cond.notify_all()
            if all_down(self.slots):
                raise SandboxError(down_message(self.slots, self.image))
        for url in back:
            log.info("sandbox host %s answers again: back in the pool", url)
        for url in [s.url for s in self.slots if s.up]:
            self._sweep(url)

    def _sweep(self, url: str) -> None:
        with self._cond:
            ids = self.orphans.pop(url, [])
        if ids:
            remove_containers(url, ids)
        sweep_docker(url)

    def acquire(self, timeout: float | None = None) -> str:
        """A slot on the host the next sandbox goes to (its URL); waits while all are full.
        SandboxError when no host is left in the pool (or no slot frees within `timeout`)."""
        if not self._checked:
            self.check()
        with self._cond:
            waited = 0.0
            while True:
                if all_down(self.slots):
                    raise SandboxError(down_message(self.slots, self.image))
                i = choose(self.slots)
                if i is not None:
                    self.slots[i].in_use += 1
                    return self.slots[i].url
                if timeout is not None and waited >= timeout:
                    raise SandboxError(
                        f"no free sandbox slot on {', '.join(self.urls)} within {timeout:g}s"
                    )
                self._cond.wait(1.0)  # woken by release/eviction; the timeout re-reads the state
                waited += 1.0

    def release(self, url: str) -> None:
        with self._cond:
            s = self._slot(url)
            s.in_use = max(0, s.in_use - 1)
            self._cond.notify_all()

    def fault(self, url: str, exc: BaseException | str) -> bool:
        """A sandbox on `url` failed: take the host out of the pool when it no longer answers.
        True when it is out (now or before)."""
        with self._cond:
            if self._slot(url).down:
                return True
        why = self._probe(url)
        if why is None:
            return False  # the engine answers: the fault was this sandbox's, not the host's
        with self._cond:
            newly = evict(self.slots, url, why)
            left = [s.url for s in self.slots if s.up]
            self._cond.notify_all()
        if newly:
            log.warning(
                "sandbox host %s stopped answering (%s; the failed sandbox: %s): taken out of "
                "the pool; its items are retried on %s",
                url,
                why,
                str(exc)[:200],
                ", ".join(left) if left else "no other host (none is left: the stage fails)",
            )
        return True

    def orphan(self, url: str, container_id: str) -> None:
        with self._cond:
            self.orphans.setdefault(url, []).append(container_id)

    def in_use(self, url: str) -> int:
        with self._cond:
            return self._slot(url).in_use

    def down(self) -> dict[str, str]:
        """The hosts out of the pool and why."""
        with self._cond:
            return {s.url: s.down for s in self.slots if s.down}


_pools: dict[tuple[tuple[DockerHost, ...], str], DockerPool] = {}
_pools_lock = threading.Lock()


def pool_for(cfg: SandboxConfig) -> DockerPool:
    """This process's pool for `cfg.docker_hosts` (made once per host list and image)."""
    key = (cfg.docker_hosts, cfg.image)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = DockerPool(cfg.docker_hosts, cfg.image)
        return pool
