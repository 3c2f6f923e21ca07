"""End-state predicates: two different correct solutions pass; wrong, over-reaching and lazy
ones fail. Pure (no domain code runs): the states are written by hand, graded by the grader."""

from __future__ import annotations

import json
from pathlib import Path

from clawloop.harness.taskfolder.grader import grade
from clawloop.harness.taskfolder.probes import state_probes
from clawloop.synthesis.domain.predicates import diff, predicates

KEYS = {"hives": "code", "orders": "code"}
HIVES = {
    "h1": {"code": "HV-0001", "status": "active", "apiary": "AP-01"},
    "h2": {"code": "HV-0002", "status": "active", "apiary": "AP-02"},
    "h3": {"code": "HV-0003", "status": "retired", "apiary": "AP-02"},
}
ORDERS = [{"code": "ORD-0001", "buyer": "a@x.example", "kg": 2.0, "total": 24.0}]
CONTRACT = {
    "outputs": [{"path": "state", "format": "state", "schema": {"store": "json"}}],
    "tolerance": {"abs": 0.01, "rel": 0.0},
}


def records(hives: dict, orders: list) -> dict[str, list]:
    return {"hives": [dict(v, _key=k) for k, v in hives.items()], "orders": list(orders)}


def reference() -> tuple[dict, dict]:
    """The reference run quarantined HV-0001 and placed an order whose code the tool assigned."""
    hives = json.loads(json.dumps(HIVES))
    hives["h1"]["status"] = "quarantined"
    new = {"code": "ORD-0002", "buyer": "b@x.example", "kg": 3.0, "total": 36.0}
    return hives, [*ORDERS, new]


def answer() -> dict:
    initial = records(HIVES, ORDERS)
    final = records(*reference())
    changes = diff(initial, final, KEYS)
    given = ["HV-0001", "quarantined", "b@x.example", 3.0]
    return {"state": {"predicates": predicates(initial, final, changes, given, KEYS)}}


def workspace(tmp: Path, hives: dict | list, orders: list) -> str:
    (tmp / "state").mkdir(parents=True)
    (tmp / "state" / "hives.json").write_text(json.dumps(hives))
    (tmp / "state" / "orders.json").write_text(json.dumps(orders))
    return str(tmp)


def test_the_reference_end_state_passes(tmp_path):
    result = grade(CONTRACT, answer(), workspace(tmp_path, *reference()))
    assert result["passed"], [c for c in result["checks"] if not c["passed"]]


def test_another_correct_solution_passes_records_reordered_and_another_assigned_id(tmp_path):
    hives, orders = reference()
    reordered = dict(reversed(list(hives.items())))
    other = [dict(orders[1], code="ORD-0107"), orders[0]]  # a different tool run, another id
    result = grade(CONTRACT, answer(), workspace(tmp_path, reordered, other))
    assert result["passed"], [c for c in result["checks"] if not c["passed"]]


def test_a_wrong_value_fails(tmp_path):
    hives, orders = reference()
    hives["h1"]["status"] = "retired"
    result = grade(CONTRACT, answer(), workspace(tmp_path, hives, orders))
    failed = [c["name"] for c in result["checks"] if not c["passed"]]
    assert not result["passed"] and any("status" in n for n in failed)


def test_over_reaching_fails_the_guard(tmp_path):
    hives, orders = reference()
    hives["h2"]["status"] = "quarantined"  # modify everything: also a hive nobody asked about
    result = grade(CONTRACT, answer(), workspace(tmp_path, hives, orders))
    failed = [c for c in result["checks"] if not c["passed"]]
    assert not result["passed"]
    assert any("HV-0002" in c["detail"] for c in failed), failed


def test_an_extra_record_and_a_missing_order_fail(tmp_path):
    hives, orders = reference()
    extra = [*orders, dict(orders[1], code="ORD-0003")]
    assert not grade(CONTRACT, answer(), workspace(tmp_path / "a", hives, extra))["passed"]
    assert not grade(CONTRACT, answer(), workspace(tmp_path / "b", hives, ORDERS))["passed"]


def test_the_state_probes_fail_and_the_untouched_state_fails(tmp_path):
    files = {
        "state/hives.json": json.dumps(HIVES),
        "state/orders.json": json.dumps(ORDERS),
    }
    probes = state_probes(CONTRACT["outputs"][0], files)
    assert set(probes) == {"state_delete_all", "state_touch_all"}
    for name, probe in probes.items():
        ws = tmp_path / name
        for rel, text in probe.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
        assert not grade(CONTRACT, answer(), str(ws))["passed"], name
    untouched = grade(CONTRACT, answer(), workspace(tmp_path / "noop", HIVES, ORDERS))
    assert not untouched["passed"]


def test_an_unreadable_snapshot_fails_every_predicate_without_crashing(tmp_path):
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "hives.json").write_text("{not json")
    result = grade(CONTRACT, answer(), str(tmp_path))
    assert result["reward"] == 0.0 and result["checks"]
