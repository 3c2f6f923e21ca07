"""A found fix's other valid fixes, and a grade that accepts every one of them (issue 36).

A recovery whose fix the agent finds from the refusal (ground.found_fix: the instruction names
neither the fix nor its record) leaves the fix to the agent, and the domain may offer more than
one: a gift card another pending order holds is freed by cancelling that order, or by paying it
with another method. Tests written from the reference run alone would demand the reference's
fix (the order cancelled, for that reason) and fail good work.

The rule: the task's goal is the end state the refused call's success leaves, so the grade
accepts the end state of every fix that lets the refused call through. Those fixes are found by
execution: every write tool, on every record that holds the refused call's value (where the
refusal's cause sits), with the values the state offers, in place of the reference's fix; a
plan that then runs as the reference did (each step accepted or refused as expected) is one
(`candidates`). The tests are the reference's, less each check one of those end states fails
(`accept_all`): the refused call's own effect and every record no valid fix touches stay
checked exactly (a guard's records are only dropped one by one), and a record a valid fix may
change keeps each field that every valid end state leaves alike. So doing nothing fails (the
refused call's effect is missing), and so does damage: a record that no fix letting the call
through changes is still guarded (cancelling every pending order changes orders that hold
nothing of the call's).

Limits: a fix is one call (two calls that together free the cause are not tried), and a fix that
adds or removes records is not taken as an alternative (the guard's record count stays).
"""

from __future__ import annotations

import json
import random
from typing import Any

from clawloop.harness.taskfolder.grader import values_equal
from clawloop.harness.taskfolder.state_predicates import check_predicate, key_ident, record_digest
from clawloop.synthesis.domain import reach
from clawloop.synthesis.domain.ground import (
    Grounded,
    Index,
    Step,
    _writes,
    fill,
    key_params,
    mentioned,
)
from clawloop.synthesis.domain.model import Domain
from clawloop.synthesis.domain.predicates import same_value
from clawloop.synthesis.domain.render import TOLERANCE

Tables = dict[str, list[dict[str, Any]]]
DRAWS = 8  # value draws per (write tool, record): a user's payment methods, a reason's enum


def found_steps(g: Grounded) -> list[int]:
    """Plan indices of the fixes marked found (a refused step before, its retry after)."""
    return [
        i + 1
        for i, s in enumerate(g.steps[:-2])
        if s.expect == "error" and g.steps[i + 1].found and g.steps[i + 1].expect == "ok"
    ]


def candidates(
    domain: Domain, tables: Tables, g: Grounded, at: list[int] | None = None
) -> list[tuple[int, list[Step]]]:
    """The reference plan with each other fix in place of a found one (`at`: those plan
    indices, found_steps by default): every write tool on every record holding the refused
    call's value the fix was found by (`Step.found`), not a record the call names, with values
    drawn DRAWS times the wide way (ground.fill); each as (the index replaced, the plan).
    Execution tells which let the call through."""
    ix = Index.of(tables, domain.keys)
    out: list[tuple[int, list[Step]]] = []
    for i in found_steps(g) if at is None else at:
        call, fix, retry = g.steps[i - 1], g.steps[i], g.steps[i + 1]
        keyed = [
            (t, f) for p, t, f in key_params(domain.tool(fix.tool), ix) if p.name in fix.params
        ]
        if not keyed:
            continue
        table, _ = keyed[0]
        named = {id(r) for _, r in mentioned(ix, "", call.params)}
        holders = [r for _, r in reach.holding({table: ix.tables.get(table, [])}, [fix.found])
                   if id(r) not in named]  # fmt: skip
        rng = random.Random(f"{domain.name}:alternatives:{i}")
        seen = [(fix.tool, fix.params), (retry.tool, retry.params)]
        for tool in _writes(domain):
            if not any(t == table for _, t, _ in key_params(tool, ix)):
                continue
            for row in holders:
                for _ in range(DRAWS):
                    params = fill(tool, ix, rng, entity=(table, row), wide=True)
                    if params is None or (tool.name, params) in seen:
                        continue
                    seen.append((tool.name, params))
                    other = Step(tool.name, params, "ok", node=fix.node)
                    out.append((i, [*g.steps[:i], other, *g.steps[i + 1 :]]))
    return out


