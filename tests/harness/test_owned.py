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


def test_proc_stat_reads_this_process():
    stat = owned.proc_stat(os.getpid())
    assert stat is not None
    assert stat.state in {"R", "S"}  # running this line, or between ticks
    assert stat.ppid == os.getppid() and stat.pgrp == os.getpgrp()
    assert stat.start_ticks > 0 and stat.utime + stat.stime > 0  # an interpreter costs CPU
    assert owned.start_time(os.getpid()) == str(stat.start_ticks)


def test_proc_stat_of_an_exited_process_is_zombie_then_none():
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 30
    while (stat := owned.proc_stat(child.pid)) is not None and stat.state != "Z":
        assert time.monotonic() < deadline, stat
        time.sleep(0.02)
    assert stat is not None and stat.state == "Z"  # exited, not reaped yet
    child.wait()
    assert owned.proc_stat(child.pid) is None
    assert owned.start_ticks(child.pid) is None and owned.start_time(child.pid) is None


def test_proc_stat_reads_past_a_command_name_with_parentheses_and_spaces(tmp_path):
    # A process names itself (comm, 15 bytes at most) so that its stat line reads
    # `pid (a) (b) Z 1 2) S ppid ...`: the fields start after the last ')'.
    name = "a) (b) Z 1 2"
    code = (
        f"open('/proc/self/comm', 'w').write({name!r}); "
        "import sys, time; print('ready', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert Path(f"/proc/{child.pid}/comm").read_text().strip() == name
        stat = owned.proc_stat(child.pid)
        assert stat is not None
        assert stat.state in {"R", "S"} and stat.ppid == os.getpid() and stat.pgrp == os.getpgrp()
        assert stat.start_ticks >= owned.start_ticks(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_parse_proc_stat_refuses_what_is_not_a_stat_line():
    fields = "S 1 7 7 0 -1 4194560 0 0 0 0 3 4 0 0 20 0 1 0 555 0"
    stat = owned.parse_proc_stat(f"42 (x) y)) {fields}\n")
    assert stat == owned.ProcStat(state="S", ppid=1, pgrp=7, utime=3, stime=4, start_ticks=555)
    assert owned.parse_proc_stat("") is None
    assert owned.parse_proc_stat("42 (x) S 1 7") is None  # cut short
    assert owned.parse_proc_stat(f"42 x {fields}") is None  # no command name
    assert owned.parse_proc_stat(f"42 (x) {fields.replace('555', 'soon')}") is None
