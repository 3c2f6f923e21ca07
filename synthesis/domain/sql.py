"""Which tables an SQL statement reads and writes, by parsing it with sqlglot (never regexes).

A sqlite tool's reads and writes are the tables named by the statements it passes to the
connection. The statement kind decides the direction: SELECT (with its JOINs and subqueries)
reads; INSERT / UPDATE / DELETE / REPLACE write their target and read every other table they
name (an INSERT ... SELECT source, a WHERE subquery); CREATE / DROP / ALTER write their table.
CTE names are not tables. A statement sqlglot cannot parse yields nothing (the caller decides
whether that is worth reporting): guessing from text would be the regex this module avoids.
"""

from __future__ import annotations

import logging

import sqlglot
from sqlglot import exp

# sqlglot logs "unsupported syntax, falling back to Command" at WARNING for every odd statement.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

_WRITES = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter)


def _normalise(sql: str) -> str:
    """sqlite's `REPLACE INTO t ...` is `INSERT OR REPLACE INTO t ...`; sqlglot parses the latter."""
    tokens = sqlglot.tokenize(sql, read="sqlite")
    if tokens and tokens[0].text.upper() == "REPLACE":
        start = tokens[0].start
        return sql[:start] + "INSERT OR REPLACE" + sql[tokens[0].end + 1 :]
    return sql


def _parse(sql: str) -> list[exp.Expression]:
    try:
        return [s for s in sqlglot.parse(_normalise(sql), read="sqlite") if s is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return []


def parses(sql: str) -> bool:
    """True when every statement in `sql` parses as something other than an opaque Command."""
    stmts = _parse(sql)
    return bool(stmts) and not any(isinstance(s, exp.Command) for s in stmts)


def _target(stmt: exp.Expression) -> exp.Table | None:
    node = stmt.this
    if isinstance(node, exp.Schema):
        node = node.this
    return node if isinstance(node, exp.Table) else None


def _tables(node: exp.Expression, ctes: set[str]) -> set[str]:
    return {t.name for t in node.find_all(exp.Table) if t.name and t.name not in ctes}


def tables_of(sql: str) -> tuple[set[str], set[str]]:
    """(tables read, tables written) by the statement(s) in `sql`; empty sets when it won't parse."""
    reads: set[str] = set()
    writes: set[str] = set()
    for stmt in _parse(sql):
        if isinstance(stmt, exp.Command):
            continue
        ctes = {c.alias_or_name for c in stmt.find_all(exp.CTE)}
        named = _tables(stmt, ctes)
        if isinstance(stmt, exp.Drop):  # DROP TABLE a, b: its tables, no `this`
            writes |= {t.name for t in stmt.find_all(exp.Table) if t.name}
            continue
        if isinstance(stmt, _WRITES):
            target = _target(stmt)
            if target is None or not target.name:
                continue
            writes.add(target.name)
            others = named - {target.name}
            # UPDATE t ... WHERE x IN (SELECT .. FROM t): the subquery reads t too.
            sub_reads = {
                t.name
                for q in stmt.find_all(exp.Select)
                for t in q.find_all(exp.Table)
                if t.name and t.name not in ctes
            }
            reads |= others | sub_reads
        else:
            reads |= named
    return reads, writes


def select_columns(sql: str) -> list[str] | None:
    """The output column names of a SELECT (`*` kept as "*", `t.*` as "t.*"); None if not one."""
    stmts = _parse(sql)
    if len(stmts) != 1 or not isinstance(stmts[0], exp.Select):
        return None
    out = []
    for sel in stmts[0].expressions:
        if isinstance(sel, exp.Star):
            out.append("*")
        elif isinstance(sel, exp.Column) and isinstance(sel.this, exp.Star):
            out.append(f"{sel.table}.*")
        else:
            out.append(sel.alias_or_name)
    return out


def select_sources(sql: str) -> dict[str, str]:
    """alias (or name) -> table name for the FROM/JOIN tables of a SELECT (to expand `t.*`)."""
    stmts = _parse(sql)
    if len(stmts) != 1 or not isinstance(stmts[0], exp.Select):
        return {}
    return {t.alias_or_name: t.name for t in stmts[0].find_all(exp.Table) if t.name}
