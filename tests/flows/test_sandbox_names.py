"""Docker sandboxes of a run are named `clawloop-<run id>-<stage>-<8 hex>` and labelled with the
run id and stage (harness/sandbox/docker.py, from what flows/runs.stage_owner sets), and
`clawloop sweep` removes those a dead run left while a live run's stay."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from clawloop.flows import runs
from clawloop.flows.cli import main
from clawloop.harness.sandbox import docker as docker_mod
from clawloop.harness.sandbox import docker_engine


def test_a_run_stage_names_and_labels_its_sandboxes(monkeypatch):
    monkeypatch.delenv(docker_engine.ENV_RUN, raising=False)
    outside = docker_engine.owner_labels()
    assert docker_engine.LABEL_RUN not in outside
    assert docker_engine.container_name(outside, "abcd1234") is None  # the engine names it
    with runs.stage_owner("run-7", "verify"):
        labels = docker_engine.owner_labels()
    assert (
        labels[docker_engine.LABEL_RUN] == "run-7" and labels[docker_engine.LABEL_STAGE] == "verify"
    )
    assert docker_engine.container_name(labels, "abcd1234") == "clawloop-run-7-verify-abcd1234"
    assert docker_engine.ENV_RUN not in os.environ, "stage_owner left its variables behind"


def _engine() -> bool:
    try:
        docker_engine.client(timeout=10).close()
    except Exception:
        return False
    return True


LEAVE_ONE = textwrap.dedent(
    """
    import os, signal
    from clawloop.flows import runs
    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.harness.sandbox.docker import DockerSandbox

    with runs.stage_owner("dead-run", "verify"):
        sb = DockerSandbox(SandboxConfig(backend="docker"))
        sb.start()
        print(sb.container.name, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # as a kill -9 would: nothing cleaned up
    """
)


@pytest.mark.slow
def test_sweep_removes_a_dead_runs_sandboxes_and_keeps_a_live_ones(tmp_path, capsys):
    pytest.importorskip("docker")
    if not _engine():
        pytest.skip("no Docker engine")
    from clawloop.harness.sandbox.base import SandboxConfig

    script = tmp_path / "leave_one.py"
    script.write_text(LEAVE_ONE)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    name = done.stdout.strip()
    assert re.fullmatch(r"clawloop-dead-run-verify-[0-9a-f]{8}", name), done.stderr
    cli = docker_engine.client()
    try:
        left = cli.containers.get(name)
        assert left.labels[docker_engine.LABEL_RUN] == "dead-run"
        with runs.stage_owner("live-run", "rollout"):
            live = docker_mod.DockerSandbox(SandboxConfig(backend="docker"))
            live.start()
        try:
            assert live.container.name.startswith("clawloop-live-run-rollout-")
            assert main(["sweep"]) == 0
            out = capsys.readouterr().out
            assert f"removed docker {name}" in out
            names = {c.name for c in cli.containers.list(all=True)}
            assert name not in names and live.container.name in names
        finally:
            live.stop()
    finally:
        cli.close()
