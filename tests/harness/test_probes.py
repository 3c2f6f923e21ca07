"""Trivial-solution probes: right shape, no real work; a sound task's grader fails all of them,
and an unsound task (an answer a probe can reproduce) is caught."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from clawloop.generators.meta import OUTPUT_FORMATS
from clawloop.harness.taskfolder.grader import grade
from clawloop.harness.taskfolder.probes import shaped_value, trivial_probes
from clawloop.synthesis.library import render_generator

SCHEMA = {
    "type": "object",
    "properties": {
        "rows": {
            "type": "array",
            "key": ["id"],
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "v": {"type": "number"},
                    "ok": {"type": "boolean"},
                },
            },
        },
        "summary": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
}
FILES = {"data/a.csv": "id,v\nA,1\n", "data/b.json": '{"x": 1}', "notes.md": "# notes\n"}


def write(ws: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)


def test_shapes_follow_the_contract() -> None:
    contract = {
        "outputs": [
            {"path": "output/t.csv", "format": "csv", "columns": ["id", "v"], "key": ["id"]},
            {"path": "output/r.json", "format": "json", "schema": SCHEMA},
            {
                "path": "output/report.md",
                "format": "report",
                "sidecar": "output/facts.json",
                "schema": SCHEMA,
            },
        ]
    }
    p = trivial_probes(contract, FILES)
    assert set(p) == {
        "empty",
        "copy_inputs",
        "constant",
        "copy:data/a.csv",
        "copy:data/b.json",
        "copy:notes.md",
    }
    for outputs in p.values():
        assert set(outputs) == {
            "output/t.csv",
            "output/r.json",
            "output/report.md",
            "output/facts.json",
        }
    assert list(csv.reader(io.StringIO(p["empty"]["output/t.csv"]))) == [["id", "v"]]
    assert list(csv.reader(io.StringIO(p["constant"]["output/t.csv"])))[1:] == [["0", "0"]] * 3
    assert json.loads(p["empty"]["output/r.json"]) == {"rows": [], "summary": {"n": 0}}
    const = json.loads(p["constant"]["output/facts.json"])
    assert const["rows"] == [{"id": "n/a", "v": 0, "ok": True}] * 3
    assert p["copy_inputs"]["output/t.csv"] == FILES["data/a.csv"]
    assert p["copy_inputs"]["output/r.json"] == FILES["data/b.json"]
    assert p["copy_inputs"]["output/report.md"] == FILES["notes.md"]


def test_shaped_value_survives_odd_schemas() -> None:
    assert shaped_value({}, "empty") is None
    assert shaped_value({"type": ["null", "string"]}, "constant") == "n/a"
    deep: dict = {"type": "object", "properties": {}}
    node = deep
    for _ in range(40):
        node["properties"]["x"] = {"type": "object", "properties": {}}
        node = node["properties"]["x"]
    json.dumps(shaped_value(deep, "constant"))


@pytest.mark.parametrize("fmt", OUTPUT_FORMATS)
def test_builtin_tasks_fail_every_probe(fmt: str, tmp_path: Path) -> None:
    ns: dict = {}
    exec(render_generator("anomaly_flagging", "maple_sugaring", 2, 2, fmt), ns)
    b = ns["build"](11)
    for name, outputs in trivial_probes(b["contract"], b["files"]).items():
        ws = tmp_path / name
        write(ws, outputs)
        g = grade(b["contract"], b["answer"], str(ws))
        assert g["reward"] < 1.0, name


def test_an_unsound_task_is_caught_by_the_empty_probe(tmp_path: Path) -> None:
    """A task whose answer is 'no rows' is passed by the empty probe: verify must drop it."""
    contract = {
        "outputs": [
            {"path": "output/t.csv", "format": "csv", "columns": ["id", "v"], "key": ["id"]}
        ],
        "tolerance": {"abs": 0.01},
    }
    write(tmp_path, trivial_probes(contract, FILES)["empty"])
    assert grade(contract, {"output/t.csv": []}, str(tmp_path))["passed"]
