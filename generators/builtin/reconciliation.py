"""Reconciliation skeleton: sum an event ledger per entity and check it against a reported statement.

Rendered after the prelude (generators/library.py); the import below is for linters only.
"""

from clawloop.generators.builtin._outputs import *  # noqa: F403
from clawloop.generators.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _ledger_path():
    return f"data/{V['event']}_ledger.csv"


def _statement_path():
    return f"data/{V['entities']}_statement.csv"


def _spec():
    ic, gc = id_col(), group_col()
    return result_spec(
        "reconciliation",
        V["entities"],
        [ic, gc, "ledger_total", "reported_total", "difference", "reconciled"],
        {
            ic: "string",
            gc: "string",
            "ledger_total": "number",
            "reported_total": "number",
            "difference": "number",
            "reconciled": "boolean",
        },
        [ic],
        {"entities_checked": "integer", "unreconciled": "integer", "net_difference": "number"},
        f"Reconciliation of {V['measure'].replace('_', ' ')} for {ent_noun(True)}",
    )


def _compute(reg, ledger, statement):
    """Pure core shared by build (on the truth) and solve (on the cleaned files)."""
    ic, scope = id_col(), in_scope(reg)
    totals = {k: 0.0 for k in scope}
    for r in ledger:
        if r[ic] in scope and r[V["measure"]] is not None:
            totals[r[ic]] += r[V["measure"]]
    reported = {r[ic]: r["reported_total"] for r in statement if r[ic] in scope}
    rows = []
    for k in sorted(scope):
        led, rep = totals[k], reported[k]
        ok = rnd(led, 2) == rnd(rep, 2)
        rows.append(
            {
                ic: k,
                group_col(): scope[k]["group"],
                "ledger_total": rnd(led, 2),
                "reported_total": rnd(rep, 2),
                "difference": rnd(rep - led, 2),
                "reconciled": ok,
            }
        )
    summary = {
        "entities_checked": len(rows),
        "unreconciled": sum(not r["reconciled"] for r in rows),
        "net_difference": rnd(sum(reported[k] - totals[k] for k in scope), 2),
    }
    return rows, summary


def build(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    ic, m, dc = id_col(), V["measure"], date_col()
    year = rng.choice([2022, 2023, 2024])
    ledger = []
    for e in world["entities"]:
        for _ in range(rng.randint(3, 6)):
            ledger.append({ic: e["id"], dc: iso_date(rng, year), m: reading(rng=rng)})
    ledger.sort(key=lambda r: (r[dc], r[ic]))
    blank_some(rng, ledger, m, ic)
    truth = {e["id"]: 0.0 for e in world["entities"]}
    for r in ledger:
        if r[m] is not None:
            truth[r[ic]] += r[m]
    ids = sorted(truth)
    live = [k for k in ids if world_registry(world)[k]["status"] != V["excluded_status"]]
    wrong = set(rng.sample(live, rng.randint(2, max(2, len(live) // 3))))
    statement = []
    for k in ids:
        off = 0.0
        if k in wrong:
            mag = max(
                10 ** -V["decimals"],
                rnd((V["high"] - V["low"]) * rng.uniform(0.05, 0.3), V["decimals"]),
            )
            off = mag if rng.random() < 0.5 else -mag
        statement.append({ic: k, "reported_total": rnd(truth[k] + off, V["decimals"])})
    files = registry_files(rng, world)
    files.update(emit_table(rng, _ledger_path(), ledger, [ic, dc, m], [m], ids))
    files.update(
        emit_table(
            rng, _statement_path(), statement, [ic, "reported_total"], ["reported_total"], ids
        )
    )
    rows, summary = _compute(world_registry(world), ledger, statement)
    spec = _spec()
    intro = (
        f"These are {V['title']} files. {_ledger_path()} is the {V['event'].replace('_', ' ')} ledger: one row per "
        f"{V['event'].replace('_', ' ')} with the {V['measure'].replace('_', ' ')} in {V['unit']}. "
        f"{_statement_path()} holds the total each {ent_noun()} reported for the same period. Reconcile them: for "
        f"every {ent_noun()} in scope give its {group_col().replace('_', ' ')}, the ledger total, the reported "
        "total, the difference and whether they reconcile"
        f"{plus_summary(', plus a summary')}."
    )
    decisions = (
        registry_decisions()
        + table_decisions(_ledger_path(), [ic, dc, m], [m], V["event"])
        + table_decisions(
            _statement_path(),
            [ic, "reported_total"],
            ["reported_total"],
            "statement",
            missing=False,
        )
        + [
            f"ledger_total is the sum of the {m} values of the {ent_noun()}'s ledger rows; an in-scope {ent_noun()} "
            "with no usable ledger rows has a ledger_total of zero.",
            "difference = reported_total - ledger_total (positive when more was reported than logged).",
            "reconciled is true when reported_total and ledger_total are equal after rounding each to two decimals.",
            summary_rule(
                "entities_checked counts the in-scope rows; unreconciled counts rows with reconciled "
                "false; net_difference is the sum of the differences."
            ),
            f"One row per in-scope {ent_noun()}, keyed by {ic}.",
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), ledger, statement)
    return finish(intro, files, spec, rows, summary, decisions, naive)


def solve(workspace):
    ic, m, dc = id_col(), V["measure"], date_col()
    reg = load_registry(workspace)
    ledger = read_table(workspace, _ledger_path(), [ic, dc, m], [m])
    statement = read_table(workspace, _statement_path(), [ic, "reported_total"], ["reported_total"])
    rows, summary = _compute(reg, ledger, statement)
    write_result(workspace, _spec(), rows, summary)
