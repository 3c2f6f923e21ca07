"""Reconciliation skeleton: sum an event ledger per entity and check it against a reported statement.

Rendered after the prelude (synthesis/library.py); the import below is for linters only.
"""

from clawloop.synthesis.builtin._outputs import *  # noqa: F403
from clawloop.synthesis.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _ledger_path():
    return f"data/{V['event']}_ledger.csv"


def _statement_path():
    return f"data/{V['entities']}_statement.csv"


def _cols():
    """ledger_<w> and reported_<w>: w is the measure's aggregate (total, mean, peak, latest)."""
    return "ledger_" + agg_word(), "reported_" + agg_word()


def _spec():
    ic, gc = id_col(), group_col()
    led, rep = _cols()
    return result_spec(
        "reconciliation",
        V["entities"],
        [ic, gc, led, rep, "difference", "reconciled"],
        {
            ic: "string",
            gc: "string",
            led: "number",
            rep: "number",
            "difference": "number",
            "reconciled": "boolean",
        },
        [ic],
        {"entities_checked": "integer", "unreconciled": "integer", "net_difference": "number"},
        f"Reconciliation of {V['measure'].replace('_', ' ')} for {ent_noun(True)}",
    )


def _per_entity(scope, ledger):
    ic, m, pairs = id_col(), V["measure"], {k: [] for k in scope}
    for r in ledger:
        if r[ic] in scope and r[m] is not None:
            pairs[r[ic]].append((r[date_col()], r[m]))
    return {k: aggregate(v) for k, v in pairs.items()}


def _compute(reg, ledger, statement):
    """Pure core shared by draw (on the truth) and solve (on the cleaned files)."""
    ic, scope = id_col(), in_scope(reg)
    led_c, rep_c = _cols()
    totals = _per_entity(scope, ledger)
    reported = {r[ic]: r[rep_c] for r in statement if r[ic] in scope}
    rows = []
    for k in sorted(scope):
        led, rep = totals[k], reported[k]
        ok = rnd(led, 2) == rnd(rep, 2)
        rows.append(
            {
                ic: k,
                group_col(): scope[k]["group"],
                led_c: rnd(led, 2),
                rep_c: rnd(rep, 2),
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


INTROS = (
    "These are {title} files. {ledger} is the {event} ledger: one row per {event} with the "
    "{measure} in {unit}. {statement} holds the {w} each {ent} reported for the same period. "
    "Reconcile them: for every {ent} in scope give its {group}, the ledger {w}, the reported {w}, "
    "the difference and whether they reconcile{summary}.",
    "Each {ent} of these {title} files reported a {w} {measure} for the period ({statement}); "
    "the {event}s themselves are logged in {ledger}, in {unit}. Check every reported figure "
    "against the ledger: per in-scope {ent}, its {group}, both figures, how far apart they are "
    "and whether they agree{summary}.",
    "Do the reported {measure} figures in {statement} match what {ledger} records? The ledger "
    "({title}) has one row per {event}, measured in {unit}; the statement gives each {ent}'s "
    "{w}. For each {ent} in scope, list its {group}, the {w} from the ledger and from the "
    "statement, their difference and a reconciled flag{summary}.",
)


def draw(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    ic, m, dc = id_col(), V["measure"], date_col()
    led_c, rep_c = _cols()
    year = rng.choice([2022, 2023, 2024])
    ledger = []
    for e in world["entities"]:
        for _ in range(rng.randint(3, 6)):
            ledger.append({ic: e["id"], dc: iso_date(rng, year), m: reading(rng=rng)})
    ledger.sort(key=lambda r: (r[dc], r[ic]))
    blank_some(rng, ledger, m, ic)
    truth = _per_entity({e["id"]: e for e in world["entities"]}, ledger)
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
        statement.append({ic: k, rep_c: rnd(truth[k] + off, V["decimals"])})
    files = registry_files(rng, world)
    files.update(emit_table(rng, _ledger_path(), ledger, [ic, dc, m], [m], ids))
    files.update(emit_table(rng, _statement_path(), statement, [ic, rep_c], [rep_c], ids))
    rows, summary = _compute(world_registry(world), ledger, statement)
    spec = _spec()
    intro = INTROS[phrasing()].format(
        title=V["title"],
        ledger=_ledger_path(),
        statement=_statement_path(),
        event=words(V["event"]),
        measure=words(m),
        unit=V["unit"],
        w=agg_word(),
        ent=ent_noun(),
        group=words(group_col()),
        summary=plus_summary(", plus a summary"),
    )
    rows_of = f"the {m} values of the {ent_noun()}'s usable ledger rows"
    zero = (
        f"; an in-scope {ent_noun()} with no usable ledger rows has a {led_c} of zero"
        if additive()
        else ""
    )
    decisions = (
        registry_decisions()
        + table_decisions(_ledger_path(), [ic, dc, m], [m], V["event"])
        + table_decisions(_statement_path(), [ic, rep_c], [rep_c], "statement", missing=False)
        + [
            f"{led_c} is {agg_phrase(rows_of)}{zero}.",
            f"difference = {rep_c} - {led_c} (positive when the statement is higher than the ledger).",
            f"reconciled is true when {rep_c} and {led_c} are equal after rounding each to two decimals.",
            summary_rule(
                "entities_checked counts the in-scope rows; unreconciled counts rows with reconciled "
                "false; net_difference is the sum of the differences."
            ),
            f"One row per in-scope {ent_noun()}, keyed by {ic}.",
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), ledger, statement)
    return finish(intro, files, spec, rows, summary, decisions, naive)


blanks_matter = blanks_change_an_aggregate


def injections():
    return table_injections()


def solve(workspace, skip=None):
    set_skip(skip)
    ic, m, dc = id_col(), V["measure"], date_col()
    reg = load_registry(workspace)
    ledger = read_table(workspace, _ledger_path(), [ic, dc, m], [m])
    rep_c = _cols()[1]
    statement = read_table(workspace, _statement_path(), [ic, rep_c], [rep_c])
    rows, summary = _compute(reg, ledger, statement)
    write_result(workspace, _spec(), rows, summary)
