"""Time-window aggregation skeleton: bucket dated events into calendar months per group.

Rendered after the prelude (generators/library.py); the import below is for linters only.
"""

from clawloop.generators.builtin._outputs import *  # noqa: F403
from clawloop.generators.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _events_path():
    return f"data/{V['event']}_log.csv"


def _spec():
    gc = group_col()
    return result_spec(
        "monthly_totals",
        "windows",
        [gc, "month", "events", "total", "mean"],
        {gc: "string", "month": "string", "events": "integer", "total": "number", "mean": "number"},
        [gc, "month"],
        {"busiest_month": "string", "peak_total": "number"},
        f"Monthly {words(V['measure'])} per {words(gc)}",
    )


def _compute(reg, events):
    ic, m, scope = id_col(), V["measure"], in_scope(reg)
    buckets, by_month = {}, {}
    for r in events:
        if r[ic] in scope and r[m] is not None:
            key = (scope[r[ic]]["group"], r[date_col()][:7])
            n, t = buckets.get(key, (0, 0.0))
            buckets[key] = (n + 1, t + r[m])
            by_month[key[1]] = by_month.get(key[1], 0.0) + r[m]
    rows = [
        {group_col(): g, "month": mo, "events": n, "total": rnd(t, 2), "mean": rnd(t / n, 2)}
        for (g, mo), (n, t) in sorted(buckets.items())
    ]
    best = sorted(by_month, key=lambda mo: (-rnd(by_month[mo], 2), mo))[0]
    return rows, {"busiest_month": best, "peak_total": rnd(by_month[best], 2)}


def build(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    m = V["measure"]
    events = make_events(rng, world, rng.choice([2022, 2023, 2024]), n_lo=4, n_hi=8, span=120)
    blank_some(rng, events, m, id_col())
    files = registry_files(rng, world)
    ids = sorted(e["id"] for e in world["entities"])
    files.update(emit_table(rng, _events_path(), events, event_columns(), [m], ids))
    rows, summary = _compute(world_registry(world), events)
    intro = (
        f"These are {V['title']} files. {_events_path()} logs each {words(V['event'])} with its date and "
        f"{words(m)} in {V['unit']}. Aggregate the {words(V['event'])}s of in-scope {ent_noun(True)} per "
        f"{words(group_col())} and calendar month (count, total and mean {words(m)})"
        f"{plus_summary(', and find the busiest month overall')}."
    )
    decisions = (
        registry_decisions()
        + table_decisions(_events_path(), event_columns(), [m], V["event"])
        + [
            f"A {words(V['event'])} belongs to the calendar month of its {date_col()}; month is written YYYY-MM.",
            f"One row per ({group_col()}, month) pair that has at least one usable {words(V['event'])}; "
            f"events counts them, total sums their {m}, mean = total / events.",
            summary_rule(
                "busiest_month is the month with the largest total over all groups (rounded to two "
                "decimals; ties go to the earlier month); peak_total is that month's total."
            ),
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), events)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def solve(workspace):
    reg = load_registry(workspace)
    events = read_table(workspace, _events_path(), event_columns(), [V["measure"]])
    rows, summary = _compute(reg, events)
    write_result(workspace, _spec(), rows, summary)
