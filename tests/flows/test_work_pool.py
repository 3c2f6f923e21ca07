"""prefect.yaml's deployments on a process work pool with two workers, set up by
`scripts/work-pool.sh start` against a temporary Prefect server (free port, own PREFECT_HOME): the
nightly deployment has its cron schedule, and a `rerun-stage` run triggered through the Prefect API
runs on one of the workers, rewrites the stage's manifest and publishes its Prefect artifacts.
`scripts/work-pool.sh stop` (and, should it fail, the pids it recorded) ends every process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from doubles.hives import run_through_verify, write_hive_generators
from doubles.prefect_server import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "work-pool.sh"
RUN_ID = "pool-run"
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _kill_recorded(state_dir: Path) -> None:
    """Last resort if `stop` failed: the processes `start` recorded, by pid and start time."""
    from clawloop.flows.server import _alive, read_state

    state = read_state(state_dir)
    for entry in [*state.get("workers", []), *([state["server"]] if state.get("server") else [])]:
        if _alive(entry):
            os.killpg(int(entry["pid"]), signal.SIGKILL)


def _leads_session(pid: int) -> bool:
    try:
        return os.getsid(pid) == pid
    except ProcessLookupError:
        return False


def test_the_pull_step_works_in_clawloop_home_else_in_this_checkout(tmp_path):
    from clawloop.flows.server import CHECKOUT, checkout_directory

    assert CHECKOUT == ROOT and (CHECKOUT / "prefect.yaml").is_file()
    assert checkout_directory("") == {"directory": str(ROOT)}
    assert checkout_directory(str(tmp_path)) == {"directory": str(tmp_path.resolve())}
    with pytest.raises(FileNotFoundError, match="CLAWLOOP_HOME='/nonexistent/checkout'"):
        checkout_directory("/nonexistent/checkout")


def test_stop_ends_the_recorded_workers_and_their_flow_runs_but_not_a_reused_pid(tmp_path):
    from clawloop.flows.server import _alive, _descendants, _record, stop_pool

    # A "worker" whose child starts its own session, as Prefect's flow-run processes do.
    worker = subprocess.Popen(["bash", "-c", "setsid sleep 300 & wait"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        # Wait until the child has called setsid: before that it is still in the worker's process
        # group, and ending the worker's group ends it too (a loaded host made this a flake).
        def own_session() -> list[dict]:
            return [d for d in _descendants(worker.pid) if _leads_session(d["pid"])]

        below = wait_for("the worker's child in its own session", own_session, 10, pause=0.05)
        reused = {**_record(stranger.pid), "start": "0", "name": "old", "log": ""}
        state = {
            "pool": "p",
            "server": None,
            "workers": [_record(worker.pid, name="w1", log=""), reused],
        }
        (tmp_path / "state.json").write_text(json.dumps(state))
        assert stop_pool(tmp_path) == [
            f"worker w1 (pid {worker.pid})",
            f"flow-run process {below[0]['pid']}",
        ]
        assert not _alive(below[0]) and worker.wait(timeout=10) is not None
        assert stranger.poll() is None, "a pid whose start time differs is not ours to stop"
        assert not (tmp_path / "state.json").exists()
    finally:
        for p in (worker, stranger):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_start_on_a_running_pool_is_refused_and_leaves_that_pool_running(tmp_path, capsys):
    from clawloop.flows.server import _alive, _record, main

    worker = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        state = {"pool": "p", "server": None, "workers": [_record(worker.pid, name="w1", log="")]}
        (tmp_path / "state.json").write_text(json.dumps(state))
        assert main(["start", "--state", str(tmp_path)]) == 2
        assert "is still running" in capsys.readouterr().err
        assert (
            _alive(state["workers"][0])
            and json.loads((tmp_path / "state.json").read_text()) == state
        )
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.slow
@pytest.mark.prefect
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for the sandboxes")
def test_rerun_stage_triggered_through_the_api_runs_on_one_of_two_pool_workers(tmp_path):
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    state_dir = tmp_path / "state"
    runs_root = tmp_path / "runs"
    gens = write_hive_generators(tmp_path / "gens")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"iterations: 1\nstorage: {{root: {runs_root}}}\nsandbox: {{backend: bwrap}}\n"
        f"synthesize: {{builtin: false, generator_paths: [{gens}], n_train: 1, n_eval: 1, eval_fraction: 0.5}}\n"
    )
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_WORKER_HEARTBEAT_SECONDS": "5",  # so "still polling" is seen within seconds
        # the interpreter running these tests has clawloop and its dependencies; the script's
        # default, the checkout's .venv, is absent in a git worktree or a venv kept elsewhere
        "CLAWLOOP_PYTHON": sys.executable,
    }
    for var in ("PREFECT_API_URL", "CLAWLOOP_HOME"):
        env.pop(var, None)
    start_log = tmp_path / "start.log"
    argv = [str(SCRIPT), "start", "--workers", "2", "--config", str(config)]
    argv += ["--port", str(port), "--state", str(state_dir)]
    with open(start_log, "wb") as log:
        start = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        run_through_verify(config, RUN_ID)  # while the server, the pool and the workers come up
        assert start.wait(timeout=480) == 0, start_log.read_text()[-4000:]
        state = json.loads((state_dir / "state.json").read_text())
        assert state["api_url"] == api and state["server"], "start should have started a server"
        workers = {w["name"]: w for w in state["workers"]}
        assert set(workers) == {"clawloop-worker-1", "clawloop-worker-2"}

        deployments = {
            d["name"]: d
            for d in httpx.post(f"{api}/deployments/filter", json={}, timeout=30).json()
        }
        assert {"nightly", "rerun-stage", "loop"} <= set(deployments)
        assert {d["work_pool_name"] for d in deployments.values()} == {"clawloop-process"}
        nightly = deployments["nightly"]
        assert nightly["entrypoint"] == "clawloop.flows.pipeline.nightly_flow"
        schedules = httpx.get(f"{api}/deployments/{nightly['id']}/schedules", timeout=30).json()
        assert [
            (s["schedule"]["cron"], s["schedule"]["timezone"], s["active"]) for s in schedules
        ] == [("0 2 * * *", "UTC", True)]
        assert nightly["parameters"]["config_path"] == str(config)
        rerun = deployments["rerun-stage"]
        assert rerun["parameters"]["root"] == str(runs_root)
        # CLAWLOOP_HOME was unset when deploying: each worker's own is read at run time.
        step = {"clawloop.flows.server.checkout_directory": {"directory": "{{ $CLAWLOOP_HOME }}"}}
        assert all(d["pull_steps"] == [step] for d in deployments.values())

        manifest_path = runs_root / RUN_ID / "iter-1" / "verify" / "manifest.json"
        before = json.loads(manifest_path.read_text())
        from prefect.deployments import run_deployment
        from prefect.settings import PREFECT_API_URL, temporary_settings

        triggered_at = time.time()
        with temporary_settings({PREFECT_API_URL: api}):
            flow_run = run_deployment(
                "rerun-stage/rerun-stage",
                parameters={"run_id": RUN_ID, "iteration": 1, "stage": "verify"},
                timeout=0,
            )
        run_id = str(flow_run.id)

        def finished():
            fr = httpx.get(f"{api}/flow_runs/{run_id}", timeout=30).json()
            return fr if fr["state"]["type"] in TERMINAL else None

        fr = wait_for("the rerun-stage flow run finishing", finished, 420, pause=0.5)
        logs = {n: Path(w["log"]).read_text(errors="replace") for n, w in workers.items()}
        assert fr["state"]["type"] == "COMPLETED", (
            fr["state"],
            {n: t[-3000:] for n, t in logs.items()},
        )
        assert fr["work_pool_name"] == "clawloop-process" and fr["deployment_id"] == rerun["id"]

        # Which worker ran it: the worker's own event, read through the API, and its log.
        def submitted():
            body = {"filter": {"event": {"name": ["prefect.worker.submitted-flow-run"]}}}
            events = httpx.post(f"{api}/events/filter", json=body, timeout=30).json()["events"]
            return [
                e["resource"]["prefect.resource.name"]
                for e in events
                if any(
                    r["prefect.resource.id"] == f"prefect.flow-run.{run_id}" for r in e["related"]
                )
            ]

        by = wait_for("the worker's submitted-flow-run event", submitted, 60)
        assert len(by) == 1 and by[0] in workers, by
        ran_by = by[0]
        assert f"submitting flow run '{run_id}'" in logs[ran_by]
        other = next(n for n in workers if n != ran_by)
        assert run_id not in logs[other]

        # Both workers still run and still poll the pool (a heartbeat after the trigger).
        from clawloop.flows.server import _alive

        def both_polling():
            listed = httpx.post(
                f"{api}/work_pools/clawloop-process/workers/filter", json={}, timeout=30
            ).json()
            beats = {
                w["name"]: _ts(w["last_heartbeat_time"])
                for w in listed
                if w["status"] == "ONLINE" and w["last_heartbeat_time"]
            }
            return all(beats.get(n, 0) > triggered_at for n in workers)

        wait_for("both workers heartbeating after the trigger", both_polling, 90)
        assert all(_alive(w) for w in workers.values())

        # The stage ran again: a new manifest, its Parquet files readable under the storage root.
        after = json.loads(manifest_path.read_text())
        assert after["started_at"] > max(before["finished_at"], triggered_at - 1)
        assert after["run_id"] == RUN_ID and after["stage"] == "verify"
        import pyarrow.parquet as pq

        for entry in after["files"]:
            table = pq.read_table(manifest_path.parent / entry["name"])
            assert table.num_rows == entry["rows"]
        assert {e["name"] for e in after["files"]} == {"checks.parquet", "verdicts.parquet"}

        # The stage flow's artifacts (table + markdown), made by a subflow of this flow run.
        key = f"{RUN_ID}-iter-1-verify"
        arts = httpx.post(
            f"{api}/artifacts/filter", json={"artifacts": {"key": {"like_": key}}}, timeout=30
        ).json()
        by_key = {a["key"]: a for a in arts}
        assert by_key[key]["type"] == "table" and "verdicts.parquet" in str(by_key[key]["data"])
        summary = by_key[f"{key}-summary"]
        assert summary["type"] == "markdown" and "**ran**" in summary["data"]
        stage_run = httpx.get(f"{api}/flow_runs/{summary['flow_run_id']}", timeout=30).json()
        parent = httpx.get(f"{api}/task_runs/{stage_run['parent_task_run_id']}", timeout=30).json()
        assert parent["flow_run_id"] == run_id

        states = httpx.get(
            f"{api}/flow_run_states/", params={"flow_run_id": run_id}, timeout=30
        ).json()
        first = {}
        for s in states:
            first.setdefault(s["type"], _ts(s["timestamp"]))
        print(
            f"\nwork pool up in {state['timings_s']}; rerun-stage by {ran_by}: trigger -> "
            f"picked up (Pending) {first['PENDING'] - _ts(fr['created']):.1f}s, -> Running "
            f"{first['RUNNING'] - _ts(fr['created']):.1f}s, -> Completed "
            f"{first['COMPLETED'] - _ts(fr['created']):.1f}s"
        )
    finally:
        if start.poll() is None:
            start.kill()
            start.wait()
        stop = subprocess.run(
            [str(SCRIPT), "stop", "--state", str(state_dir)],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        _kill_recorded(state_dir)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert "stopped worker clawloop-worker-1" in stop.stdout
    assert "stopped Prefect server" in stop.stdout
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{api}/health", timeout=5)
