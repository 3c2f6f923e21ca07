"""What a killed run leaves on the host (temp dirs, the local policy server) is swept by the next
start; what a live run owns is not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from clawloop.harness import owned

OWNER = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from clawloop.harness import owned
    base = sys.argv[1]
    tmp = owned.temp_dir("clawloop-rollout-", base)
    Path(tmp.name, "task").mkdir()
    server = subprocess.Popen(["sleep", "300"], start_new_session=True)
    owned.record_child(server, base)
    Path(base, "ready").write_text(str(server.pid))
    time.sleep(300)
    """
)


def _wait_for(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"{path} never appeared"


def test_a_killed_owner_s_dirs_and_helper_processes_are_swept(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)])
    _wait_for(tmp_path / "ready")
    helper = int((tmp_path / "ready").read_text())
    folder = tmp_path / owned.OWNED / f"{proc.pid}-{owned.start_time(proc.pid)}"
    assert any(folder.glob("clawloop-rollout-*/task")) and any(folder.glob("child-*.json"))
    assert owned.sweep([str(tmp_path)]) == {"dirs": [], "processes": []}  # its owner is alive
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert owned.start_time(helper) is not None  # SIGKILL let the helper outlive its run
    swept = owned.sweep([str(tmp_path)])
    assert swept == {"dirs": [str(folder)], "processes": [str(helper)]}
    deadline = time.monotonic() + 10
    while owned.start_time(helper) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert owned.start_time(helper) is None and not folder.exists()


def test_a_reused_pid_is_not_taken_for_the_owner(tmp_path):
    folder = tmp_path / owned.OWNED / f"{os.getpid()}-0"  # our pid, another start time
    folder.mkdir(parents=True)
    assert owned.sweep([str(tmp_path)])["dirs"] == [str(folder)]
    mine = owned.owner_dir(str(tmp_path))
    assert owned.sweep([str(tmp_path)])["dirs"] == [] and mine.exists()
