"""Entity resolution skeleton: match free-text intake rows to the registry by normalised name.

Rendered after the prelude (synthesis/library.py); the import below is for linters only.
"""

from clawloop.synthesis.builtin._outputs import *  # noqa: F403
from clawloop.synthesis.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _path():
    return f"data/{V['event']}_intake.csv"


def _columns():
    return ["name", group_col(), date_col(), V["measure"]]


def _spec():
    ic, gc = id_col(), group_col()
    return result_spec(
        "resolved",
        V["entities"],
        [ic, gc, "name", "records", agg_word()],
        {ic: "string", gc: "string", "name": "string", "records": "integer", agg_word(): "number"},
        [ic],
        {"intake_rows": "integer", "matched": "integer", "unmatched": "integer"},
        f"Intake {words(V['event'])} records resolved to registered {ent_noun(True)}",
    )


def _blank_rules():
    """Dirtiness >= 2 blanks some measures: such a row is unusable as a whole (the rule says so
    for every count, not only for the sums)."""
    if dirt() < 2:
        return []
    m = V["measure"]
    return [
        f"An intake row whose {m} is blank is unusable: leave it out entirely, as if the file did "
        "not hold it (it is not resolved, counts in no records and adds nothing to any total).",
        summary_rule("Unusable rows count in none of matched, unmatched and intake_rows."),
    ]


def _norm(name):
    kept = "".join(ch for ch in name.lower() if ch.isalnum() or ch.isspace())
    return " ".join(kept.split())


def _compute(reg, intake):
    ic, m, scope = id_col(), V["measure"], in_scope(reg)
    index = {(_norm(v["name"]), v["group"].strip()): k for k, v in reg.items()}
    records, pairs, unmatched = {k: 0 for k in scope}, {k: [] for k in scope}, 0
    for r in intake:
        if r[m] is None:
            continue
        k = index.get((_norm(r["name"]), r[group_col()].strip()))
        if k is None:
            unmatched += 1
        elif k in scope:
            records[k] += 1
            pairs[k].append((r[date_col()], r[m]))
    rows = [
        {
            ic: k,
            group_col(): scope[k]["group"],
            "name": scope[k]["name"],
            "records": records[k],
            agg_word(): rnd(aggregate(pairs[k]) or 0.0, 2),
        }
        for k in sorted(scope)
    ]
    matched = sum(records.values())
    return rows, {"intake_rows": matched + unmatched, "matched": matched, "unmatched": unmatched}


def _variant(rng, name):
    kind = rng.randrange(6)
    if kind == 0:
        return name.upper()
    if kind == 1:
        return name.lower()
    if kind == 2:
        return "  ".join(name.split())
    if kind == 3:
        return name + "."
    if kind == 4:
        return "".join(ch for ch in name if ch.isalnum() or ch.isspace())
    return name


INTROS = (
    "These are {title} files. {path} holds {event} intake rows typed by hand: they name the {ent} "
    "in free text, not by id, with its {group}. Resolve each row to a registered {ent} and report, "
    "for every in-scope {ent}, how many rows resolved to it and the {w} of their {measure} in "
    "{unit}{summary}.",
    "Nobody typed ids into {path}: each {event} intake row of these {title} files names its {ent} "
    "by hand, beside the {group}. Match the rows to the registry; per in-scope {ent}, count the "
    "rows that are its own and give the {w} {measure} ({unit}) over them{summary}.",
    "Hand-typed {event} rows in {path} ({title}) say which {ent} they are about only by name and "
    "{group}. Find the registered {ent} behind each row, then give every in-scope {ent} its number "
    "of rows and their {w} {measure} in {unit}{summary}.",
)


def draw(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    m, dc = V["measure"], date_col()
    year = rng.choice([2022, 2023, 2024])
    intake = []
    for e in world["entities"]:
        for _ in range(rng.randint(2, 4)):
            intake.append(
                {
                    "name": _variant(rng, e["name"]),
                    group_col(): e["group"],
                    dc: iso_date(rng, year),
                    m: reading(rng=rng),
                }
            )
    used = {e["name"] for e in world["entities"]}
    strangers = [n for n in V["names"] if n not in used]
    for n in rng.sample(strangers, min(2, len(strangers))):  # not registered anywhere
        intake.append(
            {
                "name": _variant(rng, n),
                group_col(): rng.choice(world["groups"])["name"],
                dc: iso_date(rng, year),
                m: reading(rng=rng),
            }
        )
    e = rng.choice(world["entities"])  # a registered name filed under the wrong group
    other = [g["name"] for g in world["groups"] if g["name"] != e["group"]]
    intake.append(
        {
            "name": e["name"],
            group_col(): rng.choice(other),
            dc: iso_date(rng, year),
            m: reading(rng=rng),
        }
    )
    intake.sort(key=lambda r: (r[dc], r["name"]))
    blank_some(rng, intake, m, group_col())
    files = registry_files(rng, world)
    files.update(emit_table(rng, _path(), intake, _columns(), [m]))
    rows, summary = _compute(world_registry(world), intake)
    intro = INTROS[phrasing()].format(
        title=V["title"],
        path=_path(),
        event=words(V["event"]),
        ent=ent_noun(),
        ents=ent_noun(True),
        group=words(group_col()),
        w=agg_word(),
        measure=words(m),
        unit=V["unit"],
        summary=plus_summary(", plus a summary of matched and unmatched rows"),
    )
    decisions = (
        registry_decisions()
        + table_decisions(_path(), _columns(), [m], V["event"], missing=False)
        + _blank_rules()
        + [
            f"A row matches a registered {ent_noun()} when its {group_col()} equals the {ent_noun()}'s "
            f"{words(group_col())} name and the names are equal after normalising: lower case, drop every character "
            "that is not a letter, digit or space, collapse runs of spaces, trim.",
            f"Rows that match an out-of-scope {ent_noun()} are ignored entirely.",
            summary_rule(f"Rows that match no registered {ent_noun()} are unmatched."),
            f"records counts the rows resolved to the {ent_noun()}; {agg_word()} is "
            f"{agg_phrase(f'their {m} values')}. Every in-scope {ent_noun()} gets a row (zero when "
            f"nothing resolved to it), keyed by {id_col()}; name is the registry name.",
            summary_rule(
                "intake_rows = matched + unmatched; matched counts rows resolved to in-scope entries."
            ),
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), intake)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def injections():
    """The intake names entities in free text: no ids to dirty."""
    return [i for i in table_injections() if i != "dirty_ids"]


def solve(workspace, skip=None):
    set_skip(skip)
    reg = load_registry(workspace)
    intake = read_table(workspace, _path(), _columns(), [V["measure"]])
    rows, summary = _compute(reg, intake)
    write_result(workspace, _spec(), rows, summary)
