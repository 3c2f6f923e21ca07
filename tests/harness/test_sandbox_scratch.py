"""Host scratch space for task files in transit: /dev/shm when it has room, else the temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawloop.harness import owned
from clawloop.harness.sandbox import scratch as taskenv


@pytest.fixture(autouse=True)
def fresh_choice():
    taskenv.scratch_dir.cache_clear()
    yield
    taskenv.scratch_dir.cache_clear()


def test_env_override_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWLOOP_SCRATCH", str(tmp_path))
    with taskenv.scratch("clawloop-t-") as d:
        # inside this process's owner folder, which a sweep removes if the process is killed
        assert Path(d).parent == owned.owner_dir(str(tmp_path)) and Path(d).is_dir()
        assert Path(d).parent.parent == tmp_path / owned.OWNED
    assert not Path(d).exists()


def test_small_or_missing_shm_falls_back_to_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLAWLOOP_SCRATCH", raising=False)
    monkeypatch.setattr(taskenv, "SHM", str(tmp_path / "missing"))
    assert taskenv.scratch_dir() is None
    taskenv.scratch_dir.cache_clear()
    monkeypatch.setattr(taskenv, "SHM", str(tmp_path))
    monkeypatch.setattr(taskenv, "MIN_SHM_FREE", 1 << 62)  # more room than any disk has
    assert taskenv.scratch_dir() is None
    taskenv.scratch_dir.cache_clear()
    monkeypatch.setattr(taskenv, "MIN_SHM_FREE", 0)
    assert taskenv.scratch_dir() == str(tmp_path)
