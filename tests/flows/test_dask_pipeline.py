"""The whole pipeline on a local Dask cluster: `clawloop run --runner dask` (K=1, the embedded
local profile: the tiny model served locally, bubblewrap or Docker sandboxes) writes the same
verdicts, rollout episodes and held-out episodes as the thread pool, every stage committed."""

from __future__ import annotations

import glob
from pathlib import Path

import pandas as pd
import pytest

from clawloop.flows.cli import main

pytestmark = [pytest.mark.prefect, pytest.mark.slow]

COMPARED = {
    ("verify", "verdicts"): ["task_id", "kept", "reason"],
    ("rollout", "trajectories"): ["task_id", "attempt", "passed", "reward", "end_reason"],
    ("diagnose", "eval_trajectories"): ["task_id", "attempt", "passed", "end_reason"],
}


def _run(root: Path, runner: str) -> Path:
    assert main(["run", "--iterations", "1", "--root", str(root), "--runner", runner]) == 0
    (iteration,) = glob.glob(str(root / "run-*" / "iter-1"))
    return Path(iteration)


def test_the_pipeline_on_dask_writes_what_threads_write(tmp_path: Path) -> None:
    threads, dask = _run(tmp_path / "threads", "threads"), _run(tmp_path / "dask", "dask")
    for (stage, table), cols in COMPARED.items():
        a, b = (pd.read_parquet(d / stage / f"{table}.parquet") for d in (threads, dask))
        assert len(a) > 0, (stage, table)
        a, b = (f[cols].sort_values(cols[:2]).reset_index(drop=True) for f in (a, b))
        pd.testing.assert_frame_equal(a, b, obj=f"{stage}/{table}")
    for stage in ("synthesize", "forge", "verify", "rollout", "train", "diagnose"):
        assert (dask / stage / "manifest.json").is_file(), stage
