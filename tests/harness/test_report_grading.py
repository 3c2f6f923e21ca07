"""Free reports are graded on their text: the hidden key's facts (row values next to their key,
overall figures next to their name) must be stated in any honest phrasing and number format, and
the forbidden ones must not; garbage, empty and contradicting reports fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawloop.generators.contract import validate_build
from clawloop.harness.taskfolder.grader import (
    MAX_NUMBERS_PER_KEY,
    grade,
    report_facts,
    text_numbers,
)

SIDECAR = {
    "hives": [
        {"hive_id": "HV-101", "apiary": "North Ridge", "total": 20378.5, "records": 3, "ok": True},
        {"hive_id": "HV-202", "apiary": "South Field", "total": 731.25, "records": 0, "ok": False},
    ],
    "summary": {"grand_total": 21109.75, "top_hive": "HV-101"},
}
SCHEMA = {
    "type": "object",
    "properties": {
        "hives": {"type": "array", "key": ["hive_id"], "items": {"type": "object"}},
        "summary": {"type": "object"},
    },
}
FORBIDDEN = [{"about": {"hive_id": "HV-303"}, "field": "total", "value": 555.55}]


def build() -> dict:
    """A generator's build() result with a report output, through the contract validator (as
    forge writes it: the facts taken from the sidecar, the coverage list filled in)."""
    result = {
        "instruction": "Report the hive totals.",
        "files": {"data/hives.csv": "hive_id,apiary,kg\nHV-101,North Ridge,1\n"},
        "answer": {
            "output/facts.json": SIDECAR,
            "output/report.md": {"forbidden": FORBIDDEN},
        },
        "contract": {
            "outputs": [
                {
                    "path": "output/report.md",
                    "format": "report",
                    "sidecar": "output/facts.json",
                    "schema": SCHEMA,
                }
            ],
            "tolerance": {"abs": 0.01, "rel": 0.0},
            "decisions": [],
        },
    }
    return validate_build(result).to_dict()


TASK = build()

HONEST_TABLE = """# Hive totals

| hive_id | apiary | total | records | ok |
|---|---|---|---|---|
| HV-101 | North Ridge | 20,378.50 | 3 | true |
| HV-202 | South Field | 731.25 | 0 | false |

## Summary

- grand_total: 21109.75
- top_hive: HV-101
"""

HONEST_PROSE = """# What the hives did

The top hive this season was HV-101. Hive HV-202 in South Field logged zero records, a total
of 731,25 kg, and is not ok. HV-101, on North Ridge, is ok: three records totalling
20 378,5 kg.

