"""Run ids are names (flows/names.py): `[A-Za-z0-9._-]{1,128}`, not `.`/`..`; refused at the
command line, in the functions that write a run, and in the `loop` / `rerun-stage` deployments,
so nothing is ever written outside the storage root."""

from __future__ import annotations

import pytest

from clawloop.flows import names, pipeline, runs
from clawloop.flows.cli import main
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper

GOOD = ["run-20261202-010203", "a", "A.b_c-9", "x" * 128, "..."]
BAD = ["", ".", "..", "../../escape", "a/b", "/abs", "x" * 129, "a b", "r\u00e9", "a\\b", "-"[:0]]


@pytest.mark.parametrize("value", GOOD)
def test_names_are_run_ids(value):
    assert names.check_run_id(value) == value


@pytest.mark.parametrize("value", BAD)
def test_paths_and_odd_characters_are_not(value):
    with pytest.raises(names.RunIdError, match="run id"):
        names.check_run_id(value)


def _files(path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--run-id", "../../escape", "--no-prefect"],
        ["rerun", "--run-id", "..", "--iteration", "1", "--stage", "forge"],
        ["runs", "--run-id", "a/b"],
        ["report", "--run", "../x"],
        ["export", "trajectories", "--run", "../x", "--out", "OUT"],
    ],
)
def test_the_command_line_refuses_a_run_id_that_is_a_path(tmp_path, capsys, argv):
    root = tmp_path / "a" / "b"
    root.mkdir(parents=True)
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv] + ["--root", str(root)]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "is not a name" in err or "names a folder above" in err
    assert _files(tmp_path) == ["a", "a/b"], "something was written for a refused run id"


def test_run_loop_and_rerun_refuse_it_before_writing(tmp_path):
    cfg = parse_config({"iterations": 1, "storage": {"root": str(tmp_path / "a" / "b")}})
    with pytest.raises(names.RunIdError):
        runs.run_loop(cfg, "../../escape", [], thread_mapper())
    with pytest.raises(names.RunIdError):
        runs.rerun_stage(cfg, "..", 1, "x", [], thread_mapper())
    assert _files(tmp_path) == []


def test_the_deployments_refuse_it(tmp_path):
    root = str(tmp_path / "a")
    config = {"iterations": 1, "storage": {"root": root}}
    with pytest.raises(names.RunIdError, match="is not a name"):
        pipeline.loop_flow.fn("../../escape", config)
    with pytest.raises(names.RunIdError, match="names a folder above"):
        pipeline.rerun_stage_flow.fn("..", 1, "forge", root)
    assert _files(tmp_path) == []