def _passes(p: dict[str, Any], tables: Tables) -> bool:
    """The grader's check on a run's records (which carry no SQL schema, and no tool changes
    one: the schema check stays as it is)."""

    def equal(e: Any, got: Any) -> bool:
        return values_equal(e, got, TOLERANCE)

    return p.get("kind") == "schema" or check_predicate(p, tables, equal)[0]


def comparable(reference: Tables, final: Tables) -> bool:
    """Does an end state keep the reference's tables and record counts (the guard's totals)?"""
    return set(final) == set(reference) and all(
        len(final[t]) == len(reference[t]) for t in reference
    )


def _find(tables: Tables, table: str, f: str, key: Any) -> dict[str, Any] | None:
    want = key_ident(key)
    rows = [r for r in tables.get(table, []) if key_ident(r.get(f)) == want]
    return rows[0] if len(rows) == 1 else None


def accept_all(
    preds: list[dict[str, Any]], reference: Tables, finals: list[Tables]
) -> list[dict[str, Any]]:
    """The reference's tests less each check one of `finals` (the end states of the other fixes
    that let the refused call through) fails: a guard drops only the records a final changed;
    a changed record's field and rest checks that a final fails go, and each field of that
    record that the reference and every final hold alike is checked instead (as it started:
    `unchanged`, so derivability asks nothing of it). Pure."""
    finals = [f for f in finals if comparable(reference, f)]
    if not finals:
        return preds
    out: list[dict[str, Any]] = []
    freed: dict[str, tuple[str, str, Any]] = {}  # ident -> (table, key field, key)
    for p in preds:
        kind = p.get("kind")
        if kind == "unchanged" and p.get("key") is not None and isinstance(p["digests"], dict):
            differ = set()
            for final in finals:
                index = {key_ident(r.get(p["key"])): r for r in final.get(p["table"], [])}
                differ |= {k for k, d in p["digests"].items()
                           if k not in index or record_digest(index[k]) != d}  # fmt: skip
            if differ:
                p = {**p, "digests": {k: d for k, d in p["digests"].items() if k not in differ}}
                for k in sorted(differ):
                    one = (p["table"], p["key"], json.loads(k))
                    freed[key_ident(one)] = one
            out.append(p)
        elif all(_passes(p, final) for final in finals):
            out.append(p)
        elif kind in ("field", "rest") and len(p.get("match") or {}) == 1:
            ((f, v),) = p["match"].items()
            freed[key_ident((p["table"], f, v))] = (p["table"], f, v)
    checked = {key_ident((p["table"], p["match"], p["field"])) for p in out
               if p.get("kind") == "field"}  # fmt: skip
    for _, (table, f, key) in sorted(freed.items()):
        records = [_find(t, table, f, key) for t in (reference, *finals)]
        first = records[0]
        if first is None or any(r is None for r in records):
            continue
        match = {f: key}
        for name in sorted(first):
            if name == f or key_ident((table, match, name)) in checked:
                continue
            if all(r is not None and name in r and same_value(first[name], r[name])
                   for r in records):  # fmt: skip
                out.append({"kind": "field", "table": table, "match": match, "field": name,
                            "value": first[name], "hidden": [], "unchanged": True})  # fmt: skip
    return out


def chosen(choices: dict[str, Any], fixes: list[Step]) -> dict[str, Any]:
    """The fix values (parameter -> value the reference's fix passed) that every accepted fix
    passes too: one some accepted fix does without (another value, or a tool that takes no such
    parameter) is the agent's choice, so the instruction need not state it."""
    return {k: v for k, v in choices.items()
            if all(k in f.params and same_value(f.params[k], v) for f in fixes)}  # fmt: skip
