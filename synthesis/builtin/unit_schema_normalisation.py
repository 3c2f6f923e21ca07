"""Unit and schema normalisation skeleton: three sources, three layouts, one clean table.

Rendered after the prelude (synthesis/library.py); the import below is for linters only.
"""

from clawloop.synthesis.builtin._outputs import *  # noqa: F403
from clawloop.synthesis.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _main_path():
    return f"sources/{V['event']}_main.csv"


def _sheet_path():
    return "sources/field_sheet.csv"


def _export_path():
    return "sources/device_export.json"


def _columns():
    return ["reading_id"] + event_columns()


def _sheet_columns():
    return [V["entity"].capitalize(), f"Value ({V['alt_unit']})", "Date", "Ref No"]


def _fig():
    """The summary's figure: a total of a summed measure, else the mean reading."""
    return ("total_" if additive() else "mean_") + V["measure"]


def _spec():
    ic, gc, m = id_col(), group_col(), V["measure"]
    return result_spec(
        "normalised",
        "readings",
        ["reading_id", ic, gc, "date", m],
        {"reading_id": "string", ic: "string", gc: "string", "date": "string", m: "number"},
        ["reading_id"],
        {"readings": "integer", _fig(): "number"},
        f"{words(m).capitalize()} readings normalised to {V['unit']}",
    )


def _compute(reg, readings):
    ic, m, scope = id_col(), V["measure"], in_scope(reg)
    rows = [
        {
            "reading_id": r["reading_id"],
            ic: r[ic],
            group_col(): scope[r[ic]]["group"],
            "date": r["date"],
            m: rnd(r[m], 2),
        }
        for r in readings
        if r[ic] in scope and r[m] is not None
    ]
    vals = [r[m] for r in readings if r[ic] in scope and r[m] is not None]
    fig = sum(vals) if additive() else (sum(vals) / len(vals) if vals else 0.0)
    return rows, {"readings": len(rows), _fig(): rnd(fig, 2)}


INTROS = (
    "These are {title} files. {Measure} readings arrive from three sources with different "
    "layouts: {main}, {sheet} and {export}. Normalise every reading of an in-scope {ent} into one "
    "table in {unit} with ISO dates and the {group}{summary}.",
    "Three sources of these {title} files disagree on layout, dates and units: {main}, {sheet} "
    "and {export}. Bring their {measure} readings of in-scope {ent}s together as one table, in "
    "{unit}, dated YYYY-MM-DD, each with its {group}{summary}.",
    "One clean table of {measure} in {unit} is wanted from {main}, {sheet} and {export} ({title}), "
    "which each write readings their own way: every reading of an in-scope {ent}, ISO-dated, "
    "with its {group}{summary}.",
)


def draw(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    ic, m, dc = id_col(), V["measure"], date_col()
    events = make_events(rng, world, rng.choice([2022, 2023, 2024]), n_lo=3, n_hi=5)
    for i, r in enumerate(events):
        r["reading_id"] = f"{V['event'][:3].upper()}-{i + 1:05d}"
    order = list(range(len(events)))
    rng.shuffle(order)
    third = len(order) // 3
    main = sorted(order[: len(order) - 2 * third])
    sheet, export = (
        sorted(order[len(order) - 2 * third : len(order) - third]),
        sorted(order[len(order) - third :]),
    )
    main_rows = [events[i] for i in main]
    blank_some(rng, main_rows, m, ic)
    ids = sorted(e["id"] for e in world["entities"])
    files = registry_files(rng, world)
    files.update(emit_table(rng, _main_path(), main_rows, _columns(), [m], ids))
    srows = []
    for i in sheet:
        r = events[i]
        y, mo, da = r[dc].split("-")
        srows.append(
            [r[ic], repr(round(r[m] * V["alt_factor"], 6)), f"{da}/{mo}/{y}", r["reading_id"]]
        )
    files[_sheet_path()] = to_csv(_sheet_columns(), srows)
    erows = []
    for i in export:
        r = events[i]
        alt = rng.random() < 0.5
        erows.append(
            {
                "rid": r["reading_id"],
                "who": r[ic],
                "ts": r[dc].replace("-", ""),
                "qty": round(r[m] * V["alt_factor"], 6) if alt else r[m],
                "uom": V["alt_unit"] if alt else V["unit"],
            }
        )
    files[_export_path()] = json.dumps(erows, indent=1) + "\n"
    files.update(conversion_file())
    truth = main_rows + [events[i] for i in sheet + export]
    readings = [{"reading_id": r["reading_id"], ic: r[ic], "date": r[dc], m: r[m]} for r in truth]
    rows, summary = _compute(world_registry(world), readings)
    sc = _sheet_columns()
    intro = INTROS[phrasing()].format(
        title=V["title"],
        measure=words(m),
        Measure=words(m).capitalize(),
        main=_main_path(),
        sheet=_sheet_path(),
        export=_export_path(),
        ent=ent_noun(),
        unit=V["unit"],
        group=words(group_col()),
        summary=plus_summary(", plus a summary"),
    )
    decisions = (
        registry_decisions()
        + table_decisions(_main_path(), _columns(), [m], V["event"])
        + [
            f"{_sheet_path()}: {sc[0]} = {ic}, {sc[3]} = reading_id, Date is DD/MM/YYYY, and {sc[1]} is the {m} in "
            f"{V['alt_unit']}.",
            f"{_export_path()}: a list of objects with rid = reading_id, who = {ic}, ts = date as YYYYMMDD, "
            f"qty = the {m} in the unit named by uom ({V['unit']} or {V['alt_unit']}).",
            conversion_rule(),
            f"Output one row per usable reading of an in-scope {ent_noun()}, keyed by reading_id; date is "
            "YYYY-MM-DD.",
            summary_rule(
                f"readings counts the rows; {_fig()} "
                + (f"sums their {m}." if additive() else f"is the mean of their {m}.")
            ),
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), readings)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def _read_all(ws):
    factor = conversion_factor(ws)
    ic, m, dc = id_col(), V["measure"], date_col()
    out = [
        {"reading_id": r["reading_id"], ic: r[ic], "date": r[dc], m: r[m]}
        for r in read_table(ws, _main_path(), _columns(), [m])
    ]
    sc = _sheet_columns()
    for r in read_csv(ws, _sheet_path()):
        da, mo, y = r["Date"].strip().split("/")
        out.append(
            {
                "reading_id": r[sc[3]].strip(),
                ic: norm_id(r[sc[0]]),
                "date": f"{y}-{mo}-{da}",
                m: rnd(float(r[sc[1]]) / factor, V["decimals"]),
            }
        )
    for r in read_json(ws, _export_path()):
        v = float(r["qty"])
        if r["uom"] == V["alt_unit"]:
            v = v / factor
        ts = r["ts"]
        out.append(
            {
                "reading_id": r["rid"],
                ic: norm_id(r["who"]),
                "date": f"{ts[:4]}-{ts[4:6]}-{ts[6:]}",
                m: rnd(v, V["decimals"]),
            }
        )
    return out


def injections():
    return table_injections()


def solve(workspace, skip=None):
    set_skip(skip)
    rows, summary = _compute(load_registry(workspace), _read_all(workspace))
    write_result(workspace, _spec(), rows, summary)
