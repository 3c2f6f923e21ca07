"""Against a real `prefect server start`: deployments, the nightly schedule, and a finished run's
per-stage artifacts are visible through the server's REST API (what the UI reads)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.prefect]
ROOT = Path(__file__).resolve().parents[2]
GENERATOR = '''"""Count hives per apiary."""
GENERATOR = {"capability": "aggregation", "domain": "%s", "multihop": 0, "dirtiness": 0, "output_format": "json"}
import json, os, random

def build(seed):
    rng = random.Random(seed)
    hives = [{"apiary": rng.choice("ABCDE"), "hive": i} for i in range(30)]
    counts = {}
    for h in hives:
        counts[h["apiary"]] = counts.get(h["apiary"], 0) + 1
    return {"instruction": "Count hives per apiary in hives.json; write output/counts.json mapping apiary to count.",
            "files": {"hives.json": json.dumps(hives)},
            "answer": {"output/counts.json": counts},
            "contract": {"outputs": [{"path": "output/counts.json", "format": "json", "schema": {"type": "object"}}],
                         "tolerance": {"abs": 0, "rel": 0}, "decisions": ["Count every row"]}}

def solve(workspace):
    hives = json.load(open(os.path.join(workspace, "hives.json")))
    counts = {}
    for h in hives:
        counts[h["apiary"]] = counts.get(h["apiary"], 0) + 1
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    json.dump(counts, open(os.path.join(workspace, "output/counts.json"), "w"))
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(url)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for the sandboxes")
def test_deployments_schedule_and_run_artifacts_visible_through_the_api(tmp_path):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_URL": api,
        "PYTHONPATH": str(ROOT),
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=open(tmp_path / "server.log", "wb"),  # noqa: SIM115 - lives as long as the server
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    procs = [server]
    try:
        _wait(f"{api}/health", 120)
        gens = tmp_path / "gens"
        gens.mkdir()
        for dom in ("apiculture", "orchards"):
            (gens / f"{dom}.py").write_text(GENERATOR % dom)
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
            _stop(p)
