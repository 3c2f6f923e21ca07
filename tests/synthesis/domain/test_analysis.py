"""AST analysis on hand-written domains in both tool shapes (tests/fixtures/domains/): reads and
writes edge by edge through aliases, helpers, .get chains, locals named like tables, SQL joins,
subqueries, f-string SQL, executemany and executescript; params, returns and errors."""

from __future__ import annotations

from pathlib import Path

from clawloop.synthesis.domain.load import load_domain

FIXTURES = Path(__file__).parents[2] / "fixtures" / "domains"
F, BK, PS, CR = "flights", "bookings", "passengers", "crew"
JSON_FN = {
    "get_flight": ({F}, set()),  # a deepcopy named flight_data, modified: not a write
    "flight_report": ({CR, BK}, set()),  # flight_data is a local dict; .get chain reads crew
    "book": ({F, BK, PS}, {F, BK, PS}),  # alias fl -> f, `-=`; passengers through _util
    "cancel": ({BK}, {BK}),  # the write is in a private helper
    "rename_passenger": ({PS}, {PS}),  # enumerate over a list table, .update on the record
    "purge_cancelled": ({BK}, {BK}),  # .items() unpacking, del
    "dynamic": (set(), set()),  # state[table] with a non-constant key: unknown, skipped
    "add_passenger": ({PS}, {PS}),  # state.get("passengers", []).append(...)
}
R, GU, ST, INV, AU = "rooms", "guests", "stays", "invoices", "audit"
SQLITE_CLS = {
    "guest_stays": ({ST, R, GU}, set()),  # two JOINs
    "check_out": ({ST}, {ST, R, INV}),  # f-string table name; UPDATE ... WHERE IN (SELECT stays)
    "bulk_rates": ({R}, {R}),  # executemany
    "vip_invoices": ({GU, INV, ST}, set()),  # a CTE (not a table), nested subqueries, `+=` SQL
    "housekeeping": ({AU, R}, {AU}),  # executescript: DELETE + INSERT ... SELECT; REPLACE INTO
    "room_by_kind": ({R}, set()),  # "...{}...".format("rooms")
}


def _edges(name: str) -> dict[str, tuple[set[str], set[str]]]:
    d = load_domain(FIXTURES / name)
    return {t.name: (set(t.reads), set(t.writes)) for t in d.tools}


def test_json_function_shape_edge_by_edge():
    assert _edges("json_fn") == JSON_FN


def test_sqlite_class_shape_edge_by_edge():
    assert _edges("sqlite_cls") == SQLITE_CLS


def test_returns_from_dicts_dumps_records_and_rows():
    d = load_domain(FIXTURES / "json_fn")
    # a (copied) record returned: the table's fields, from the state files
    assert set(d.tool("get_flight").returns) == {"code", "origin", "dest", "seats", "status"}
    assert set(d.tool("book").returns) == {"ref", "flight"}  # json.dumps of a dict literal
    assert set(d.tool("flight_report").returns) == {"code", "crew", "bookings"}  # built up
    assert set(d.tool("rename_passenger").returns) == {"email", "name", "miles"}  # list table
    s = load_domain(FIXTURES / "sqlite_cls")
    assert set(s.tool("vip_invoices").returns) == {"id", "amount"}  # dict(row) of a SELECT
    assert set(s.tool("guest_stays").returns) == {"stay", "room", "total"}


def test_errors_returned_and_raised_with_placeholders_kept():
    d = load_domain(FIXTURES / "json_fn")
    assert d.tool("book").errors == ("Error: flight {code} has only {f['seats']} seats",)
    assert d.tool("cancel").errors == ("no booking {ref}",)
    assert d.tool("rename_passenger").errors == ("Error: no passenger {email}",)
    s = load_domain(FIXTURES / "sqlite_cls")
    assert s.tool("vip_invoices").errors == ("Error: no unpaid VIP invoice",)


def test_params_from_schema_and_signature():
    s = load_domain(FIXTURES / "sqlite_cls")
    check_out = {p.name: p for p in s.tool("check_out").params}
    assert (check_out["stay_id"].type, check_out["stay_id"].required) == ("integer", True)
    assert (check_out["paid"].type, check_out["paid"].required) == ("boolean", False)
    assert s.tool("bulk_rates").params[0].enum == ("single", "double", "suite")
    assert s.tool("room_by_kind").shape == "function"  # both shapes in one file
    d = load_domain(FIXTURES / "json_fn")
    book = {p.name: p for p in d.tool("book").params}
    assert [p.name for p in d.tool("book").params] == ["code", "email", "seats"]
    assert (book["seats"].type, book["seats"].required) == ("integer", False)
    assert book["email"].description == "passenger email."
    assert d.tool("book").schema["function"]["parameters"]["required"] == ["code", "email"]
    assert d.tool("cancel").description == "Cancel a booking through a helper."
