"""The root you name is the root used: a run resumed or re-run with --root (or a config's
storage.root) is read and written there, not under the root its run.json saved, and run.json is
updated to say where the run now lives; a moved run resumes with every stage skipped."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa

from clawloop.flows import runs
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageResult, StageSpec

SCHEMA = pa.schema([("n", pa.int64())])


def _stages(calls: list[str]) -> list[StageSpec]:
    def a(ctx):
        calls.append("a")
        return StageResult({"t": (SCHEMA, [{"n": 1}, {"n": 2}])})

    def b(ctx):
        calls.append("b")
        return StageResult({"t": (SCHEMA, ctx.rows("a", "t"))})

    return [StageSpec("a", a, lambda c, k: {}), StageSpec("b", b, lambda c, k: {}, upstream=("a",))]


def _saved_root(root, run_id: str) -> str:
    return json.loads((root / run_id / runs.RUN_FILE).read_text())["config"]["storage"]["root"]


def test_a_moved_run_resumes_where_it_is_now_and_run_json_says_so(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    calls: list[str] = []
    cfg = parse_config({"iterations": 2, "storage": {"root": str(old)}})
    assert runs.run_loop(cfg, "r", _stages(calls), thread_mapper()).ok
    assert calls == ["a", "b", "a", "b"]
    new.mkdir()
    shutil.move(str(old / "r"), str(new / "r"))

    resumed = runs.resolve_config(None, "r", root=str(new))
    assert resumed.storage.root == str(new)
    summary = runs.run_loop(resumed, "r", _stages(calls), thread_mapper())
    assert [o.status for o in summary.outcomes] == ["skipped"] * 4
    assert calls == ["a", "b", "a", "b"], "a moved run re-ran stages"
    assert not (old / "r").exists(), "the resumed run wrote under the root run.json had saved"
    assert _saved_root(new, "r") == str(new)
    info = runs.list_runs(str(new), _stages([]), "r")[0]
    assert info.status == "complete"


def test_rerun_under_the_named_root_writes_there_and_updates_run_json(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    calls: list[str] = []
    cfg = parse_config({"iterations": 1, "storage": {"root": str(old)}})
    runs.run_loop(cfg, "r", _stages(calls), thread_mapper())
    new.mkdir()
    shutil.move(str(old / "r"), str(new / "r"))
    loaded = runs.load_run_config(str(new), "r")
    assert loaded is not None and loaded.storage.root == str(new)
    out = runs.rerun_stage(loaded, "r", 1, "b", _stages(calls), thread_mapper())
    assert out.status == "ran" and calls[-1] == "b"
    assert not (old / "r").exists() and _saved_root(new, "r") == str(new)


def test_a_config_storage_root_wins_over_the_saved_one(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    runs.run_loop(
        parse_config({"iterations": 1, "storage": {"root": str(old)}}),
        "r",
        _stages([]),
        thread_mapper(),
    )
    yaml = tmp_path / "c.yaml"
    yaml.write_text(f"iterations: 1\nstorage: {{root: {new}}}\n")
    assert runs.resolve_config(str(yaml), "r").storage.root == str(new)
    assert runs.resolve_config(None, "r", root=str(old)).storage.root == str(old)
