"""One writer per run (flows/lease.py): two real processes on one run id, stale leases taken
over, `rerun` refused while another process holds the run, `clawloop runs` naming the holder,
and the compare-and-swap the lease stands on, on a local disk and on S3 (moto)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from clawloop.flows import lease, runs
from clawloop.storage import fs
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageResult, StageSpec

SCHEMA = pa.schema([("n", pa.int64())])

# A two-stage pipeline whose first stage notes that it started, then waits for a `go` file: the
# test decides when the holder finishes, so nothing here depends on how fast the machine is.
DRIVER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    import pyarrow as pa
    from clawloop.flows import lease, runs
    from clawloop.tasks.config import parse_config
    from clawloop.tasks.mapping import thread_mapper
    from clawloop.tasks.stage import StageResult, StageSpec

    root, run_id, signals = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    SCHEMA = pa.schema([("n", pa.int64())])

    def first(ctx):
        with open(signals / "ran.log", "a") as f:
            f.write(f"{os.getpid()} first\\n")
        (signals / f"started-{os.getpid()}").touch()
        deadline = time.monotonic() + 120  # a safety net only: the test writes `go`
        while not (signals / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return StageResult({"t": (SCHEMA, [{"n": 1}])})

    def second(ctx):
        with open(signals / "ran.log", "a") as f:
            f.write(f"{os.getpid()} second\\n")
        return StageResult({"t": (SCHEMA, ctx.rows("first", "t"))})

    stages = [
        StageSpec("first", first, lambda c, k: {}),
        StageSpec("second", second, lambda c, k: {}, upstream=("first",)),
    ]
    cfg = parse_config({"iterations": 1, "storage": {"root": root}})
    try:
        summary = runs.run_loop(cfg, run_id, stages, thread_mapper())
    except lease.LeaseHeld as exc:
        print(f"clawloop: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps([o.status for o in summary.outcomes]))
    sys.exit(0 if summary.ok else 1)
    """
)


