"""Domain calculation skeleton: factor-weighted totals per entity and each entity's share of its group.

Rendered after the prelude (synthesis/library.py); the import below is for linters only.
"""

from clawloop.synthesis.builtin._outputs import *  # noqa: F403
from clawloop.synthesis.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _events_path():
    return f"data/{V['event']}_log.csv"


def _factors_path():
    return f"reference/{V['category']}_factors.csv"


def _names():
    """(per-entity value, weighted value, group comparison, summary figure) column names: a sum
    has shares of its group's total; a mean, peak or latest value is compared with its group's
    mean instead (shares of a sum of diameters or body masses mean nothing)."""
    w = agg_word()
    if additive():
        return "total", "weighted_total", "share_of_group_pct", "grand_weighted_total"
    return w, "weighted_" + w, "pct_of_group_mean", "mean_weighted_" + w


def _spec():
    ic, gc, cc = id_col(), group_col(), V["category"]
    val, wt, cmp_, fig = _names()
    return result_spec(
        "weighted_totals",
        V["entities"],
        [ic, gc, cc, val, wt, cmp_],
        {ic: "string", gc: "string", cc: "string", val: "number", wt: "number", cmp_: "number"},
        [ic],
        {fig: "number", "top_" + V["entity"]: "string"},
        f"Weighted {words(V['measure'])} by {words(group_col())}",
    )


def _compute(reg, events, factors):
    ic, m, scope = id_col(), V["measure"], in_scope(reg)
    val, wt, cmp_, fig = _names()
    pairs = {k: [] for k in scope}
    for r in events:
        if r[ic] in scope and r[m] is not None:
            pairs[r[ic]].append((r[date_col()], r[m]))
    values = {k: aggregate(v) or 0.0 for k, v in pairs.items()}
    weighted = {k: values[k] * factors[scope[k]["category"]] for k in scope}
    by_group = {}
    for k in scope:
        by_group.setdefault(scope[k]["group"], []).append(weighted[k])
    rows = []
    for k in sorted(scope):
        g = by_group[scope[k]["group"]]
        base = sum(g) if additive() else sum(g) / len(g)
        rows.append(
            {
                ic: k,
                group_col(): scope[k]["group"],
                V["category"]: scope[k]["category"],
                val: rnd(values[k], 2),
                wt: rnd(weighted[k], 2),
                cmp_: rnd(100.0 * weighted[k] / base, 2) if base else 0.0,
            }
        )
    top = sorted(scope, key=lambda k: (-rnd(weighted[k], 2), k))[0]
    grand = sum(weighted.values())
    summary = {fig: rnd(grand if additive() else grand / len(scope), 2), "top_" + V["entity"]: top}
    return rows, summary


INTROS = (
    "These are {title} files. {events} logs each {event} with its {measure} in {unit}; {factors} "
    "gives a weighting factor per {category}. For every {ent} in scope compute its {w} {measure}, "
    "the weighted {w} and {compare}{summary}.",
    "A weighting factor per {category} sits in {factors}, and {events} records the {measure} "
    "({unit}) of every {event} in these {title} files. Work out, per in-scope {ent}, the {w} "
    "{measure}, that figure times its {category}'s factor, and {compare}{summary}.",
    "Which {ents} weigh most in their {group}? From {events} ({title}: {event}s with their "
    "{measure} in {unit}) take each in-scope {ent}'s {w} {measure}, weight it by the factor "
    "{factors} gives its {category}, and give {compare}{summary}.",
)


def draw(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    m = V["measure"]
    val, wt, cmp_, fig = _names()
    events = make_events(rng, world, rng.choice([2022, 2023, 2024]))
    blank_some(rng, events, m, id_col())
    factors = {c: rnd(rng.uniform(0.4, 2.5), 2) for c in V["categories"]}
    files = registry_files(rng, world)
    ids = sorted(e["id"] for e in world["entities"])
    files.update(
        emit_table(rng, _events_path(), events, event_columns(), [m], ids, peaks=agg() == "max")
    )
    files[_factors_path()] = to_csv(
        [V["category"], "factor"], [[c, f"{factors[c]:.2f}"] for c in V["categories"]]
    )
    rows, summary = _compute(world_registry(world), events, factors)
    group = words(group_col())
    compare = (
        f"its share of its {group}'s weighted total"
        if additive()
        else f"how it compares with the mean of its {group}"
    )
    intro = INTROS[phrasing()].format(
        title=V["title"],
        events=_events_path(),
        factors=_factors_path(),
        event=words(V["event"]),
        measure=words(m),
        unit=V["unit"],
        category=words(V["category"]),
        ent=ent_noun(),
        ents=ent_noun(True),
        group=group,
        w=agg_word(),
        compare=compare,
        summary=plus_summary(", plus a summary"),
    )
    usable = f"the {ent_noun()}'s usable {m} values"
    if additive():
        per_group = (
            f"{cmp_} is {wt} as a percentage of the sum of {wt} over the in-scope "
            f"{ent_noun(True)} of the same {group}; use unrounded weighted values."
        )
        overall = f"{fig} sums {wt} over all in-scope {ent_noun(True)}."
    else:
        per_group = (
            f"{cmp_} is {wt} as a percentage of the mean of {wt} over the in-scope "
            f"{ent_noun(True)} of the same {group}; use unrounded weighted values."
        )
        overall = f"{fig} is the mean of {wt} over all in-scope {ent_noun(True)}."
    decisions = (
        registry_decisions()
        + table_decisions(_events_path(), event_columns(), [m], V["event"])
        + [
            f"{val} is {agg_phrase(usable)}" + (" (zero when it has none)." if additive() else "."),
            f"{wt} = {val} x the factor of the {ent_noun()}'s {words(V['category'])} "
            f"(from the registry, looked up in {_factors_path()}).",
            per_group,
            summary_rule(
                f"{overall} top_{V['entity']} is the {id_col()} with the largest {wt} after "
                f"rounding to two decimals; ties go to the alphabetically smallest {id_col()}."
            ),
            f"One row per in-scope {ent_noun()}, keyed by {id_col()}.",
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), events, factors)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def _read_factors(ws):
    return {r[V["category"]].strip(): float(r["factor"]) for r in read_csv(ws, _factors_path())}


blanks_matter = blanks_change_an_aggregate


def injections():
    return table_injections()


def solve(workspace, skip=None):
    set_skip(skip)
    reg = load_registry(workspace)
    events = read_table(workspace, _events_path(), event_columns(), [V["measure"]])
    rows, summary = _compute(reg, events, _read_factors(workspace))
    write_result(workspace, _spec(), rows, summary)
