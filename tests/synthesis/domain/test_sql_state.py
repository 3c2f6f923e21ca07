"""sql.tables_of by statement kind, and state.py's tables, primary keys and business keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.model import DomainError
from clawloop.synthesis.domain.sql import select_columns, tables_of
from clawloop.synthesis.domain.state import business_key, load_tables, primary_key

FIXTURES = Path(__file__).parents[2] / "fixtures" / "domains"


@pytest.mark.parametrize(
    ("sql", "reads", "writes"),
    [
        (
            "SELECT a FROM t JOIN u ON u.id = t.u WHERE t.x IN (SELECT x FROM v)",
            {"t", "u", "v"},
            set(),
        ),
        ("INSERT INTO t (a) VALUES (?)", set(), {"t"}),
        ("INSERT INTO t SELECT * FROM u", {"u"}, {"t"}),
        ("UPDATE t SET a = 1 WHERE id IN (SELECT id FROM u)", {"u"}, {"t"}),
        ("UPDATE t SET a = 1 WHERE id IN (SELECT id FROM t WHERE b)", {"t"}, {"t"}),
        ("DELETE FROM t WHERE x NOT IN (SELECT x FROM u)", {"u"}, {"t"}),
        ("REPLACE INTO t (a) VALUES (1)", set(), {"t"}),
        ("INSERT OR REPLACE INTO t (a) VALUES (1)", set(), {"t"}),
        ("WITH c AS (SELECT * FROM a) SELECT * FROM c", {"a"}, set()),
        ("CREATE TABLE n (a INT); DROP TABLE o", set(), {"n", "o"}),
        ("SELECT FROM WHERE", set(), set()),  # does not parse: nothing guessed
    ],
)
def test_tables_of(sql, reads, writes):
    assert tables_of(sql) == (reads, writes)


def test_select_columns():
    assert select_columns("SELECT a, b AS c, t.* FROM t") == ["a", "c", "t.*"]
    assert select_columns("UPDATE t SET a = 1") is None


def test_json_tables_keep_the_key_and_find_the_primary_key(tmp_path):
    d = load_domain(FIXTURES / "json_fn")
    tables = load_tables(d)
    assert [r["code"] for r in tables["flights"]] == ["TA100", "TA200"]
    assert primary_key(d, "flights") == "code"  # the field equal to the object's key
    # crew records lack their key: it is kept under _key
    assert tables["crew"] == [{"_key": "C1", "name": "Kari", "role": "captain", "flight": "TA100"}]
    assert primary_key(d, "crew") == "_key"
    assert primary_key(d, "passengers") == "email"  # a list: the first unique field
    assert business_key(d, "bookings") == "ref"  # declared
    assert business_key(d, "flights") == "code"  # the primary key
    with pytest.raises(DomainError, match="no table 'nope'"):
        primary_key(d, "nope")


def test_sqlite_tables_rows_and_keys():
    d = load_domain(FIXTURES / "sqlite_cls")
    tables = load_tables(d)
    assert set(tables) == {"rooms", "guests", "stays", "invoices", "audit"}
    assert tables["guests"][1] == {"id": 2, "email": "bo@x.example", "name": "Bo", "vip": 1}
    assert (primary_key(d, "rooms"), primary_key(d, "guests")) == ("number", "id")
    assert business_key(d, "guests") == "email"


def test_a_list_table_without_a_unique_field_has_no_primary_key(tmp_path):
    root = tmp_path / "d"
    (root / "state").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "state" / "log.json").write_text(json.dumps([{"v": 1}, {"v": 1}]))
    (root / "domain.toml").write_text('[domain]\nname="d"\n[state]\nformat="json"\npath="state"\n')
    (root / "tools" / "t.py").write_text("def read(state):\n    return state['log']\n")
    d = load_domain(root)
    with pytest.raises(DomainError, match="no field is unique"):
        primary_key(d, "log")


@pytest.mark.parametrize(
    ("code", "local", "rendered", "sql"),
    [
        ('"SELECT a " "FROM t"', {}, "SELECT a FROM t", "SELECT a FROM t"),  # implicit concat
        (
            'f"UPDATE t SET {sets} WHERE id = ?"',
            {},
            "UPDATE t SET {sets} WHERE id = ?",
            "UPDATE t SET 1 WHERE id = ?",
        ),
        ('f"SELECT * FROM {T}"', {}, "SELECT * FROM rooms", "SELECT * FROM rooms"),  # a constant
        (
            '"DELETE FROM {} WHERE a".format(T)',
            {},
            "DELETE FROM rooms WHERE a",
            "DELETE FROM rooms WHERE a",
        ),
        (
            '" ".join(["SELECT a FROM t", "WHERE", cond])',
            {},
            "SELECT a FROM t WHERE {cond}",
            "SELECT a FROM t WHERE 1",
        ),
        ('"Error: no " + name', {}, "Error: no {name}", None),
        ("q", {"q": {("SELECT 1 FROM u",)}}, "SELECT 1 FROM u", "SELECT 1 FROM u"),
        ('f"{q}"', {}, "{q}", None),  # nothing but a placeholder: not a statement
    ],
)
def test_strings_the_code_builds(code, local, rendered, sql):
    import ast

    from clawloop.synthesis.domain.literals import render, sql_text, strings_of

    (value,) = strings_of(ast.parse(code, mode="eval").body, local, {"T": "rooms"})
    assert render(value) == rendered
    assert sql_text(value) == sql
