"""kill -9 of a run while its local policy server (harness/local_server.py) is up: nothing outlives it
for long (the server dies with its parent, or the next start sweeps it by its pid file), no temp
dir of the run stays, and the resumed run completes. Slow: serves the tiny model on CPU."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from clawloop.harness import owned

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]


def _children(base: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (base / owned.OWNED).glob("*/child-*.json")]


def test_kill_minus_9_during_rollout_leaves_no_server_and_resumes(tmp_path):
    tmp = Path(tempfile.gettempdir())
    config = tmp_path / "run.yaml"
    config.write_text(
        "iterations: 1\n"
        f"storage: {{root: {tmp_path / 'runs'}}}\n"
        "sandbox: {backend: bwrap}\n"
        "synthesize: {n_train: 1, n_eval: 1}\n"
        "rollout: {n: 1, band: [0, 1], max_turns: 1, max_tokens: 8}\n"
        "train: {phases: sft}\n"  # groups of one: GRPO is refused at load
        "diagnose: {embedder: hashed}\n"
    )
    argv = [sys.executable, "-m", "clawloop.flows.cli", "run", "--config", str(config)]
    argv += ["--run-id", "killed", "--no-prefect"]
    before = {c["pid"] for c in _children(tmp)}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    server = None
    while server is None and time.monotonic() < deadline and proc.poll() is None:
        mine = [c for c in _children(tmp) if c["pid"] not in before]
        server = mine[0] if mine else None
        time.sleep(0.2)
    assert server is not None, "the run never started its policy server"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = [d for d in (tmp / owned.OWNED).iterdir() if d.name.startswith(f"{proc.pid}-")]
    assert left, "the killed run's owner folder should still be there before the sweep"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert owned.start_time(server["pid"]) != server["start"], "the old policy server survived"
    assert not any(d.exists() for d in left), "the killed run's temp dirs survived the resume"
