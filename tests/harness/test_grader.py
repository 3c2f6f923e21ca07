"""The generic grader: tolerance, keyed matching, missing columns, reports, hostile outputs, CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clawloop.harness.taskfolder.grader import grade, values_equal

CSV_CONTRACT = {
    "outputs": [
        {
            "path": "output/t.csv",
            "format": "csv",
            "columns": ["id", "site", "total", "ok"],
            "key": ["id"],
        }
    ],
    "tolerance": {"abs": 0.01, "rel": 0.0},
    "decisions": [],
}
CSV_ANSWER = {
    "output/t.csv": [
        {"id": "A-1", "site": "North", "total": 12.5, "ok": True},
        {"id": "B-2", "site": "South", "total": 7.25, "ok": False},
    ]
}
JSON_CONTRACT = {
    "outputs": [
        {
            "path": "output/r.json",
            "format": "json",
            "schema": {
                "type": "object",
                "properties": {
                    "rows": {
                        "type": "array",
                        "key": ["id"],
                        "items": {
                            "type": "object",
                            "properties": {"id": {"type": "string"}, "v": {"type": "number"}},
                        },
                    },
                    "summary": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}, "top": {"type": "string"}},
                    },
                },
            },
        }
    ],
    "tolerance": {"abs": 0.0, "rel": 0.01},
}
JSON_ANSWER = {
    "output/r.json": {
        "rows": [{"id": "x", "v": 100.0}, {"id": "y", "v": 3.0}],
        "summary": {"n": 2, "top": "x"},
    }
}


def put(ws: Path, rel: str, text: str) -> None:
    p = ws / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_csv_rows_in_any_order_pass_columns_only_in_the_contract_order(tmp_path: Path) -> None:
    put(
        tmp_path, "output/t.csv", "id,site,total,ok\nB-2,South,7.25,false\n A-1 ,North,12.50,TRUE\n"
    )
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
    assert g["passed"] and g["reward"] == 1.0, g["checks"]
    put(
        tmp_path,
        "output/t.csv",
        "ok,total,site,id,extra\nfalse,7.25,South,B-2,z\nTRUE,12.50,North, A-1 ,z\n",
    )
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
    failed = {c["name"]: c["detail"] for c in g["checks"] if not c["passed"]}
    assert list(failed) == ["output/t.csv: columns"] and "extra" in failed["output/t.csv: columns"]
    lenient = {**CSV_CONTRACT["outputs"][0], "lenient": ["column_order", "extra_columns"]}
    assert grade({**CSV_CONTRACT, "outputs": [lenient]}, CSV_ANSWER, str(tmp_path))["passed"]


def test_reordered_columns_and_a_repeated_header_fail(tmp_path: Path) -> None:
    put(tmp_path, "output/t.csv", "site,id,total,ok\nSouth,B-2,7.25,false\nNorth,A-1,12.5,true\n")
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
    assert not g["passed"] and "in this order" in next(
        c["detail"] for c in g["checks"] if c["name"] == "output/t.csv: columns"
    )
    put(tmp_path, "output/t.csv", "id,site,total,ok,ok\nB-2,South,7.25,false,true\n")
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
    assert g["reward"] == 0.0 and "repeats header column(s) ['ok']" in g["checks"][0]["detail"]


def test_integers_must_be_whole_and_booleans_true_or_false(tmp_path: Path) -> None:
    contract = {
        "outputs": [{"path": "output/s.json", "format": "json", "schema": {}}],
        "tolerance": {"abs": 0.05},
    }
    answer = {"output/s.json": {"count": 3, "ok": True}}
    for got, passes in [
        ({"count": 3, "ok": True}, True),
        ({"count": 3.0, "ok": True}, True),
        ({"count": 3.01, "ok": True}, False),  # within tolerance, but not a whole number
        ({"count": 3, "ok": "yes"}, False),
        ({"count": 3, "ok": 1}, False),
    ]:
        put(tmp_path, "output/s.json", json.dumps(got))
        assert grade(contract, answer, str(tmp_path))["passed"] is passes, got
    relaxed = {**contract["outputs"][0], "lenient": ["int_as_float", "bool_words"]}
    put(tmp_path, "output/s.json", json.dumps({"count": 3.01, "ok": "yes"}))
    assert grade({**contract, "outputs": [relaxed]}, answer, str(tmp_path))["passed"]


def test_a_keyed_map_with_entities_it_should_not_list_fails(tmp_path: Path) -> None:
    """ "list only hives over 16 kg": writing every hive must not pay."""
    contract = {
        "outputs": [
            {
                "path": "output/heavy.json",
                "format": "json",
                "schema": {"type": "object", "additionalProperties": {"type": "number"}},
            }
        ],
        "tolerance": {"abs": 0.01},
    }
    answer = {"output/heavy.json": {"HV-1": 17.0, "HV-2": 18.5}}
    put(tmp_path, "output/heavy.json", json.dumps({"HV-1": 17.0, "HV-2": 18.5}))
    assert grade(contract, answer, str(tmp_path))["passed"]
    put(tmp_path, "output/heavy.json", json.dumps({"HV-1": 17.0, "HV-2": 18.5, "HV-3": 9.0}))
    g = grade(contract, answer, str(tmp_path))
    bad = [c for c in g["checks"] if not c["passed"]]
    assert not g["passed"] and [c["name"] for c in bad] == ["output/heavy.json: keys"]
    assert "HV-3" in bad[0]["detail"]


def test_json_records_with_fields_the_contract_does_not_ask_for_fail(tmp_path: Path) -> None:
    contract = {
        "outputs": [
            {
                "path": "output/r.json",
                "format": "json",
                "schema": {"properties": {"rows": {"type": "array", "key": ["id"]}}},
            }
        ],
        "tolerance": {"abs": 0.0},
    }
    answer = {"output/r.json": {"rows": [{"id": "a", "n": 1}]}}
    put(tmp_path, "output/r.json", json.dumps({"rows": [{"id": "a", "n": 1, "guess": 2}]}))
    g = grade(contract, answer, str(tmp_path))
    assert not g["passed"] and any(c["name"] == "output/r.json.rows[]: fields" for c in g["checks"])


def test_csv_tolerance_boundary(tmp_path: Path) -> None:
    put(tmp_path, "output/t.csv", "id,site,total,ok\nA-1,North,12.51,true\nB-2,South,7.24,false\n")
    assert grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))["passed"]
    put(tmp_path, "output/t.csv", "id,site,total,ok\nA-1,North,12.52,true\nB-2,South,7.25,false\n")
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
    failed = [c["name"] for c in g["checks"] if not c["passed"]]
    assert failed == ["output/t.csv: total"] and 0 < g["reward"] < 1


def test_relative_tolerance_and_json_keyed_lists(tmp_path: Path) -> None:
    put(
        tmp_path,
        "output/r.json",
        json.dumps(
            {
                "summary": {"top": "x", "n": 2},
                "rows": [{"v": 2.98, "id": "y"}, {"id": "x", "v": 100.9}],
            }
        ),
    )
    assert grade(JSON_CONTRACT, JSON_ANSWER, str(tmp_path))["passed"]
    put(
        tmp_path,
        "output/r.json",
        json.dumps(
            {
                "summary": {"top": "x", "n": 2},
                "rows": [{"v": 3, "id": "y"}, {"id": "x", "v": 101.5}],
            }
        ),
    )
    g = grade(JSON_CONTRACT, JSON_ANSWER, str(tmp_path))
    assert [c["name"] for c in g["checks"] if not c["passed"]] == ["output/r.json.rows[]: v"]


def test_missing_extra_and_duplicate_keys_fail(tmp_path: Path) -> None:
    for body in (
        "A-1,North,12.5,true\n",  # missing row
        "A-1,North,12.5,true\nB-2,South,7.25,false\nC-3,East,1,true\n",  # extra row
        "A-1,North,12.5,true\nB-2,South,7.25,false\nB-2,South,7.25,false\n",
    ):  # duplicate
        put(tmp_path, "output/t.csv", "id,site,total,ok\n" + body)
        g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
        assert not g["passed"]
        assert not next(c for c in g["checks"] if c["name"] == "output/t.csv: keys")["passed"]


def test_missing_column_fails_that_column_and_columns_check(tmp_path: Path) -> None:
    put(tmp_path, "output/t.csv", "id,site,total\nA-1,North,12.5\nB-2,South,7.25\n")
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
    failed = {c["name"] for c in g["checks"] if not c["passed"]}
    assert failed == {"output/t.csv: columns", "output/t.csv: ok"}


def test_missing_file_fails_every_check_of_that_output(tmp_path: Path) -> None:
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
    assert g["reward"] == 0.0 and len(g["checks"]) == 6
    assert "does not exist" in g["checks"][0]["detail"]


def test_report_needs_text_and_sidecar(tmp_path: Path) -> None:
    contract = {
        "outputs": [
            {
                "path": "output/report.md",
                "format": "report",
                "sidecar": "output/facts.json",
                "schema": {},
            }
        ],
        "tolerance": {"abs": 0.01},
    }
    answer = {"output/facts.json": {"flagged": 3, "worst": "HV-0012"}}
    put(tmp_path, "output/facts.json", json.dumps({"flagged": 3, "worst": "HV-0012"}))
    g = grade(contract, answer, str(tmp_path))
    # the sidecar's 4 checks pass; "report written" and the report's two facts fail
    assert not g["passed"] and g["reward"] == 4 / 7
    put(tmp_path, "output/report.md", "# Findings\nThree readings flagged.\n")
    g = grade(contract, answer, str(tmp_path))
    assert [c["name"] for c in g["checks"] if not c["passed"]] == ["output/report.md: states worst"]
    put(tmp_path, "output/report.md", "# Findings\nThree readings flagged; the worst: HV-0012.\n")
    assert grade(contract, answer, str(tmp_path))["passed"]


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff\xfe garbage \x00",
        b"[" * 100_000,
        b'{"rows": "not a list", "summary": 7}',
        b'{"rows": [1, 2, null], "summary": {"n": "two", "top": ["x"]}}',
        b'{"rows": [{"id": "x", "v": "NaN"}, {"id": "y", "v": 1e999}], "summary": {"n": 2e400, "top": "x"}}',
        b"1" * 5000,
    ],
)
def test_hostile_json_never_crashes(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "output").mkdir()
    (tmp_path / "output/r.json").write_bytes(content)
    g = grade(JSON_CONTRACT, JSON_ANSWER, str(tmp_path))
    assert 0.0 <= g["reward"] < 1.0 and not g["passed"]


def test_hostile_csv_never_crashes(tmp_path: Path) -> None:
    for content in (
        b"",
        b"\x00\x00\n\x00",
        b'id,site\n"unterminated\n',
        b"id," * 50_000 + b"\n",
        b"id,site,total,ok\n" + b"A-1,North,abc,maybe\n" * 3,
    ):
        put(tmp_path, "output/t.csv", "")
        (tmp_path / "output/t.csv").write_bytes(content)
        g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
        assert not g["passed"]


def test_oversized_output_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import clawloop.harness.taskfolder.grader as grader

    monkeypatch.setattr(grader, "MAX_BYTES", 1000)
    put(tmp_path, "output/t.csv", "id,site,total,ok\n" + "A-1,North,12.5,true\n" * 200)
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(tmp_path))
    assert g["reward"] == 0.0 and "at most 1000" in g["checks"][0]["detail"]


def test_symlink_escape_and_fifo_are_refused(tmp_path: Path) -> None:
    ws, secret = tmp_path / "ws", tmp_path / "tests"
    (ws / "output").mkdir(parents=True)
    secret.mkdir()
    (secret / "answer.csv").write_text(
        "id,site,total,ok\nA-1,North,12.5,true\nB-2,South,7.25,false\n"
    )
    os.symlink(secret / "answer.csv", ws / "output/t.csv")
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(ws))
    assert g["reward"] == 0.0 and "outside the workspace" in g["checks"][0]["detail"]
    os.unlink(ws / "output/t.csv")
    os.mkfifo(ws / "output/t.csv")  # reading a FIFO would block forever
    g = grade(CSV_CONTRACT, CSV_ANSWER, str(ws))
    assert g["reward"] == 0.0 and "not a regular file" in g["checks"][0]["detail"]


def test_bad_contract_gives_zero_not_crash(tmp_path: Path) -> None:
    assert grade({"outputs": []}, {}, str(tmp_path))["reward"] == 0.0
    assert (
        grade({"outputs": [{"format": "csv"}], "tolerance": {"abs": "x"}}, {}, str(tmp_path))[
            "reward"
        ]
        == 0.0
    )


def test_values_equal_is_strict_on_types() -> None:
    tol = {"abs": 0.01, "rel": 0.0}
    assert values_equal(True, "true", tol) and values_equal(True, 1.0, tol) is False
    assert not values_equal(5, True, tol)
    assert not values_equal("A", 1, tol)
    assert values_equal(None, "", tol) and not values_equal(None, "0", tol)


def test_cli_runs_as_a_standalone_stdlib_script(tmp_path: Path) -> None:
    tests, ws, logs = tmp_path / "tests", tmp_path / "ws", tmp_path / "logs/verifier"
    tests.mkdir()
    shutil.copy(Path(__file__).parents[2] / "harness/taskfolder/grader.py", tests / "grader.py")
    (tests / "contract.json").write_text(json.dumps(CSV_CONTRACT))
    (tests / "answer.json").write_text(json.dumps(CSV_ANSWER))
    put(ws, "output/t.csv", "id,site,total,ok\nA-1,North,12.5,true\nB-2,South,7.25,false\n")
    out = logs / "reward.json"
    cmd = [
        sys.executable,
        "-I",
        str(tests / "grader.py"),
        "--tests-dir",
        str(tests),
        "--workspace",
        str(ws),
        "--out",
        str(out),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # reward.json: numbers only (Harbor's rule): the outcome and the share of checks passed;
    # the details beside it in details.json.
    assert json.loads(out.read_text()) == {"reward": 1.0, "fraction": 1.0}
    d = json.loads((logs / "details.json").read_text())
    assert d["passed"] is True and d["reward"] == 1.0 and d["reason"] == "" and d["checks"]
    (tests / "answer.json").write_text("{broken")
    subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert json.loads(out.read_text()) == {"reward": 0.0, "fraction": 0.0}
    d = json.loads((logs / "details.json").read_text())
    assert d["passed"] is False and "JSONDecodeError" in d["checks"][0]["detail"]
    assert "JSONDecodeError" in d["reason"]


def test_the_grader_and_the_contract_know_the_same_leniencies() -> None:
    from clawloop.harness.taskfolder import grader, spec

    assert grader.LENIENCIES == spec.LENIENCIES


@pytest.mark.parametrize("rel", ["/workspace/out.json", "../ws/out.json", "a/../../ws/out.json"])
def test_an_output_path_not_inside_the_workspace_is_refused_wherever_it_points(
    tmp_path: Path, rel: str
) -> None:
    # Each of these names the real output from where the workspace is: still refused, so the
    # verdict never depends on where the workspace was put.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "out.json").write_text('{"a": 1}')
    contract = {"outputs": [{"path": rel, "format": "json", "schema": {"type": "object"}}]}
    result = grade(contract, {rel: {"a": 1}}, str(ws))
    assert not result["passed"]
    assert "not a path inside the workspace" in json.dumps(result["checks"])
