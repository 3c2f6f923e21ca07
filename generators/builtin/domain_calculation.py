"""Domain calculation skeleton: factor-weighted totals per entity and each entity's share of its group.

Rendered after the prelude (generators/library.py); the import below is for linters only.
"""

from clawloop.generators.builtin._outputs import *  # noqa: F403
from clawloop.generators.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _events_path():
    return f"data/{V['event']}_log.csv"


def _factors_path():
    return f"reference/{V['category']}_factors.csv"


def _spec():
    ic, gc, cc = id_col(), group_col(), V["category"]
    return result_spec(
        "weighted_totals",
        V["entities"],
        [ic, gc, cc, "total", "weighted_total", "share_of_group_pct"],
        {
            ic: "string",
            gc: "string",
            cc: "string",
            "total": "number",
            "weighted_total": "number",
            "share_of_group_pct": "number",
        },
        [ic],
        {"grand_weighted_total": "number", "top_" + V["entity"]: "string"},
        f"Weighted {words(V['measure'])} by {words(group_col())}",
    )


def _compute(reg, events, factors):
    ic, m, scope = id_col(), V["measure"], in_scope(reg)
    totals = {k: 0.0 for k in scope}
    for r in events:
        if r[ic] in scope and r[m] is not None:
            totals[r[ic]] += r[m]
    weighted = {k: totals[k] * factors[scope[k]["category"]] for k in scope}
    by_group = {}
    for k in scope:
        by_group[scope[k]["group"]] = by_group.get(scope[k]["group"], 0.0) + weighted[k]
    rows = []
    for k in sorted(scope):
        g = by_group[scope[k]["group"]]
        rows.append(
            {
                ic: k,
                group_col(): scope[k]["group"],
                V["category"]: scope[k]["category"],
                "total": rnd(totals[k], 2),
                "weighted_total": rnd(weighted[k], 2),
                "share_of_group_pct": rnd(100.0 * weighted[k] / g, 2) if g else 0.0,
            }
        )
    top = sorted(scope, key=lambda k: (-rnd(weighted[k], 2), k))[0]
    summary = {"grand_weighted_total": rnd(sum(weighted.values()), 2), "top_" + V["entity"]: top}
    return rows, summary


def _read_factors(ws):
    return {r[V["category"]].strip(): float(r["factor"]) for r in read_csv(ws, _factors_path())}


def build(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    m = V["measure"]
    events = make_events(rng, world, rng.choice([2022, 2023, 2024]))
    blank_some(rng, events, m, id_col())
    factors = {c: rnd(rng.uniform(0.4, 2.5), 2) for c in V["categories"]}
    files = registry_files(rng, world)
    ids = sorted(e["id"] for e in world["entities"])
    files.update(emit_table(rng, _events_path(), events, event_columns(), [m], ids))
    files[_factors_path()] = to_csv(
        [V["category"], "factor"], [[c, f"{factors[c]:.2f}"] for c in V["categories"]]
    )
    rows, summary = _compute(world_registry(world), events, factors)
    intro = (
        f"These are {V['title']} files. {_events_path()} logs each {words(V['event'])} with its "
        f"{words(m)} in {V['unit']}; {_factors_path()} gives a weighting factor per "
        f"{words(V['category'])}. For every {ent_noun()} in scope compute its total {words(m)}, the weighted "
        f"total and its share of its {words(group_col())}'s weighted total"
        f"{plus_summary(', plus a summary')}."
    )
    decisions = (
        registry_decisions()
        + table_decisions(_events_path(), event_columns(), [m], V["event"])
        + [
            f"total is the sum of the {ent_noun()}'s usable {m} values (zero when it has none).",
            f"weighted_total = total x the factor of the {ent_noun()}'s {words(V['category'])} "
            f"(from the registry, looked up in {_factors_path()}).",
            f"share_of_group_pct is weighted_total as a percentage of the sum of weighted_total over the in-scope {ent_noun(True)} "
            f"of the same {words(group_col())}; use unrounded weighted totals.",
            summary_rule(
                f"grand_weighted_total sums weighted_total over all in-scope {ent_noun(True)}. "
                f"top_{V['entity']} is the {id_col()} with the largest weighted_total after rounding to "
                f"two decimals; ties go to the alphabetically smallest {id_col()}."
            ),
            f"One row per in-scope {ent_noun()}, keyed by {id_col()}.",
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), events, factors)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def solve(workspace):
    reg = load_registry(workspace)
    events = read_table(workspace, _events_path(), event_columns(), [V["measure"]])
    rows, summary = _compute(reg, events, _read_factors(workspace))
    write_result(workspace, _spec(), rows, summary)
