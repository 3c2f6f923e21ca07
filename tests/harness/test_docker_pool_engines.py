"""A sandbox.docker_hosts pool over two real Docker engines on this machine: the main one and a
second started for these tests (scripts/extra-dockerd.sh: its own socket, data and exec roots, no
bridge). A host without the base image is refused by name; then forge and verify run a few
built-in tasks across both, the second engine is killed in the middle of forge (inside a sandbox
exec on it), and nothing is lost: every item has its row, the killed host's items ran again on
the main one, rows name their host, no item failed because of the dead host; verify and a
rollout (a fake policy over HTTP) then run on the host left.

Needs root, dockerd and the main engine with clawloop-base:latest (scripts/setup-system.sh);
`make test-slow` runs it."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.harness.sandbox import pool
from clawloop.harness.sandbox.base import DockerHost, SandboxConfig, SandboxError

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "extra-dockerd.sh"
MAIN = os.environ.get("DOCKER_HOST") or pool.DEFAULT_HOST
KILL_AT_EXEC = 6  # the second engine dies inside its 6th sandbox exec (a few items done there)


class Engine:
    """The second engine: started and stopped through scripts/extra-dockerd.sh."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"unix://{root}/docker.sock"

    def script(self, *args: str) -> str:
        res = subprocess.run(
            ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300
        )
        assert res.returncode == 0, f"extra-dockerd.sh {' '.join(args)}: {res.stderr}"
        return res.stdout

    def kill(self) -> None:
        """SIGKILL its dockerd, as a crashed host, and wait until the process is gone."""
        pid = int((self.root / "dockerd.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.05)
        raise AssertionError(f"dockerd {pid} outlived SIGKILL")


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    pytest.importorskip("docker")
    from clawloop.harness.sandbox.backend import docker_available

    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("needs root and dockerd to start a second engine")
    why = docker_available()
    if why is not None:
        pytest.skip(f"needs the main engine with the base image: {why}")
    # Short: unix socket paths are capped at 108 bytes and containerd's lives below it.
    root = Path(tempfile.mkdtemp(prefix="cl-pool-", dir="/tmp"))
    eng = Engine(root)
    try:
        eng.script("start", str(root))
        yield eng
    finally:
        eng.script("stop", str(root))
        shutil.rmtree(root, ignore_errors=True)


def test_a_host_without_the_base_image_is_refused_by_name(engine: Engine):
    from clawloop.harness.sandbox.backend import check_backend

    cfg = SandboxConfig(
        backend="docker", docker_hosts=(DockerHost(MAIN, 2), DockerHost(engine.url, 2))
    )
    with pytest.raises(SandboxError) as err:
        check_backend(cfg)
    msg = str(err.value)
    assert engine.url in msg and f"DOCKER_HOST={engine.url} scripts/build-base-image.sh" in msg
    assert f"{MAIN} " not in msg  # the main engine has it


def test_a_stage_loses_nothing_when_a_pool_host_dies_mid_stage(
    engine: Engine, tmp_path: Path, monkeypatch
):
    from clawloop.flows import runs
    from clawloop.flows.pipeline import STAGES
    from clawloop.harness.sandbox.docker import DockerSandbox
    from clawloop.harness.serve import free_port
    from clawloop.storage import artifacts, fs
    from clawloop.tasks.config import parse_config
    from clawloop.tasks.mapping import thread_mapper

    engine.script("start", str(engine.root), "--with-image")  # docker save | docker load
    second = engine.url
    port = free_port()
    fake = FakeOpenAI("chatty", model="fake-policy", port=port)  # answers, never solves
    cfg = parse_config(
        {
            "iterations": 1,
            "storage": {"root": str(tmp_path)},
            "sandbox": {"docker_hosts": [MAIN, second], "per_host": 2},
            "synthesize": {"n_train": 8, "n_eval": 2, "domain": {"share": 0}},
            "forge": {"workers": 4},
            "verify": {"workers": 4},
            "llm": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "fake-policy"},
            "rollout": {"n": 1, "band": [0, 1], "max_turns": 2, "workers": 4},
            "train": {"phases": "sft"},  # groups of one: GRPO is refused at load
        }
    )
    execs_on_second = 0
    lock = threading.Lock()
    real_exec = DockerSandbox.exec

    def exec_that_kills_the_second_host(self, *args, **kwargs):
        nonlocal execs_on_second
        if self.host == second:
            with lock:
                execs_on_second += 1
                if execs_on_second == KILL_AT_EXEC:
                    engine.kill()  # this exec, and every other sandbox there, now fails
        return real_exec(self, *args, **kwargs)

    monkeypatch.setattr(DockerSandbox, "exec", exec_that_kills_the_second_host)
    stages = [s for s in STAGES if s.name in ("synthesize", "forge", "verify", "rollout")]
    seen = Records()
    pool.log.addHandler(seen)  # the run's own logging setup may stop propagation to the root
    try:
        with fake:
            out = runs.run_loop(cfg, "pool", stages, thread_mapper(False))
    finally:
        pool.log.removeHandler(seen)
    assert out.ok, [o.error for o in out.outcomes if o.error]
    assert execs_on_second >= KILL_AT_EXEC  # the kill happened, inside forge

    def rows(stage: str, table: str) -> list[dict]:
        return artifacts.read_rows(fs.stage_url(str(tmp_path), "pool", 1, stage), table)

    candidates, forged = rows("synthesize", "candidates"), rows("forge", "tasks")
    verdicts = rows("verify", "verdicts")
    # Nothing lost: a forge row per candidate, a verdict per forged task.
    assert sorted(r["task_id"] for r in forged) == sorted(r["task_id"] for r in candidates)
    assert sorted(v["task_id"] for v in verdicts) == sorted(r["task_id"] for r in forged)
    # No item is a failure because of the dead host: every built-in task forges and is kept.
    assert [(r["task_id"], r["error"]) for r in forged if r["status"] != "ok"] == []
    assert [(v["task_id"], v["reason"]) for v in verdicts if not v["kept"]] == []
    # Rows name their host: forge items ran on both until the kill; the items that were on the
    # killed host ran again (attempts > 1) on the main one; verify ran after the kill, on main.
    hosts = {r["sandbox_host"] for r in forged}
    assert hosts == {MAIN, second}, hosts
    moved = [r for r in forged if r["attempts"] > 1]
    assert moved and all(r["sandbox_host"] == MAIN for r in moved)
    assert {v["sandbox_host"] for v in verdicts} == {MAIN}
    episodes = rows("rollout", "trajectories")
    assert len(episodes) == sum(v["split"] == "train" for v in verdicts)
    assert {e["sandbox_host"] for e in episodes} == {MAIN}
    assert [e["end_reason"] for e in episodes if e["end_reason"] != "max_turns"] == []
    # The host was taken out with a line naming it (once), and left out at verify's start.
    assert pool.pool_for(cfg.sandbox.to_sandbox_config()).down().keys() == {second}
    lines = [r.getMessage() for r in seen.records]
    assert sum(f"sandbox host {second} stopped answering" in line for line in lines) == 1
    assert any(f"sandbox host {second} does not answer" in line for line in lines)
