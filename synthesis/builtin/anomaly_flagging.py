"""Anomaly flagging skeleton: readings that deviate from their entity's median by more than half.

Rendered after the prelude (synthesis/library.py); the import below is for linters only.
"""

from clawloop.synthesis.builtin._outputs import *  # noqa: F403
from clawloop.synthesis.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _path():
    return f"data/{V['event']}_readings.csv"


def _columns():
    return ["reading_id"] + event_columns()


def _spec():
    ic, gc = id_col(), group_col()
    return result_spec(
        "anomalies",
        "anomalies",
        ["reading_id", ic, gc, V["measure"], "median", "deviation_pct"],
        {
            "reading_id": "string",
            ic: "string",
            gc: "string",
            V["measure"]: "number",
            "median": "number",
            "deviation_pct": "number",
        },
        ["reading_id"],
        {"readings_checked": "integer", "flagged": "integer"},
        f"Anomalous {words(V['measure'])} readings",
    )


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _compute(reg, readings):
    ic, m, scope = id_col(), V["measure"], in_scope(reg)
    usable = [r for r in readings if r[ic] in scope and r[m] is not None]
    series = {}
    for r in usable:
        series.setdefault(r[ic], []).append(r[m])
    med = {k: _median(v) for k, v in series.items()}
    rows = []
    for r in usable:
        md = med[r[ic]]
        if md and abs(r[m] - md) > 0.5 * md:
            rows.append(
                {
                    "reading_id": r["reading_id"],
                    ic: r[ic],
                    group_col(): scope[r[ic]]["group"],
                    m: rnd(r[m], 2),
                    "median": rnd(md, 2),
                    "deviation_pct": rnd(100.0 * (r[m] - md) / md, 2),
                }
            )
    return rows, {"readings_checked": len(usable), "flagged": len(rows)}


INTROS = (
    "These are {title} files. {path} holds {event} readings of {measure} in {unit}, each with a "
    "reading_id. Flag the readings of in-scope {ents} that are far from their {ent}'s usual "
    "level, with the {group}, the median and the deviation{summary}.",
    "Some {measure} readings in {path} ({title}, {unit}, one reading_id each) sit far from what "
    "their {ent} usually shows. Find them among the in-scope {ents} and list each with its "
    "{group}, its {ent}'s median and how far off it is{summary}.",
    "Which {event} readings look wrong? {path} ({title}) gives every reading of {measure} in "
    "{unit} a reading_id; for the in-scope {ents}, pick out the readings that stray from their "
    "{ent}'s median, with the {group}, that median and the deviation{summary}.",
)


def draw(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    ic, m, dc = id_col(), V["measure"], date_col()
    year = rng.choice([2022, 2023, 2024])
    lo, hi = V["low"], V["high"]
    readings = []
    for e in world["entities"]:
        base = rng.uniform(lo + (hi - lo) * 0.2, lo + (hi - lo) * 0.5)
        for _ in range(rng.randint(6, 9)):
            readings.append(
                {
                    ic: e["id"],
                    dc: iso_date(rng, year),
                    m: rnd(base * rng.uniform(0.85, 1.15), V["decimals"]),
                }
            )
    readings.sort(key=lambda r: (r[dc], r[ic]))
    for i, r in enumerate(readings):
        r["reading_id"] = f"R-{i + 1:05d}"
    blank_some(rng, readings, m, ic)
    # Plant clear outliers (far beyond the threshold) in a few entities, never in a blanked row.
    for k in rng.sample(sorted({r[ic] for r in readings}), 4):
        r = rng.choice([x for x in readings if x[ic] == k and x[m] is not None])
        r[m] = rnd(
            r[m] * (rng.uniform(2.2, 3.0) if rng.random() < 0.6 else rng.uniform(0.2, 0.35)),
            V["decimals"],
        )
    files = registry_files(rng, world)
    ids = sorted(e["id"] for e in world["entities"])
    files.update(emit_table(rng, _path(), readings, _columns(), [m], ids))
    rows, summary = _compute(world_registry(world), readings)
    intro = INTROS[phrasing()].format(
        title=V["title"],
        path=_path(),
        event=words(V["event"]),
        measure=words(m),
        unit=V["unit"],
        ent=ent_noun(),
        ents=ent_noun(True),
        group=words(group_col()),
        summary=plus_summary(", plus a summary"),
    )
    decisions = (
        registry_decisions()
        + table_decisions(_path(), _columns(), [m], V["event"])
        + [
            f"median is the median of the {ent_noun()}'s usable {m} values (mean of the two middle values when "
            "their number is even), outliers included.",
            "A reading is anomalous when it differs from its median by more than half of the median "
            "(strictly); deviation_pct is (value - median) as a percentage of the median, negative below it.",
            "List anomalous readings only, one row per reading_id.",
            summary_rule(
                f"readings_checked counts the usable readings of in-scope {ent_noun(True)}; flagged "
                "counts the rows listed."
            ),
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), readings)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def injections():
    return table_injections()


def solve(workspace, skip=None):
    set_skip(skip)
    reg = load_registry(workspace)
    readings = read_table(workspace, _path(), _columns(), [V["measure"]])
    rows, summary = _compute(reg, readings)
    write_result(workspace, _spec(), rows, summary)
