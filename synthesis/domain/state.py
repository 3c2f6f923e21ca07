"""A domain's state as data: tables, their fields, primary and business keys (host side).

This module reads the state files only (the JSON tables, or the sqlite file opened read-only);
it never imports or runs domain code. The choices, so every caller sees the same tables:

- json, an object keyed by primary key: one record per entry, in file order. The primary key
  is the first field whose value equals the entry's key in every record; when no field does,
  the key is kept under `_key` (added to each record) and `_key` is the primary key.
- json, a list of records: records in list order. The primary key is `id` if unique, else the
  first unique `<something>_id` / `<something>_code` field, else the first field unique across
  the records; a table with none has no primary key (DomainError when asked).
- sqlite: every table of sqlite_master (not sqlite_*), rows as dicts in rowid order (or primary
  key order for WITHOUT ROWID tables). The primary key is the declared one (the first column of
  a composite key), else `rowid`.
- The business key is [state.keys] for the table if declared, else the primary key: tests locate
  records by it, so it should be a code people use (HV-0042, an email), not an internal id.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clawloop.synthesis.domain.model import Domain, DomainError

KEY_FIELD = "_key"


@contextmanager
def connect_ro(db: Path) -> Iterator[sqlite3.Connection]:
    """The .db opened read-only and immutable (no journal written beside it), closed after."""
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    finally:
        conn.close()


def read_json_table(path: Path) -> list[dict[str, Any]] | dict[str, Any]:
    """The parsed JSON of one table file: an object keyed by primary key or a list of records."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DomainError(f"{path}: not readable JSON ({exc}); fix the file") from exc
    if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        return data
    if isinstance(data, list) and all(isinstance(v, dict) for v in data):
        return data
    raise DomainError(
        f"{path}: a table must be an object of records keyed by primary key or a list of "
        "records (objects); restructure the file"
    )


def _keyed_field(data: dict[str, Any]) -> str | None:
    """The first field whose value equals the entry's key in every record, if any."""
    if not data:
        return None
    first = next(iter(data.values()))
    for name in first:
        if all(str(rec.get(name)) == str(key) for key, rec in data.items()):
            return name
    return None


def _records_json(data: list[dict[str, Any]] | dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(data, list):
        return [dict(r) for r in data]
    keyed = _keyed_field(data)
    if keyed is not None:
        return [dict(r) for r in data.values()]
    return [{KEY_FIELD: key, **rec} for key, rec in data.items()]


def _sqlite_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows]


def _sqlite_columns(conn: sqlite3.Connection, table: str) -> list[sqlite3.Row]:
    return conn.execute(f'PRAGMA table_info("{table}")').fetchall()


def _sqlite_rows(conn: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    try:
        rows = conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()
    except sqlite3.OperationalError:  # WITHOUT ROWID
        rows = conn.execute(f'SELECT * FROM "{table}" ORDER BY 1').fetchall()
    return [dict(r) for r in rows]


def json_table_paths(folder: Path) -> dict[str, Path]:
    """table name -> file, for the <table>.json files of a json state folder (sorted)."""
    return {p.stem: p for p in sorted(folder.glob("*.json"))}


def table_fields(root: Path, state_format: str, state_path: str) -> dict[str, tuple[str, ...]]:
    """table -> its field names (union over records, first-seen order; sqlite: declared columns)."""
    path = root / state_path
    if state_format == "sqlite":
        try:
            with connect_ro(path) as conn:
                return {
                    t: tuple(c["name"] for c in _sqlite_columns(conn, t))
                    for t in _sqlite_tables(conn)
                }
        except sqlite3.DatabaseError as exc:
            raise DomainError(
                f"{path}: not a readable sqlite database ({exc}); rebuild it"
            ) from exc
    out: dict[str, tuple[str, ...]] = {}
    for table, file in json_table_paths(path).items():
        seen: dict[str, None] = {}
        for rec in _records_json(read_json_table(file)):
            seen.update(dict.fromkeys(rec))
        out[table] = tuple(seen)
    return out


def load_tables(domain: Domain) -> dict[str, list[dict[str, Any]]]:
    """Every table of the domain's state as a list of records (see the module doc for order)."""
    path = domain.root / domain.state_path
    if domain.state_format == "sqlite":
        with connect_ro(path) as conn:
            return {t: _sqlite_rows(conn, t) for t in _sqlite_tables(conn)}
    return {t: _records_json(read_json_table(f)) for t, f in json_table_paths(path).items()}


def _unique(records: list[dict[str, Any]], name: str) -> bool:
    values = [r.get(name) for r in records]
    return None not in values and len({json.dumps(v, sort_keys=True) for v in values}) == len(
        values
    )


def primary_key(domain: Domain, table: str) -> str:
    """The field that identifies a record of `table` (see the module doc for how it is chosen)."""
    if table not in domain.tables:
        raise DomainError(f"{domain.root}: no table {table!r}; tables: {', '.join(domain.tables)}")
    path = domain.root / domain.state_path
    if domain.state_format == "sqlite":
        with connect_ro(path) as conn:
            cols = sorted(
                (c for c in _sqlite_columns(conn, table) if c["pk"]), key=lambda c: c["pk"]
            )
        return cols[0]["name"] if cols else "rowid"
    data = read_json_table(json_table_paths(path)[table])
    if isinstance(data, dict):
        return _keyed_field(data) or KEY_FIELD
    fields = list(dict.fromkeys(name for rec in data for name in rec))
    preferred = (
        [f for f in fields if f == "id"]
        + [f for f in fields if f.endswith(("_id", "_code")) or f == "code"]
        + fields
    )
    for name in preferred:
        if _unique(data, name):
            return name
    raise DomainError(
        f"{path / (table + '.json')}: no field is unique across the records of {table!r}; "
        "give each record an id field"
    )


def business_key(domain: Domain, table: str) -> str:
    """[state.keys] for `table` if declared, else its primary key."""
    return domain.keys.get(table) or primary_key(domain, table)