def _start(tmp_path: Path, run_id: str = "same") -> subprocess.Popen[str]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(os.environ)  # `clawloop` resolves in the child as it does here
    argv = [sys.executable, str(script), str(tmp_path / "runs"), run_id, str(tmp_path)]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(pred, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _started(tmp_path: Path) -> list[int]:
    return [int(p.name.split("-")[1]) for p in tmp_path.glob("started-*")]


@pytest.mark.slow  # two interpreters importing the pipeline: tens of seconds on a loaded box
def test_two_processes_started_together_one_writes_the_other_is_refused(tmp_path):
    a, b = _start(tmp_path), _start(tmp_path)
    # Exactly one gets the lease and waits in its first stage; the other is refused at once.
    _wait_for(lambda: a.poll() is not None or b.poll() is not None, "the refused writer")
    loser, winner = (a, b) if a.poll() is not None else (b, a)
    out, err = loser.communicate()
    assert loser.returncode == 2, err
    assert f"is being written by another process ({socket.gethostname()}, pid {winner.pid}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    _wait_for(lambda: _started(tmp_path), "the writer's first stage")
    assert _started(tmp_path) == [winner.pid]
    # `clawloop runs` names the holder while it writes.
    cfg_root = str(tmp_path / "runs")
    info = runs.list_runs(cfg_root, [StageSpec("first", None, None)], "same")[0]
    assert info.status == f"running ({socket.gethostname()}, pid {winner.pid})"
    (tmp_path / "go").touch()
    out, err = winner.communicate(timeout=120)
    assert winner.returncode == 0, err
    assert json.loads(out) == ["ran", "ran"]
    ran = (tmp_path / "ran.log").read_text().split()
    assert set(ran[0::2]) == {str(winner.pid)}, "the refused process wrote stages"
    # Released: the next writer takes it and finds everything done.
    again = _start(tmp_path)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(out) == ["skipped", "skipped"]
    holder, _ = lease.read_holder(cfg_root, "same")
    assert holder is not None and holder.released


@pytest.mark.slow
def test_a_second_writer_started_later_is_refused_and_writes_nothing(tmp_path):
    a = _start(tmp_path)
    _wait_for(lambda: _started(tmp_path), "the first writer's stage")
    run_json = tmp_path / "runs" / "same" / runs.RUN_FILE
    before = run_json.read_bytes()
    b = _start(tmp_path)
    out, err = b.communicate(timeout=120)
    assert b.returncode == 2 and f"pid {a.pid}" in err
    assert run_json.read_bytes() == before, "the refused writer rewrote run.json"
    (tmp_path / "go").touch()
    assert a.wait(timeout=120) == 0


def _stages(calls: list[str]) -> list[StageSpec]:
    def first(ctx):
        calls.append("first")
        return StageResult({"t": (SCHEMA, [{"n": 1}])})

    return [StageSpec("first", first, lambda c, k: {})]


def _write_lease(root: Path, run_id: str, **fields) -> None:
    now = time.time()
    doc = {
        "host": "other-host",
        "pid": 4242,
        "start": "1",
        "started_at": now,
        "heartbeat": now,
        "token": "someone-else",
        "command": "clawloop run",
    } | fields
    (root / run_id).mkdir(parents=True, exist_ok=True)
    (root / run_id / lease.LEASE_FILE).write_text(json.dumps(doc))


def test_a_live_lease_on_another_host_refuses_run_and_rerun(tmp_path):
    root = tmp_path / "runs"
    cfg = parse_config({"iterations": 1, "storage": {"root": str(root)}})
    calls: list[str] = []
    runs.run_loop(cfg, "r", _stages(calls), thread_mapper())
    _write_lease(root, "r")
    with pytest.raises(lease.LeaseHeld, match=r"other-host, pid 4242"):
        runs.run_loop(cfg, "r", _stages(calls), thread_mapper())
    with pytest.raises(lease.LeaseHeld, match=r"other-host, pid 4242"):
        runs.rerun_stage(cfg, "r", 1, "first", _stages(calls), thread_mapper())
    assert calls == ["first"]
    info = runs.list_runs(str(root), _stages([]), "r")[0]
    assert info.status == "running (other-host, pid 4242)"


def test_stale_leases_are_taken_over_with_a_warning(tmp_path, caplog):
    root = tmp_path / "runs"
    cfg = parse_config({"iterations": 1, "storage": {"root": str(root)}})
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    cases = {
        "dead-pid": {"host": socket.gethostname(), "pid": gone.pid, "start": "0"},
        "old-heartbeat": {"heartbeat": time.time() - 10 * lease.timeout_s()},
    }
    for run_id, fields in cases.items():
        _write_lease(root, run_id, **fields)
        calls: list[str] = []
        with caplog.at_level(logging.WARNING, logger="clawloop.lease"):
            summary = runs.run_loop(cfg, run_id, _stages(calls), thread_mapper())
        assert summary.ok and calls == ["first"]
        assert any(f"took over run {run_id}" in r.getMessage() for r in caplog.records), run_id
    why = [r.getMessage() for r in caplog.records]
    assert any("is gone" in w for w in why) and any("heartbeat is" in w for w in why)


def test_a_damaged_lease_is_taken_over_and_named(tmp_path, caplog):
    root = tmp_path / "runs"
    (root / "r").mkdir(parents=True)
    (root / "r" / lease.LEASE_FILE).write_text("[1, 2]")
    cfg = parse_config({"iterations": 1, "storage": {"root": str(root)}})
    with caplog.at_level(logging.WARNING, logger="clawloop.lease"):
        assert runs.run_loop(cfg, "r", _stages([]), thread_mapper()).ok
    assert any("lease.json is damaged" in r.getMessage() for r in caplog.records)


def test_a_holder_whose_lease_was_taken_over_stops_before_the_next_stage(tmp_path):
    root = str(tmp_path / "runs")
    mine = lease.Lease(root, "r")
    mine.acquire()
    try:
        _write_lease(tmp_path / "runs", "r")  # another process took it over
        mine.heartbeat()
        with pytest.raises(lease.LeaseLost, match="now belongs to other-host, pid 4242"):
            mine.check()
    finally:
        mine.release()
    holder, _ = lease.read_holder(root, "r")
    assert holder is not None and holder.token == "someone-else" and not holder.released


def test_why_free():
    now = time.time()
    base = lease.Holder("h", os.getpid(), "x", now, now, "t")
    assert lease.why_free(base, now, 60, host="elsewhere") is None
    assert "heartbeat" in lease.why_free(base, now + 61, 60, host="elsewhere")
    assert lease.why_free(lease.Holder("h", 1, "x", now, now, "t", released=True), now, 60) == (
        "released"
    )
    me = lease.Holder(socket.gethostname(), os.getpid(), "not-my-start", now, now, "t")
    assert "is gone" in lease.why_free(me, now, 60)


def test_compare_and_swap_on_a_local_disk(tmp_path):
    url = str(tmp_path / "x" / "cell.json")
    v1 = fs.create_exclusive(url, b"one")
    assert v1 is not None and fs.create_exclusive(url, b"two") is None
    assert oct(os.stat(url).st_mode & 0o777) == oct(0o644 & ~_umask())
    v2 = fs.replace_if(url, b"three", v1)
    assert v2 is not None and fs.replace_if(url, b"four", v1) is None
    assert fs.read_versioned(url) == (b"three", v2)
    assert not [p for p in (tmp_path / "x").iterdir() if p.name.startswith(fs.TMP_PREFIX)]


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
