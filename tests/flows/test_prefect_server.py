"""Against a real `prefect server start`: deployments, the nightly schedule, and a finished run's
per-stage artifacts are visible through the server's REST API (what the UI reads)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from doubles.hives import write_hive_generators
from doubles.prefect_server import free_port, healthy, start_prefect_server, stop_group, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.prefect]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for the sandboxes")
def test_deployments_schedule_and_run_artifacts_visible_through_the_api(tmp_path):
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_URL": api,
        "PYTHONPATH": str(ROOT),
    }
    server = start_prefect_server(port, env, tmp_path / "server.log")
    procs = [server]
    try:
        wait_for("the Prefect server", lambda: healthy(api), 120, pause=0.5)
        gens = write_hive_generators(tmp_path / "gens", ("apiculture", "orchards"))
        cfg = tmp_path / "run.yaml"
        cfg.write_text(
            f"storage: {{root: {tmp_path / 'runs'}}}\nsandbox: {{backend: bwrap}}\n"
            f"synthesize: {{builtin: false, generator_paths: [{gens}], n_train: 2, n_eval: 1, eval_fraction: 0.5}}\n"
            "prefect: {nightly_cron: '30 3 * * *'}\n"
        )
        serve = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "clawloop.flows.cli",
                "serve",
                "--config",
                str(cfg),
                "--root",
                str(tmp_path / "runs"),
            ],
            env=env,
            cwd=ROOT,
            stdout=open(tmp_path / "serve.log", "wb"),  # noqa: SIM115 - lives as long as serve
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(serve)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "clawloop.flows.cli",
                "run",
                "--config",
                str(cfg),
                "--run-id",
                "api-run",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

        deadline = time.monotonic() + 120
        names: dict[str, dict] = {}
        while time.monotonic() < deadline and not {"nightly", "rerun-stage"} <= set(names):
            names = {
                d["name"]: d
                for d in httpx.post(f"{api}/deployments/filter", json={}, timeout=10).json()
            }
            time.sleep(1)
        assert {"nightly", "rerun-stage", "loop"} <= set(names), (
            tmp_path / "serve.log"
        ).read_text()[-3000:]
        schedules = httpx.get(
            f"{api}/deployments/{names['nightly']['id']}/schedules", timeout=10
        ).json()
        assert any(s["schedule"].get("cron") == "30 3 * * *" and s["active"] for s in schedules)

        arts = httpx.post(
            f"{api}/artifacts/filter", json={"artifacts": {"key": {"like_": "api-run"}}}, timeout=10
        ).json()
        keys = {a["key"] for a in arts}
        for stage in ("synthesize", "forge", "verify"):
            assert f"api-run-iter-1-{stage}" in keys and f"api-run-iter-1-{stage}-summary" in keys
        table = next(a for a in arts if a["key"] == "api-run-iter-1-forge")
        assert "tasks.parquet" in str(table["data"])
        flows = {f["name"] for f in httpx.post(f"{api}/flows/filter", json={}, timeout=10).json()}
        assert {"loop", "iteration", "synthesize", "forge", "verify"} <= flows
    finally:
        for p in reversed(procs):
            stop_group(p)
