"""scripts/same_artifacts.py's comparison: a file that differs only in what each run has of its
own (when, who, how long, the code's hash and the cache keys holding it) is told apart from one
whose content differs, in a JSON record, a Parquet table and a synthesis step's cache."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "same_artifacts", ROOT / "scripts" / "same_artifacts.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _manifest(**over: object) -> dict:
    base = {
        "stage": "synthesize",
        "code_version": "c1",
        "inputs_hash": "h1",
        "started_at": 1.0,
        "finished_at": 2.0,
        "upstream": {"iter-1/forge": "u1"},
        "files": [{"name": "t.parquet", "rows": 2, "bytes": 10, "sha256": "s1"}],
        "summary": {"passed": 3, "domains": {"x": {"seconds_per_task": 1.5, "tasks": 4}}},
    }
    return {**base, **over}


def _write(root: Path, rel: str, value: object) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if rel.endswith(".parquet"):
        pd.DataFrame(value).to_parquet(path)
    elif rel.endswith(".json.gz"):
        path.write_bytes(gzip.compress(json.dumps(value).encode()))
    else:
        path.write_text(json.dumps(value))


def test_per_run_values_are_told_apart_from_content(tmp_path):
    same = _script()
    a, b = tmp_path / "a", tmp_path / "b"
    own = {"passed": 3, "domains": {"x": {"seconds_per_task": 9.0, "tasks": 4}}}
    real = {"passed": 2, "domains": {"x": {"seconds_per_task": 1.5, "tasks": 4}}}
    pairs = {
        "same.json": (_manifest(), _manifest()),
        "iter-1/a/manifest.json": (
            _manifest(),
            _manifest(
                code_version="c2",
                inputs_hash="h2",
                finished_at=3.0,
                upstream={"iter-1/forge": "u2"},
                files=[{"name": "t.parquet", "rows": 2, "bytes": 11, "sha256": "s2"}],
                summary=own,
            ),
        ),
        "iter-1/b/manifest.json": (_manifest(), _manifest(summary=real)),
        "run.json": (
            {"config": {"storage": {"root": "/a"}}},
            {"config": {"storage": {"root": "/b"}}},
        ),
        "t.parquet": (
            {"reward": [1.0, 0.0], "duration_s": [1.0, 2.0]},
            {"reward": [1.0, 0.0], "duration_s": [1.5, 2.5]},
        ),
        "u.parquet": ({"reward": [1.0, 0.0]}, {"reward": [0.0, 0.0]}),
        "iter-1/synthesize/steps/domain.json.gz": (
            {"key": "k1", "product": {"rows": [1], "summary": _manifest()["summary"]}},
            {"key": "k2", "product": {"rows": [1], "summary": own}},
        ),
        "iter-1/synthesize/steps/skills.json.gz": (
            {"key": "k1", "product": {"rows": [1]}},
            {"key": "k2", "product": {"rows": [2]}},
        ),
    }
    for rel, (left, right) in pairs.items():
        _write(a, rel, left)
        _write(b, rel, right)
    _write(a, "only-before.json", {})

    identical, per_run, differ = same.compare(a, b)
    assert identical == ["same.json"]
    assert sorted(line.split(":")[0] for line in per_run) == [
        "iter-1/a/manifest.json",
        "iter-1/synthesize/steps/domain.json.gz",
        "run.json",
        "t.parquet",
    ]
    assert sorted(line.split(":")[0] for line in differ) == [
        "iter-1/b/manifest.json",
        "iter-1/synthesize/steps/skills.json.gz",
        "only-before.json",
        "u.parquet",
    ]
    lines = {line.split(":")[0]: line for line in per_run + differ}
    assert "DIFFERS in summary.passed" in lines["iter-1/b/manifest.json"]
    assert "upstream" in lines["iter-1/a/manifest.json"]
    assert "seconds_per_task" in lines["iter-1/synthesize/steps/domain.json.gz"]
    assert "product DIFFERS in rows[0]" in lines["iter-1/synthesize/steps/skills.json.gz"]
    assert "columns: reward" in lines["u.parquet"]
