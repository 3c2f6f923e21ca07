"""The two built-in executable domains: they load, and every tool's reads/writes are right edge by
edge (the expected sets are written out from what each tool's code does, not from the analysis)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from clawloop.synthesis.domain.load import builtin_domains, load_domain
from clawloop.synthesis.domain.state import business_key, load_tables, primary_key

A = "apiaries"
B = "buyers"
H = "harvests"
HV = "hives"
IN = "inspections"
OR = "orders"
P = "payments"
APIARY = {  # tool: (reads, writes)
    "get_apiary": ({A, HV}, set()),
    "find_buyers": ({B}, set()),
    "get_buyer": ({B, OR}, set()),
    "record_payment": ({B, P}, {B, P}),  # next PY- code from payments, balance on buyers
    "record_harvest": ({HV, IN, H}, {H}),  # hive status, clean inspection, next batch code
    "record_lab_result": ({H}, {H}),
    "list_batches": ({H}, set()),
    "get_hive": ({HV, IN}, set()),
    "list_hives": ({A, HV}, set()),
    "move_hive": ({HV, A}, {HV}),
    "quarantine_hive": ({HV}, {HV}),
    "lift_quarantine": ({HV, IN}, {HV}),
    "retire_hive": ({HV}, {HV}),
    "record_inspection": ({HV, IN}, {HV, IN}),  # a serious finding quarantines the hive
    "list_inspections": ({HV, IN}, set()),
    "place_order": ({B, H, OR}, {B, H, OR}),
    "cancel_order": ({B, H, OR}, {B, H, OR}),
    "get_order": ({OR}, set()),
}
M, V, L, LN, G = "members", "varieties", "lots", "loans", "germination_tests"
SEEDS = {
    "find_member": ({M}, set()),
    "get_member": ({M, LN}, set()),
    "place_holds": ({M, LN}, {M}),  # SELECT ... JOIN, then executemany UPDATE members
    "reinstate_member": ({M, LN}, {M}),
    "record_training": ({M}, {M}),
    "update_member_contact": ({M}, {M}),  # f-string UPDATE members SET {...}
    "search_varieties": ({V, L}, set()),  # class shape, f-string WHERE, scalar subquery on lots
    "get_lot": ({L, V, G}, set()),
    "list_lots": ({L, V}, set()),
    "checkout_packets": ({M, LN, L, V}, {LN, L}),
    "record_return": ({LN, L}, {LN, L}),  # JOIN lots; saved seed INSERTs a lot
    "extend_loan": ({LN}, {LN}),  # through a cursor
    "list_loans": ({M, LN, L, V}, set()),
    "donate_seeds": ({M, V, L}, {L}),  # next lot code (a helper given the table name) reads lots
    "record_germination_test": ({L, G}, {L, G}),
}


def _domain(name: str):
    (root,) = [p for p in builtin_domains() if p.name == name]
    return load_domain(root)


def test_there_are_two_builtin_domains_one_per_state_format():
    domains = [load_domain(p) for p in builtin_domains()]
    assert sorted(d.state_format for d in domains) == ["json", "sqlite"]
    for d in domains:
        assert len(d.tools) >= 10, d.name
        assert d.policy.strip() and d.description


@pytest.mark.parametrize(("name", "expected"), [("apiary_coop", APIARY), ("seed_library", SEEDS)])
def test_reads_and_writes_edge_by_edge(name, expected):
    d = _domain(name)
    assert {t.name for t in d.tools} == set(expected)
    for tool in d.tools:
        reads, writes = expected[tool.name]
        assert (set(tool.reads), set(tool.writes)) == (reads, writes), tool.name


def test_the_json_domain_mixes_both_tool_shapes():
    d = _domain("apiary_coop")
    shapes = {t.name: t.shape for t in d.tools}
    assert shapes["place_order"] == "class" and shapes["record_harvest"] == "function"
    t = d.tool("place_order")
    assert (t.file, t.symbol) == ("tools/orders.py", "PlaceOrder")
    assert t.schema["function"]["name"] == "place_order"
    assert [(p.name, p.type, p.required) for p in t.params] == [
        ("buyer_email", "string", True),
        ("batch_code", "string", True),
        ("kg", "number", True),
        ("date", "string", True),
    ]


def test_params_types_and_enums_from_signatures():
    d = _domain("apiary_coop")
    params = {p.name: p for p in d.tool("record_inspection").params}
    assert params["brood_frames"].type == "integer" and params["brood_frames"].required
    assert params["queen_seen"].type == "boolean" and not params["queen_seen"].required
    assert "efb" in params["disease"].enum and params["disease"].type == "string"
    assert params["hive_code"].description == "the hive inspected."
    s = _domain("seed_library")
    outcome = next(p for p in s.tool("record_return").params if p.name == "outcome")
    assert outcome.enum == ("grew-and-saved", "grew-no-seed", "failed") and outcome.required


def test_returns_and_policy_errors_come_from_the_code():
    d = _domain("apiary_coop")
    assert set(d.tool("get_order").returns) >= {"code", "buyer", "batch", "kg", "total", "status"}
    assert set(d.tool("list_hives").returns) == {"apiary", "hives", "count"}
    errors = " | ".join(d.tool("place_order").errors)
    assert "on credit hold" in errors and "out of stock" in errors and "not released" in errors
    assert any("quarantined" in e for e in d.tool("move_hive").errors)
    assert any("at capacity" in e for e in d.tool("move_hive").errors)
    s = _domain("seed_library")
    errors = " | ".join(s.tool("checkout_packets").errors)
    for rule in ("quota exceeded", "on hold", "out of stock", "rare variety", "germination test"):
        assert rule in errors
    assert set(s.tool("get_lot").returns) >= {"lot_code", "sku", "status", "common_name"}


def test_state_sizes_and_business_keys():
    for d in (load_domain(p) for p in builtin_domains()):
        tables = load_tables(d)
        total = sum(len(rows) for rows in tables.values())
        assert 100 <= total <= 400, (d.name, total)
        assert set(d.keys) == set(d.tables)  # every table has a declared business key
        for table, rows in tables.items():
            key = business_key(d, table)
            values = [r[key] for r in rows]
            assert len(set(values)) == len(values), (d.name, table)
            assert primary_key(d, table)


def test_the_committed_db_is_what_state_sql_builds(tmp_path: Path):
    root = _domain("seed_library").root
    built = sqlite3.connect(tmp_path / "built.db")
    built.executescript((root / "state.sql").read_text())
    committed = sqlite3.connect(f"file:{root / 'state.db'}?mode=ro", uri=True)
    try:
        assert list(committed.iterdump()) == list(built.iterdump())
    finally:
        built.close()
        committed.close()