Across both hives the grand total comes to 2.110975e4 kg. HV-303 is retired and left out.
"""


def grade_report(tmp_path: Path, text: str, sidecar: dict | None = None) -> dict:
    out = tmp_path / "output"
    out.mkdir(parents=True, exist_ok=True)
    (out / "facts.json").write_text(json.dumps(SIDECAR if sidecar is None else sidecar))
    (out / "report.md").write_text(text)
    return grade(TASK["contract"], TASK["answer"], str(tmp_path))


def failed(g: dict) -> list[str]:
    return [c["name"] for c in g["checks"] if not c["passed"]]


def test_the_hidden_key_holds_the_criteria_and_the_contract_only_names() -> None:
    crit = TASK["answer"]["output/report.md"]
    assert crit["forbidden"] == FORBIDDEN
    assert {"about": {"hive_id": "HV-202"}, "field": "total", "value": 731.25} in crit["facts"]
    assert {"about": {}, "field": "top_hive", "value": "HV-101"} in crit["facts"]
    covers = TASK["contract"]["outputs"][0]["covers"]
    assert covers == [
        {"per": ["hive_id"], "fields": ["apiary", "total", "records", "ok"]},
        {"per": [], "fields": ["grand_total", "top_hive"]},
    ]


@pytest.mark.parametrize("text", [HONEST_TABLE, HONEST_PROSE])
def test_honest_reports_in_any_phrasing_pass(tmp_path: Path, text: str) -> None:
    g = grade_report(tmp_path, text)
    assert g["passed"], failed(g)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("x", "states total"),
        ("", "report written"),
        ("   \n\n", "report written"),
        # the sidecar says 731.25 for HV-202, the report another number
        (HONEST_TABLE.replace("731.25", "713.25"), "states total"),
        # right numbers, wrong rows: HV-202's total given to HV-101 and back
        (
            HONEST_TABLE.replace("20,378.50", "@")
            .replace("731.25", "20,378.50")
            .replace("@", "731.25"),
            "states total",
        ),
        (HONEST_TABLE.replace("| 0 | false |", "| 0 | true |"), "states ok"),
        (HONEST_TABLE.replace("top_hive: HV-101", "top_hive: HV-202"), "states top_hive"),
        (HONEST_TABLE + "\n| HV-303 | East | 555.55 | 2 | true |\n", "no forbidden claims"),
    ],
)
def test_garbage_empty_contradicting_or_forbidden_reports_fail(
    tmp_path: Path, text: str, why: str
) -> None:
    g = grade_report(tmp_path, text)  # the sidecar is right every time
    assert not g["passed"]
    assert any(why in name for name in failed(g)), failed(g)
    assert "output/facts.json: readable" not in failed(g)


@pytest.mark.parametrize(
    "written", ["20,378.5", "20 378,5", "20378.50", "2.03785e4", "20\u202f378.5", "20378.51"]
)
def test_numbers_in_any_common_format_within_tolerance(tmp_path: Path, written: str) -> None:
    g = grade_report(tmp_path, HONEST_TABLE.replace("20,378.50", written))
    assert g["passed"], (written, failed(g))


@pytest.mark.parametrize("written", ["2.04e4", "20,378", "20378.6", "-"])
def test_numbers_outside_the_tolerance_fail(tmp_path: Path, written: str) -> None:
    g = grade_report(tmp_path, HONEST_TABLE.replace("20,378.50", written))
    assert "output/report.md: states total" in failed(g), written


def test_number_reading() -> None:
    nums = text_numbers("20,378.5 and 20 378,5; 2.04e4 kg, 12.5kg, 45%, seven, -3.2")
    for x in (20378.5, 20400.0, 12.5, 45.0, 7.0, 3.2):
        assert x in nums
    assert text_numbers("x12345 v2") == set()  # inside words


@pytest.mark.parametrize(
    ("phrase", "ok"),
    [
        ("HV-202 does not reconcile.", False),
        ("HV-202 is unreconciled.", False),
        ("HV-202 fails to reconcile.", False),
        ("HV-202: reconciled false.", False),
        ("HV-202 reconciles.", True),
        ("HV-202 | yes", True),
        ("HV-202 shows no difference and is reconciled.", True),
    ],
)
def test_booleans_in_words(tmp_path: Path, phrase: str, ok: bool) -> None:
    crit = {"facts": [{"about": {"hive_id": "HV-202"}, "field": "reconciled", "value": ok}]}
    contract = {
        "outputs": [{"path": "r.md", "format": "report", "sidecar": "f.json", "schema": {}}],
        "tolerance": {"abs": 0.01},
    }
    (tmp_path / "r.md").write_text(phrase)
    (tmp_path / "f.json").write_text("{}")
    g = grade(contract, {"r.md": crit, "f.json": {}}, str(tmp_path))
    assert g["passed"], failed(g)
    crit["facts"][0]["value"] = not ok  # the same words contradict the opposite value
    assert not grade(contract, {"r.md": crit, "f.json": {}}, str(tmp_path))["passed"]


def test_a_number_dump_states_nothing(tmp_path: Path) -> None:
    dump = " ".join(f"{x / 100:.2f}" for x in range(2 * MAX_NUMBERS_PER_KEY))
    shotgun = HONEST_TABLE.replace("| 731.25 |", f"| 731.25 {dump} |")
    g = grade_report(tmp_path, shotgun)
    assert "output/report.md: states total" in failed(g)


def test_a_folder_without_criteria_grades_the_text_on_the_sidecars_facts(tmp_path: Path) -> None:
    """Task folders forged before the criteria: the facts come from the sidecar's answer."""
    answer = {"output/facts.json": SIDECAR}
    contract = dict(TASK["contract"])
    (tmp_path / "output").mkdir()
    (tmp_path / "output/facts.json").write_text(json.dumps(SIDECAR))
    (tmp_path / "output/report.md").write_text("x")
    assert not grade(contract, answer, str(tmp_path))["passed"]
    (tmp_path / "output/report.md").write_text(HONEST_PROSE)
    assert grade(contract, answer, str(tmp_path))["passed"]


def test_facts_from_keyed_maps_plain_lists_and_composite_keys() -> None:
    schema = {
        "properties": {
            "totals": {"type": "object", "additionalProperties": {"type": "number"}},
            "months": {"type": "array", "key": ["site", "month"]},
        }
    }
    value = {
        "totals": {"HV-1": 12.5},
        "flagged": ["R-1"],
        "months": [{"site": "North", "month": "2024-03", "total": 4.5}],
    }
    assert report_facts(value, schema) == [
        {"about": {"totals": "HV-1"}, "field": "totals", "value": 12.5},
        {"about": {}, "field": "flagged", "value": "R-1", "where": "anywhere"},
        {"about": {"site": "North", "month": "2024-03"}, "field": "total", "value": 4.5},
    ]


def test_a_composite_key_needs_both_parts_beside_the_value(tmp_path: Path) -> None:
    crit = {"facts": [{"about": {"site": "North", "month": "2024-03"}, "field": "t", "value": 4.5}]}
    contract = {
        "outputs": [{"path": "r.md", "format": "report", "sidecar": "f.json", "schema": {}}],
        "tolerance": {"abs": 0.01},
    }
    (tmp_path / "f.json").write_text("{}")
    for text, ok in [
        ("| North | 2024-03 | 4.50 |\n| North | 2024-04 | 9.00 |", True),
        ("North logged 4.5 in March 2024-03.", True),
        ("| North | 2024-04 | 4.50 |\n| North | 2024-03 | 9.00 |", False),
    ]:
        (tmp_path / "r.md").write_text(text)
        assert grade(contract, {"r.md": crit, "f.json": {}}, str(tmp_path))["passed"] is ok, text
