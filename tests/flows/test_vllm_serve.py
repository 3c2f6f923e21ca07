"""`clawloop serve` with `llm.server: vllm`: a `rerun-stage` flow run of the rollout stage,
triggered through the Prefect API as a user (or the UI) triggers it, runs in the flow-run process
`clawloop serve` spawns, starts its own managed vLLM on the tiny model, rolls out on it (ids and
logprobs on every turn), and stops that vLLM when the flow run ends: no vLLM process is left, and
the run's vllm.log says clawloop stopped it (not the guard that catches a dead owner).

One Prefect server (started here, as `clawloop serve` uses PREFECT_API_URL's when it answers), one
`clawloop serve`, one vLLM start, one rollout of 2 episodes: a few minutes on 2 cores."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from doubles.hives import run_through_verify, write_hive_generators
from doubles.prefect_server import (
    free_port,
    healthy,
    start_prefect_server,
    stop_group,
    wait_for,
)

from clawloop.harness.owned import proc_stat
from clawloop.storage import artifacts

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.prefect,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for the sandboxes"),
]
RUN_ID = "serve-vllm"
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _vllm_processes(port: int) -> list[str]:
    """Live processes whose command line is a vLLM server on `port` (the guard's included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        stat = proc_stat(int(entry.name))
        words = [a.decode(errors="replace") for a in argv]
        if (
            stat is not None
            and stat.state != "Z"
            and "vllm.entrypoints.openai.api_server" in words
            and str(port) in words
        ):
            found.append(f"{entry.name}: {' '.join(words)[:200]}")
    return found


def test_a_rollout_triggered_through_clawloop_serve_owns_and_stops_its_vllm(tmp_path):
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    runs_root = tmp_path / "runs"
    gens = write_hive_generators(tmp_path / "gens", rows=12)
    config = tmp_path / "run.yaml"
    config.write_text(
        f"iterations: 1\nstorage: {{root: {runs_root}}}\nsandbox: {{backend: bwrap}}\n"
        f"synthesize: {{builtin: false, generator_paths: [{gens}], n_train: 1, n_eval: 1, "
        "eval_fraction: 0.5}\n"
        "llm: {server: vllm, token_ids: 'on', request_timeout_s: 300}\n"
        "rollout: {n: 2, max_turns: 2, max_tokens: 32, tool_choice: auto, workers: 2}\n"
        "prefect: {nightly_cron: '30 3 1 1 *'}\n"
    )
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_URL": api,
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",  # serve picks the triggered run up within seconds
    }
    env.pop("CLAWLOOP_HOME", None)
    procs: list[subprocess.Popen] = []
    try:
        procs.append(start_prefect_server(port, env, tmp_path / "prefect.log"))
        run_through_verify(config, RUN_ID)  # while the Prefect server comes up
        wait_for("the Prefect server", lambda: healthy(api), 180)
        serve_log = tmp_path / "serve.log"
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "clawloop.flows.cli", "serve", "--config", str(config)]
                + ["--root", str(runs_root)],
                env=env,
                cwd=tmp_path,
                stdout=open(serve_log, "wb"),  # noqa: SIM115 - lives as long as serve
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

        def deployed():
            found = httpx.post(f"{api}/deployments/filter", json={}, timeout=10).json()
            return {d["name"] for d in found} >= {"rerun-stage", "nightly", "loop"}

        wait_for("clawloop serve's deployments", deployed, 180)
        from prefect.deployments import run_deployment
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: api}):
            flow_run = run_deployment(
                "rerun-stage/rerun-stage",
                parameters={"run_id": RUN_ID, "iteration": 1, "stage": "rollout"},
                timeout=0,
            )

        def finished():
            fr = httpx.get(f"{api}/flow_runs/{flow_run.id}", timeout=10).json()
            return fr if fr["state"]["type"] in TERMINAL else None

        fr = wait_for("the rerun-stage flow run", finished, 1200, pause=2)
        vllm_log = runs_root / RUN_ID / "vllm.log"
        log_text = vllm_log.read_text(errors="replace") if vllm_log.exists() else "(no vllm.log)"
        assert fr["state"]["type"] == "COMPLETED", (
            fr["state"],
            serve_log.read_text(errors="replace")[-3000:],
            log_text[-3000:],
        )

        # the rollout ran on the managed vLLM: token in, token out, on every turn
        traj = artifacts.read_table(str(runs_root / RUN_ID / "iter-1" / "rollout"), "trajectories")
        turns = [t for r in traj["turns_json"] for t in json.loads(r)]
        assert len(traj) == 2 and turns
        for t in turns:
            assert t["prompt_token_ids"] and t["completion_token_ids"]
            assert len(t["logprobs"]) == len(t["completion_token_ids"])

        # owned and stopped: one start, one stop by clawloop, nothing left on its port
        assert log_text.count("== clawloop starts vLLM") == 1, log_text[-2000:]
        assert log_text.count("== clawloop stopped vLLM") == 1, log_text[-2000:]
        assert "clawloop guard: owner" not in log_text  # not left for the guard to catch
        vllm_port = int(re.search(r"--port (\d+)", log_text).group(1))
        deadline = time.monotonic() + 30
        while _vllm_processes(vllm_port) and time.monotonic() < deadline:
            time.sleep(1)
        assert _vllm_processes(vllm_port) == []
        assert procs[1].poll() is None, "clawloop serve keeps serving after the flow run"
    finally:
        if len(procs) > 1:
            stop_group(procs[1], signal.SIGINT)  # Ctrl-C, as a user stops `clawloop serve`
        for p in procs:
            stop_group(p)
