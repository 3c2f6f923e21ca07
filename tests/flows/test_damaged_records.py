"""Damaged records (a run.json or a stage manifest that is not JSON, not an object, or lacks what
it must hold): one line naming the file and what is wrong, in `run`, `rerun`, `runs`, `report`
and `export`; `runs` still lists every other run."""

from __future__ import annotations

import pyarrow as pa
import pytest

from clawloop.flows import pipeline, runs
from clawloop.flows.cli import main
from clawloop.storage.manifest import parse_manifest
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageResult, StageSpec

SCHEMA = pa.schema([("n", pa.int64())])
STAGES = [StageSpec("a", lambda ctx: StageResult({"t": (SCHEMA, [{"n": 1}])}), lambda c, k: {})]

DAMAGE = {
    "garbage": (b"{not json", "not JSON (Expecting property name"),
    "a list": (b"[1, 2]", "its top level is a list, not an object"),
    "no config": (b'{"run_id": "bad"}', "it has no 'config'"),
    "config a list": (b'{"config": [1]}', "it has a list 'config'"),
    "binary": (b"\xff\xfe\x00", "its bytes are not UTF-8 text"),
}


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "runs"
    cfg = parse_config({"iterations": 1, "storage": {"root": str(root)}})
    for run_id in ("good", "bad"):
        runs.run_loop(cfg, run_id, STAGES, thread_mapper())
    return root


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_run_json_is_one_line_everywhere(root, tmp_path, capsys, case):
    data, what = DAMAGE[case]
    (root / "bad" / "run.json").write_bytes(data)
    url = str(root / "bad" / "run.json")
    r = str(root)
    verbs = {
        "run": ["run", "--run-id", "bad", "--root", r, "--no-prefect"],
        "rerun": ["rerun", "--run-id", "bad", "--iteration", "1", "--stage", "forge", "--root", r],
        "runs": ["runs", "--run-id", "bad", "--root", r],
        "report": ["report", "--run", "bad", "--root", r],
        "export": [
            "export",
            "trajectories",
            "--run",
            "bad",
            "--root",
            r,
            "--out",
            str(tmp_path / "x"),
        ],
    }
    for verb, argv in verbs.items():
        assert main(argv) == 2, verb
        line = _one_line(capsys.readouterr().err)
        assert f"{url} is damaged: {what}" in line, (verb, line)
    assert not (tmp_path / "x").exists()
    assert (root / "bad" / "run.json").read_bytes() == data, "a refused verb rewrote run.json"

    # `runs` lists the rest, and says which one it cannot read and why.
    assert main(["runs", "--root", r]) == 0
    out = capsys.readouterr().out
    assert "good" in out and "complete" in out and "unreadable" in out
    listed = {i.run_id: i for i in runs.list_runs(r, STAGES)}
    assert listed["good"].status == "complete"
    assert listed["bad"].status == "unreadable" and what in listed["bad"].reason


def test_a_damaged_manifest_is_named_by_runs_report_and_export(root, tmp_path, capsys):
    r = str(root)
    manifest = root / "good" / "iter-1" / "a" / "manifest.json"
    manifest.write_text("[1, 2]")
    info = runs.list_runs(r, STAGES, "good")[0]
    (stage,) = info.iterations[1]
    assert stage.status == "stale"
    assert stage.reason.startswith(f"{manifest} is damaged: its top level is a list")

    for stage_name in ("synthesize", "rollout"):
        folder = root / "good" / "iter-1" / stage_name
        folder.mkdir()
        (folder / "manifest.json").write_text('{"stage": "x"}')
    assert main(["runs", "--root", r, "--run-id", "good"]) == 0
    assert "stale" in capsys.readouterr().out
    (synth, *_) = runs.list_runs(r, pipeline.STAGES, "good")[0].iterations[1]
    assert synth.stage == "synthesize" and synth.status == "stale"
    assert "synthesize/manifest.json is damaged: it has no 'iteration'" in synth.reason
    assert main(["report", "--run", "good", "--root", r]) == 0
    err = capsys.readouterr().err
    assert f"{root}/good/iter-1/synthesize/manifest.json is damaged: it has no 'iteration'" in err
    out_dir = tmp_path / "export"
    assert (
        main(["export", "trajectories", "--run", "good", "--root", r, "--out", str(out_dir)]) == 2
    )
    line = _one_line(capsys.readouterr().err)
    assert "iter-1/rollout/manifest.json is damaged" in line and "clawloop rerun" in line
    assert not out_dir.exists()


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("{", "not JSON"),
        ("3", "its top level is a int, not an object"),
        ('{"stage": "a"}', "it has no 'iteration'"),
        (
            '{"stage": "a", "iteration": "1", "run_id": "r", "inputs_hash": "h", '
            '"code_version": "c", "upstream": {}, "files": []}',
            "'iteration' is a string, not int",
        ),
        (
            '{"stage": "a", "iteration": 1, "run_id": "r", "inputs_hash": "h", '
            '"code_version": "c", "upstream": {}, "files": [{"name": "x"}]}',
            "files[0] has no 'sha256', 'rows', 'bytes'",
        ),
    ],
)
def test_parse_manifest_says_what_is_wrong(text, what):
    with pytest.raises(ValueError, match="^" + what.replace("[", r"\[").replace("]", r"\]")):
        parse_manifest(text)
