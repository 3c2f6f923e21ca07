"""The Docker host pool without engines: placement, eviction, the start check, what rows record,
the config that makes a pool, and a stage on a pool where no host answers.

The same with two real engines, one killed mid-stage: test_docker_pool_engines.py (slow)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from clawloop.harness.sandbox import pool
from clawloop.harness.sandbox.base import DockerHost, SandboxConfig, SandboxError
from clawloop.harness.sandbox.pool import DockerPool, Slot, choose, down_message, evict

A, B, C = "unix:///a.sock", "tcp://b:2375", "ssh://c"


def _slots(*spec: tuple[str, int, int]) -> list[Slot]:
    return [Slot(url, cap, used) for url, cap, used in spec]


def test_placement_takes_the_least_loaded_host_and_config_order_on_a_tie():
    assert choose(_slots((A, 2, 0), (B, 2, 0))) == 0
    assert choose(_slots((A, 2, 1), (B, 2, 0))) == 1
    # Load is relative to capacity: 2 of 8 is less loaded than 1 of 2.
    assert choose(_slots((A, 2, 1), (B, 8, 2))) == 1
    assert choose(_slots((A, 2, 2), (B, 1, 1))) is None  # every host full: wait


def test_placement_skips_hosts_out_of_the_pool():
    slots = _slots((A, 4, 0), (B, 4, 3))
    assert evict(slots, A, "connection refused") is True
    assert evict(slots, A, "again") is False  # already out: logged once
    assert choose(slots) == 1
    assert slots[0].down == "connection refused"
    assert evict(slots, B, "") is True
    assert choose(slots) is None and pool.all_down(slots)


def test_the_all_down_message_names_every_host_why_and_what_to_do():
    slots = _slots((A, 1, 0), (B, 1, 0))
    evict(slots, A, "connection refused")
    evict(slots, B, "timed out")
    msg = down_message(slots, "clawloop-base:latest")
    assert f"{A} (connection refused)" in msg and f"{B} (timed out)" in msg
    assert "scripts/start-dockerd.sh" in msg and "sandbox.backend: bwrap" in msg


class Engines:
    """Fake engines for DockerPool: which answer and which hold the image."""

    def __init__(self, *urls: str) -> None:
        self.up = set(urls)
        self.with_image = set(urls)
        self.pings: list[str] = []

    def probe(self, url: str) -> str | None:
        self.pings.append(url)
        return None if url in self.up else "connection refused"

    def inspect(self, url: str, image: str) -> str | None:
        if url not in self.up:
            return "down: connection refused"
        return None if url in self.with_image else f"no image: {image}"


def _pool(engines: Engines, *hosts: DockerHost) -> DockerPool:
    p = DockerPool(hosts, "img:1", probe=engines.probe, inspect=engines.inspect)
    p._sweep = lambda url: None  # no engine to sweep
    return p


def test_slots_fill_by_load_and_a_start_waits_for_a_free_one():
    engines = Engines(A, B)
    p = _pool(engines, DockerHost(A, 1), DockerHost(B, 2))
    assert [p.acquire(), p.acquire(), p.acquire()] == [A, B, B]
    got: list[str] = []
    waiting = threading.Thread(target=lambda: got.append(p.acquire()))
    waiting.start()
    assert not got  # all three slots are taken: the fourth start waits
    p.release(B)
    waiting.join()
    assert got == [B] and p.in_use(B) == 2


def test_a_fault_on_a_host_that_answers_keeps_it_in_the_pool():
    engines = Engines(A, B)
    p = _pool(engines, DockerHost(A, 1), DockerHost(B, 1))
    p.check()
    assert p.fault(A, "exec did not end after a kill") is False
    assert p.down() == {} and engines.pings == [A]


def test_a_host_that_stopped_answering_is_taken_out_with_a_line_naming_it(caplog):
    engines = Engines(A, B)
    p = _pool(engines, DockerHost(A, 2), DockerHost(B, 2))
    assert p.acquire() == A
    engines.up.discard(A)
    with caplog.at_level(logging.WARNING, logger="clawloop.sandbox.pool"):
        assert p.fault(A, "docker exec failed: Connection refused") is True
        assert p.fault(A, "a second sandbox there") is True  # already out: no second probe
    p.release(A)
    assert p.down() == {A: "connection refused"}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert f"sandbox host {A} stopped answering" in lines[0] and f"retried on {B}" in lines[0]
    assert [p.acquire(), p.acquire()] == [B, B]  # everything goes to the host left


def test_a_start_waiting_for_a_slot_fails_when_the_last_host_goes():
    engines = Engines(A)
    p = _pool(engines, DockerHost(A, 1))
    assert p.acquire() == A
    errors: list[BaseException] = []

    def start() -> None:
        try:
            p.acquire()
        except SandboxError as exc:
            errors.append(exc)

    waiting = threading.Thread(target=start)
    waiting.start()
    engines.up.clear()
    p.fault(A, "connection refused")
    waiting.join()
    assert len(errors) == 1 and A in str(errors[0]) and "scripts/start-dockerd.sh" in str(errors[0])


def test_the_start_check_leaves_out_a_dead_host_and_takes_it_back_once_it_answers(caplog):
    engines = Engines(A, B)
    engines.up.discard(B)
    p = _pool(engines, DockerHost(A, 1), DockerHost(B, 1))
    with caplog.at_level(logging.WARNING, logger="clawloop.sandbox.pool"):
        p.check()
    assert p.down() == {B: "connection refused"}
    assert any(f"sandbox host {B} does not answer" in r.getMessage() for r in caplog.records)
    engines.up.add(B)
    p.check()  # the next stage's start
    assert p.down() == {} and [p.acquire(), p.acquire()] == [A, B]


def test_the_start_check_refuses_a_host_without_the_image_naming_it_and_the_fix():
    engines = Engines(A, B)
    engines.with_image.discard(B)
    p = _pool(engines, DockerHost(A, 1), DockerHost(B, 1))
    with pytest.raises(SandboxError) as err:
        p.check()
    msg = str(err.value)
    assert B in msg and A not in msg and "img:1" in msg
    assert f"DOCKER_HOST={B} scripts/build-base-image.sh" in msg


def test_the_start_check_with_no_host_answering_names_them_all():
    engines = Engines()
    p = _pool(engines, DockerHost(A, 1), DockerHost(B, 1))
    with pytest.raises(SandboxError) as err:
        p.check()
    assert A in str(err.value) and B in str(err.value)
    with pytest.raises(SandboxError):
        p.acquire()


def test_a_row_names_the_hosts_whose_sandboxes_gave_the_result():
    with pool.hosts_used() as hosts:
        pool.note(B).faulted = True  # the first attempt's host died
        pool.note(A)
        pool.note(A)
    assert hosts.label() == A
    with pool.hosts_used() as hosts:
        pool.note(B).faulted = True
    assert hosts.label() == B  # every sandbox failed: where it failed
    pool.note(C)  # outside hosts_used: recorded nowhere
    assert hosts.label() == B


def test_a_bubblewrap_sandbox_is_recorded_as_bwrap():
    from clawloop.harness.sandbox.backend import open_sandbox

    with pool.hosts_used() as hosts:
        open_sandbox(SandboxConfig(backend="bwrap"))
    assert hosts.label() == "bwrap"


def _sandbox(data: dict) -> object:
    from clawloop.tasks.config import parse_config

    return parse_config({"sandbox": data}).sandbox


def test_docker_hosts_in_the_config_make_a_pool_config():
    s = _sandbox({"docker_hosts": [A, {"host": B, "capacity": 16}], "per_host": 3})
    box = s.to_sandbox_config()
    assert box.backend == "docker"  # auto with a pool is docker
    assert box.docker_hosts == (DockerHost(A, 3), DockerHost(B, 16))
    # Where the engines run decides no result: not in the stages' cache keys.
    assert s.cache_slice() == _sandbox({}).cache_slice()
    # One engine as before: no pool.
    assert _sandbox({"docker_host": A}).to_sandbox_config().docker_hosts == ()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"docker_host": A, "docker_hosts": [B]}, "not both"),
        ({"backend": "bwrap", "docker_hosts": [B]}, "needs sandbox.backend: docker"),
        ({"docker_hosts": [A, {"host": A, "capacity": 2}]}, "more than once"),
        ({"docker_hosts": [{"host": A, "capacity": 0}]}, "capacity"),
        ({"docker_hosts": [{"url": A}]}, "url"),
    ],
)
def test_a_bad_pool_config_is_refused_with_the_field(data, expected):
    from clawloop.tasks.config import ConfigError

    with pytest.raises(ConfigError, match=expected):
        _sandbox(data)


def test_a_stage_on_a_pool_where_no_host_answers_fails_naming_every_host(tmp_path: Path):
    pytest.importorskip("docker")
    from clawloop.flows import runs
    from clawloop.flows.pipeline import STAGES
    from clawloop.storage import fs
    from clawloop.storage.manifest import read_manifest
    from clawloop.tasks.config import parse_config
    from clawloop.tasks.mapping import thread_mapper

    dead = [f"unix://{tmp_path}/one.sock", f"unix://{tmp_path}/two.sock"]
    cfg = parse_config(
        {
            "iterations": 1,
            "storage": {"root": str(tmp_path / "runs")},
            "sandbox": {"docker_hosts": dead},
            "synthesize": {"n_train": 2, "n_eval": 1, "domain": {"share": 0}},
        }
    )
    stages = [s for s in STAGES if s.name in ("synthesize", "forge")]
    out = runs.run_loop(cfg, "r", stages, thread_mapper(False))
    assert {o.stage: o.status for o in out.outcomes} == {"synthesize": "ran", "forge": "failed"}
    error = out.outcomes[-1].error
    assert all(url in error for url in dead) and "scripts/start-dockerd.sh" in error
    assert "clawloop run --run-id r" in error
    assert read_manifest(fs.stage_url(str(tmp_path / "runs"), "r", 1, "forge")) is None


def test_every_host_gets_the_same_sandbox_limits(monkeypatch):
    pytest.importorskip("docker")
    from clawloop.harness.sandbox import docker as docker_mod
    from clawloop.harness.sandbox import docker_engine

    cfg = SandboxConfig(backend="docker", docker_hosts=(DockerHost(A, 1), DockerHost(B, 1)))
    seen: list[tuple[str, dict]] = []

    class Client:  # records what the container would be started with, and starts nothing
        def __init__(self, url: str) -> None:
            self.containers = self
            self.url = url

        def run(self, image: str, **kwargs: object) -> object:
            seen.append((self.url, kwargs))
            raise SandboxError("started nothing")

    p = _pool(Engines(A, B), *cfg.docker_hosts)
    monkeypatch.setitem(pool._pools, (cfg.docker_hosts, cfg.image), p)
    monkeypatch.setattr(docker_mod, "shared_client", lambda url=None: Client(url))
    for full in p.slots:  # one host full: the start goes to the other
        full.in_use = 1
        with pytest.raises(SandboxError, match="started nothing"):
            docker_mod.DockerSandbox(cfg).start()
        full.in_use = 0
    assert [url for url, _ in seen] == [B, A]
    assert (
        seen[0][1] == seen[1][1] == docker_mod.run_kwargs(cfg.limits, docker_engine.owner_labels())
    )
    assert p.in_use(A) == p.in_use(B) == 0  # a failed start gives its slot back
