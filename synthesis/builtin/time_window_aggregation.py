"""Time-window aggregation skeleton: bucket dated events into calendar months per group.

Rendered after the prelude (synthesis/library.py); the import below is for linters only.
"""

from clawloop.synthesis.builtin._outputs import *  # noqa: F403
from clawloop.synthesis.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _events_path():
    return f"data/{V['event']}_log.csv"


def _names():
    """(second stat, third stat, peak month field, its figure): a summed measure is totalled per
    window and its busiest month found; a level (mean, peak, latest) is averaged and peaked per
    window, and the month with the highest mean found (a sum of snow depths means nothing)."""
    if additive():
        return "total", "mean", "busiest_month", "peak_total"
    return "mean", "peak", "peak_month", "peak_mean"


def _spec():
    gc = group_col()
    a, b, month_f, fig = _names()
    return result_spec(
        "monthly_totals" if additive() else "monthly_levels",
        "windows",
        [gc, "month", "events", a, b],
        {gc: "string", "month": "string", "events": "integer", a: "number", b: "number"},
        [gc, "month"],
        {month_f: "string", fig: "number"},
        f"Monthly {words(V['measure'])} per {words(gc)}",
    )


def _compute(reg, events):
    ic, m, scope = id_col(), V["measure"], in_scope(reg)
    a, b, month_f, fig = _names()
    buckets, by_month = {}, {}
    for r in events:
        if r[ic] in scope and r[m] is not None:
            key = (scope[r[ic]]["group"], r[date_col()][:7])
            buckets.setdefault(key, []).append(r[m])
            by_month.setdefault(key[1], []).append(r[m])

    def stats(xs):
        t = sum(xs)
        return (t, t / len(xs)) if additive() else (t / len(xs), max(xs))

    rows = [
        {
            group_col(): g,
            "month": mo,
            "events": len(xs),
            a: rnd(stats(xs)[0], 2),
            b: rnd(stats(xs)[1], 2),
        }
        for (g, mo), xs in sorted(buckets.items())
    ]
    level = {mo: (sum(xs) if additive() else sum(xs) / len(xs)) for mo, xs in by_month.items()}
    best = sorted(level, key=lambda mo: (-rnd(level[mo], 2), mo))[0]
    return rows, {month_f: best, fig: rnd(level[best], 2)}


INTROS = (
    "These are {title} files. {path} logs each {event} with its date and {measure} in {unit}. "
    "Aggregate the {event}s of in-scope {ents} per {group} and calendar month ({stats}){summary}.",
    "Month by month and {group} by {group}: how did the {measure} ({unit}) of the in-scope {ents} "
    "run? Every {event} of these {title} files is in {path} with its date; give each window "
    "{stats}{summary}.",
    "Bucket the {event}s in {path} ({title}; {measure} in {unit}) into calendar months, separately "
    "for each {group}, counting only in-scope {ents}, and report {stats} per bucket{summary}.",
)


def draw(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    m = V["measure"]
    a, b, month_f, fig = _names()
    events = make_events(rng, world, rng.choice([2022, 2023, 2024]), n_lo=4, n_hi=8, span=120)
    blank_some(rng, events, m, id_col())
    files = registry_files(rng, world)
    ids = sorted(e["id"] for e in world["entities"])
    files.update(emit_table(rng, _events_path(), events, event_columns(), [m], ids))
    rows, summary = _compute(world_registry(world), events)
    if additive():
        stats = f"count, total and mean {words(m)}"
        peak = ", and find the busiest month overall"
        defs = f"events counts them, total sums their {m}, mean = total / events."
        best = (
            "busiest_month is the month with the largest total over all groups (rounded to two "
            "decimals; ties go to the earlier month); peak_total is that month's total."
        )
    else:
        stats = f"count, mean and peak {words(m)}"
        peak = ", and find the month with the highest mean level overall"
        defs = f"events counts them, mean is the mean of their {m}, peak the largest."
        best = (
            f"peak_month is the month whose usable {m} values, over all groups, have the largest "
            "mean (rounded to two decimals; ties go to the earlier month); peak_mean is that mean."
        )
    intro = INTROS[phrasing()].format(
        title=V["title"],
        path=_events_path(),
        event=words(V["event"]),
        measure=words(m),
        unit=V["unit"],
        ents=ent_noun(True),
        group=words(group_col()),
        stats=stats,
        summary=plus_summary(peak),
    )
    decisions = (
        registry_decisions()
        + table_decisions(_events_path(), event_columns(), [m], V["event"])
        + [
            f"A {words(V['event'])} belongs to the calendar month of its {date_col()}; month is written YYYY-MM.",
            f"One row per ({group_col()}, month) pair that has at least one usable {words(V['event'])}; "
            + defs,
            summary_rule(best),
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), events)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def injections():
    return table_injections()


def solve(workspace, skip=None):
    set_skip(skip)
    reg = load_registry(workspace)
    events = read_table(workspace, _events_path(), event_columns(), [V["measure"]])
    rows, summary = _compute(reg, events)
    write_result(workspace, _spec(), rows, summary)
