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
    {"kind": "unchanged", "table": T, "key": F, "records": [...], "total": N}
        the guard: every listed record (located by F) is still exactly as it was, and T holds N
        records, so "modify everything" or "delete everything" cannot pass

The workspace is hostile: the state is read with the grader's capped, in-workspace reads, and a
snapshot that does not load fails every predicate with the reason.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

MAX_LISTED = 5  # differing records named in a failed guard's detail
MAX_SQL_STEPS = 200_000  # x 1000 sqlite VM steps a snapshot may take to load (a count: no clock)


def load_records(read: Any, workspace: str, path: str, schema: dict[str, Any]) -> dict[str, list]:
    """{table: [record]} from the snapshot at `path`; `read(workspace, rel)` is the grader's safe
    reader. Raises ValueError when the snapshot cannot be read."""
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
        return out
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
    return out


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


def _matches(record: Any, match: dict[str, Any], equal: Any) -> bool:
    return isinstance(record, dict) and all(
        k in record and equal(v, record[k]) for k, v in match.items()
    )


def _where(p: dict[str, Any]) -> str:
    pairs = ", ".join(f"{k}={v!r}" for k, v in p.get("match", {}).items())
    return f"{p['table']}[{pairs}]"


def check_predicate(p: dict[str, Any], tables: dict[str, list], equal: Any) -> tuple[bool, str]:
    rows = tables.get(p["table"])
    if rows is None:
        return False, f"table {p['table']!r} is missing from the state"
    kind = p.get("kind")
    if kind in ("field", "count"):
        found = [r for r in rows if _matches(r, p.get("match", {}), equal)]
        if kind == "count":
            n = int(p["count"])
            return len(found) == n, f"{len(found)} matching record(s), expected {n}"
        if len(found) != 1:
            return False, f"{len(found)} records match, expected exactly 1"
        got = found[0].get(p["field"], "<absent>")
        ok = equal(p["value"], got)
        return ok, "match" if ok else f"expected {p['value']!r}, got {got!r}"
    if kind == "unchanged":
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
        total = len(rows)
        if differ:
            named = ", ".join(differ[:MAX_LISTED]) + ("..." if len(differ) > MAX_LISTED else "")
            return False, f"{len(differ)} record(s) that must stay as they were changed: {named}"
        if total != int(p["total"]):
            return False, f"{total} records, expected {p['total']} (records added or removed)"
        return True, f"the other {len(p['records'])} records are unchanged"
    return False, f"unknown predicate kind {kind!r}"


def _same(want: dict[str, Any], got: dict[str, Any], equal: Any) -> bool:
    return set(want) == set(got) and all(equal(v, got[k]) for k, v in want.items())


def predicate_name(path: str, p: dict[str, Any]) -> str:
    if p.get("kind") == "field":
        return f"{path}: {_where(p)}.{p['field']}"
    if p.get("kind") == "count":
        return f"{path}: count {_where(p)}"
    return f"{path}: {p.get('table')} otherwise unchanged"


def grade_state(
    o: dict[str, Any], answer: Any, workspace: str, read: Any, equal: Any
) -> list[tuple[str, bool, str]]:
    """(name, passed, detail) per predicate. `equal(expected, got)` compares two values under
    the task's tolerance (the grader's values_equal)."""
    path = str(o.get("path", ""))
    preds = (answer or {}).get("predicates") or []
    try:
        tables = load_records(read, workspace, path, o.get("schema") or {})
    except Exception as exc:  # unreadable snapshot: every predicate fails with the reason
        why = f"the state does not load: {type(exc).__name__}: {exc}"
        return [(predicate_name(path, p), False, why) for p in preds] or [(path, False, why)]
    if not preds:
        return [(f"{path}: predicates", False, "the answer key holds no predicates")]
    return [(predicate_name(path, p), *check_predicate(p, tables, equal)) for p in preds]
