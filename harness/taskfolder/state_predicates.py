"""End-state predicates: how a domain-grounded task's final database state is graded.

STANDARD LIBRARY ONLY: forge copies this file beside grader.py into every task's tests/, and the
grader calls `grade_state` for an output of format "state". The output names the snapshot:

    {"path": "state", "format": "state", "schema": {"store": "json"}}                 # <table>.json
    {"path": "state", "format": "state", "schema": {"store": "sqlite", "file": "x.sql"}}  # a dump

and the answer key holds {"predicates": [...]}, each one a check over the final state that locates
records by business key or by field values, never by an internal id a tool assigns:

    {"kind": "field", "table": T, "match": {F: V}, "field": F2, "value": V2}
        exactly one record of T matches; its F2 equals V2 (numbers within the tolerance)
    {"kind": "count", "table": T, "match": {F: V, ...}, "count": N}
        N records of T match every pair (1: the record exists, 0: it is absent)
    {"kind": "count", ..., "fields": {F: KIND, ...}}
        (a created record) only records with exactly these fields, each of this JSON kind
        (null, boolean, number, string, array, object), count as matching
    {"kind": "unchanged", "table": T, "key": F, "digests": {KEY: DIGEST, ...}, "total": N}
        the guard: every record the task leaves alone (located by F; KEY is its value of F as
        key_ident writes it) is still exactly as it was (its record_digest), and T holds N
        records, so "modify everything" or "delete everything" cannot pass; a failure names the
        records by KEY. With "key": null (no unique field) "digests" is a list: each must be
        the digest of some record. (An older answer key lists the records themselves,
        "records": [...]: compared field by field, under the tolerance.)
    {"kind": "rest", "table": T, "match": {F: V}, "fields": [F, ...], "values": {F2: V2, ...}}
        a record the task changes: exactly one matches, it has exactly these fields, and every
        field the task does not change holds its starting value
    {"kind": "tables", "tables": [T, ...]}
        the state holds exactly these tables: none appears, none disappears
    {"kind": "schema", "schema": [[type, name, sql], ...]}
        (sqlite) the dump's schema (tables, columns, constraints, indexes, triggers, views)
        equals the starting one, comments and spacing aside

Values compare by JSON kind first (a number stays a number: "12.15" is not 12.15), then under
the task's tolerance; a guard's digests compare the untouched records exactly (numbers to 12
significant digits, 2.0 and 2 alike: what survives a JSON or SQL round trip).

The workspace is hostile: the state is read with the grader's capped, in-workspace reads, and a
snapshot that does not load fails every predicate with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from typing import Any

MAX_LISTED = 5  # differing records named in a failed guard's detail
DIGEST_CHARS = 16  # hex digits of sha256 kept per record: 64 bits, no accidental collision
MAX_SQL_STEPS = 200_000  # x 1000 sqlite VM steps a snapshot may take to load (a count: no clock)


def load_records(read: Any, workspace: str, path: str, schema: dict[str, Any]) -> dict[str, list]:
    """{table: [record]} from the snapshot at `path`; `read(workspace, rel)` is the grader's safe
    reader. Raises ValueError when the snapshot cannot be read."""
    return load_snapshot(read, workspace, path, schema)[0]


def load_snapshot(
    read: Any, workspace: str, path: str, schema: dict[str, Any]
) -> tuple[dict[str, list], list | None]:
    """({table: [record]}, the SQL schema or None for a json store): load_records plus what a
    "schema" predicate compares."""
    if schema.get("store") == "sqlite":
        text = read(workspace, f"{path}/{schema.get('file', '')}")
        conn = sqlite3.connect(":memory:")
        conn.set_authorizer(_in_memory_only)
        steps = [0]

        def budget() -> int:  # a query that runs on inside sqlite's C code is stopped too
            steps[0] += 1
            return int(steps[0] > MAX_SQL_STEPS)

        conn.set_progress_handler(budget, 1000)
        try:
            conn.executescript(text)
        except sqlite3.Error as exc:
            raise ValueError(f"{path}: the SQL snapshot does not load: {exc}") from None
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        out = {}
        for name in names:
            cur = conn.execute(f'SELECT * FROM "{name}"')
            cols = [c[0] for c in cur.description]
            out[name] = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        return out, sql_schema(conn)
    if not path or os.path.isabs(path) or ".." in path.replace("\\", "/").split("/"):
        raise ValueError(f"{path}: not a folder inside the workspace")
    root = os.path.join(os.path.realpath(workspace), path)
    out = {}
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if not name.endswith(".json"):
            continue
        data = json.loads(read(workspace, f"{path}/{name}"))
        if isinstance(data, dict):
            data = [
                dict(v, _key=k) if isinstance(v, dict) else {"_key": k, "value": v}
                for k, v in data.items()
            ]
        out[name[: -len(".json")]] = data if isinstance(data, list) else []
    return out, None


def sql_schema(conn: sqlite3.Connection) -> list[list[str]]:
    """[type, name, sql] of every table, index, trigger and view (sqlite's own aside), its SQL
    without comments or spacing differences, sorted: what a "schema" predicate compares."""
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
        "AND sql IS NOT NULL"
    ).fetchall()
    return sorted([str(t), str(n), normal_sql(str(q))] for t, n, q in rows)


def schema_of_dump(text: str) -> list[list[str]]:
    """The schema of an SQL dump (a sqlite domain's starting snapshot), as sql_schema gives it."""
    conn = sqlite3.connect(":memory:")
    conn.set_authorizer(_in_memory_only)
    try:
        conn.executescript(text)
        return sql_schema(conn)
    finally:
        conn.close()


def normal_sql(sql: str) -> str:
    """`sql` with its comments dropped and runs of whitespace made one space (quoted text kept
    as written), so a dump written by another sqlite, or re-indented, compares equal."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`[":
            close = "]" if c == "[" else c
            j = sql.find(close, i + 1)
            j = n - 1 if j < 0 else j
            out.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        else:
            out.append(" " if c.isspace() else c)
            i += 1
    text = " ".join("".join(out).split())
    for a, b in (("( ", "("), (" )", ")"), (" ,", ",")):
        text = text.replace(a, b)
    return text


# What a dump may not use: virtual tables (their modules are sqlite's attack surface) and the
# functions that reach files, extensions or raw pointers (fts3_tokenizer).
_DENIED_ACTIONS = frozenset(
    getattr(sqlite3, name)
    for name in ("SQLITE_ATTACH", "SQLITE_DETACH", "SQLITE_CREATE_VTABLE", "SQLITE_DROP_VTABLE")
    if hasattr(sqlite3, name)
)
_DENIED_FUNCTIONS = frozenset(
    ("fts3_tokenizer", "load_extension", "readfile", "writefile", "edit", "zipfile")
)


def _in_memory_only(action: int, arg1: Any = None, arg2: Any = None, *args: Any) -> int:
    """A dump may not reach outside its in-memory database: no ATTACH (nor VACUUM INTO, which
    attaches; both write files), no virtual table, no function of _DENIED_FUNCTIONS, and no
    PRAGMA but the foreign_keys one `.dump` writes (others, like hard_heap_limit, outlive the
    connection)."""
    if action in _DENIED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and str(arg1).lower() != "foreign_keys":
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def kind_of(v: Any) -> str:
    """A value's JSON kind: what the tools write, which a correct end state keeps."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list | tuple):
        return "array"
    return "object" if isinstance(v, dict) else type(v).__name__


def _same_kind(e: Any, g: Any, depth: int = 0) -> bool:
    """Same JSON kind all the way down (a list's items, an object's values)."""
    if depth > 50 or kind_of(e) != kind_of(g):
        return False
    if isinstance(e, list | tuple):
        return len(e) == len(g) and all(
            _same_kind(a, b, depth + 1) for a, b in zip(e, g, strict=True)
        )
    if isinstance(e, dict):
        return set(e) == set(g) and all(_same_kind(v, g[k], depth + 1) for k, v in e.items())
    return True


def typed(equal: Any) -> Any:
    """`equal` that first asks for the same JSON kind: the grader's values_equal reads a CSV
    cell's text as its value ("12.15" equals 12.15), which a state must not."""
    return lambda e, g: _same_kind(e, g) and equal(e, g)


def _matches(record: Any, match: dict[str, Any], equal: Any) -> bool:
    return isinstance(record, dict) and all(
        k in record and equal(v, record[k]) for k, v in match.items()
    )


def _shaped(record: dict[str, Any], fields: dict[str, str] | None) -> bool:
    """A created record has exactly the fields the tools write, each of the kind they write."""
    if fields is None:
        return True
    return set(record) == set(fields) and all(kind_of(record[f]) == k for f, k in fields.items())


def _where(p: dict[str, Any]) -> str:
    pairs = ", ".join(f"{k}={v!r}" for k, v in p.get("match", {}).items())
    return f"{p['table']}[{pairs}]"


def check_predicate(
    p: dict[str, Any], tables: dict[str, list], equal: Any, schema: list | None = None
) -> tuple[bool, str]:
    """(passed, detail) of one predicate on a state; `schema` is the snapshot's SQL schema
    (load_snapshot), None for a json store."""
    kind = p.get("kind")
    equal = typed(equal)
    if kind == "tables":
        want, got = set(p.get("tables", [])), set(tables)
        if want == got:
            return True, f"the {len(want)} tables, no other"
        extra, gone = sorted(got - want), sorted(want - got)
        parts = ([f"tables that must not exist: {extra}"] if extra else []) + (
            [f"tables missing: {gone}"] if gone else []
        )
        return False, "; ".join(parts)
    if kind == "schema":
        if schema is None:
            return False, "the snapshot has no SQL schema to compare"
        want_s = {tuple(x) for x in p.get("schema", [])}
        got_s = {tuple(x) for x in schema}
        if want_s == got_s:
            return True, f"the schema is the starting one ({len(want_s)} objects)"
        changed = sorted({x[1] for x in want_s ^ got_s})
        return False, f"the schema differs from the starting one at: {changed[:MAX_LISTED]}"
    rows = tables.get(p["table"])
    if rows is None:
        return False, f"table {p['table']!r} is missing from the state"
    if kind in ("field", "count", "rest"):
        fields = p.get("fields") if kind == "count" else None
        found = [r for r in rows if _matches(r, p.get("match", {}), equal) and _shaped(r, fields)]
        if kind == "count":
            n = int(p["count"])
            return len(found) == n, f"{len(found)} matching record(s), expected {n}"
        if len(found) != 1:
            return False, f"{len(found)} records match, expected exactly 1"
        if kind == "rest":
            return _rest(p, found[0], equal)
        got = found[0].get(p["field"], "<absent>")
        ok = equal(p["value"], got)
        return ok, "match" if ok else f"expected {p['value']!r}, got {got!r}"
    if kind == "unchanged":
        if "records" in p:  # an answer key written before digests: the records themselves
            return _unchanged_records(p, rows, equal)
        return _unchanged_digests(p, rows)
    return False, f"unknown predicate kind {kind!r}"


def canonical(v: Any, depth: int = 0) -> Any:
    """`v` as a record digest sees it: a float that is whole is that int (a JSON or SQL round
    trip may spell 2.0 as 2), other floats to 12 significant digits; a boolean stays a boolean
    (true is not 1), a string stays a string ("12.15" is not 12.15)."""
    if depth > 50:
        return str(v)
    if isinstance(v, bool) or v is None or isinstance(v, str | int):
        return v
    if isinstance(v, float):
        if v.is_integer():
            return int(v)
        return float(f"{v:.12g}")
    if isinstance(v, list | tuple):
        return [canonical(x, depth + 1) for x in v]
    if isinstance(v, dict):
        return {str(k): canonical(x, depth + 1) for k, x in v.items()}
    return str(v)


def record_digest(record: Any) -> str:
    """A record's fingerprint: sha256 of its canonical JSON (keys sorted), DIGEST_CHARS hex."""
    text = json.dumps(canonical(record), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def key_ident(value: Any) -> str:
    """How a guard keys a record: its locating field's value as JSON (keys sorted)."""
    return json.dumps(value, sort_keys=True, default=str)


def _key_name(ident: str) -> str:
    try:
        v = json.loads(ident)
    except ValueError:
        return ident
    return v if isinstance(v, str) else ident


def _unchanged_digests(p: dict[str, Any], rows: list) -> tuple[bool, str]:
    key, want = p.get("key"), p.get("digests") or {}
    records = [r for r in rows if isinstance(r, dict)]
    if key is None or isinstance(want, list):  # no unique field: an equal record must be there
        have = {record_digest(r) for r in records}
        lost = [d for d in want if d not in have]
        differ = [f"a record of digest {d} (no unique field names it)" for d in lost]
    else:
        index: dict[str, list] = {}
        for r in records:
            index.setdefault(key_ident(r.get(key)), []).append(r)
        differ = []
        for ident, digest in want.items():
            got = index.get(ident, [])
            if len(got) != 1 or record_digest(got[0]) != digest:
                why = "missing" if not got else "duplicated" if len(got) > 1 else "changed"
                differ.append(f"{key}={_key_name(ident)} ({why})")
    return _guard_result(differ, len(rows), p, len(want))


def _unchanged_records(p: dict[str, Any], rows: list, equal: Any) -> tuple[bool, str]:
    key = p.get("key")
    index: dict[str, list] = {}
    for r in rows:
        if isinstance(r, dict):
            index.setdefault(json.dumps(r.get(key), sort_keys=True), []).append(r)
    differ = []
    for want in p["records"]:
        if key is None:  # no unique field: an equal record must be there
            if not any(_same(want, r, equal) for r in rows if isinstance(r, dict)):
                differ.append(json.dumps(want, sort_keys=True)[:60])
            continue
        got = index.get(json.dumps(want.get(key), sort_keys=True), [])
        if len(got) != 1 or not _same(want, got[0], equal):
            differ.append(str(want.get(key)))
    return _guard_result(differ, len(rows), p, len(p["records"]))


def _guard_result(differ: list[str], total: int, p: dict[str, Any], n: int) -> tuple[bool, str]:
    if differ:
        named = ", ".join(differ[:MAX_LISTED]) + ("..." if len(differ) > MAX_LISTED else "")
        return False, f"{len(differ)} record(s) that must stay as they were changed: {named}"
    if total != int(p["total"]):
        return False, f"{total} records, expected {p['total']} (records added or removed)"
    return True, f"the other {n} records are unchanged"


def _rest(p: dict[str, Any], record: dict[str, Any], equal: Any) -> tuple[bool, str]:
    """A changed record's fields: exactly the expected ones, the unchanged ones as they were."""
    want = set(p.get("fields", []))
    if set(record) != want:
        extra, gone = sorted(set(record) - want), sorted(want - set(record))
        return False, f"fields added {extra[:MAX_LISTED]}, removed {gone[:MAX_LISTED]}"
    differ = [f for f, v in sorted(p.get("values", {}).items()) if not equal(v, record.get(f))]
    if differ:
        shown = ", ".join(f"{f}={record.get(f)!r}" for f in differ[:MAX_LISTED])
        return False, f"fields the task does not change were changed: {shown}"
    return True, f"its other {len(p.get('values', {}))} fields are unchanged"


def _same(want: dict[str, Any], got: dict[str, Any], equal: Any) -> bool:
    return set(want) == set(got) and all(equal(v, got[k]) for k, v in want.items())


def predicate_name(path: str, p: dict[str, Any]) -> str:
    if p.get("kind") == "field":
        return f"{path}: {_where(p)}.{p['field']}"
    if p.get("kind") == "count":
        return f"{path}: count {_where(p)}"
    if p.get("kind") == "rest":
        return f"{path}: {_where(p)} other fields unchanged"
    if p.get("kind") == "tables":
        return f"{path}: the same tables"
    if p.get("kind") == "schema":
        return f"{path}: the same SQL schema"
    return f"{path}: {p.get('table')} otherwise unchanged"


def grade_state(
    o: dict[str, Any], answer: Any, workspace: str, read: Any, equal: Any
) -> list[tuple[str, bool, str]]:
    """(name, passed, detail) per predicate. `equal(expected, got)` compares two values under
    the task's tolerance (the grader's values_equal)."""
    path = str(o.get("path", ""))
    preds = (answer or {}).get("predicates") or []
    try:
        tables, schema = load_snapshot(read, workspace, path, o.get("schema") or {})
    except Exception as exc:  # unreadable snapshot: every predicate fails with the reason
        why = f"the state does not load: {type(exc).__name__}: {exc}"
        return [(predicate_name(path, p), False, why) for p in preds] or [(path, False, why)]
    if not preds:
        return [(f"{path}: predicates", False, "the answer key holds no predicates")]
    return [(predicate_name(path, p), *check_predicate(p, tables, equal, schema)) for p in preds]
