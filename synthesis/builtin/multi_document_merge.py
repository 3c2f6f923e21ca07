"""Multi-document merge skeleton: apply dated partial-update documents into one record per entity.

Rendered after the prelude (synthesis/library.py); the import below is for linters only.
"""

from clawloop.synthesis.builtin._outputs import *  # noqa: F403
from clawloop.synthesis.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---

SOURCES = ["audit", "crew", "field", "office", "survey"]


def _legacy_keys():
    return {id_col(): "ref", V["measure"]: "value", V["category"]: "class", "issued": "date"}


def _fig():
    """The summary's figure over current values: a total of a summed measure, else a mean (a
    total of current trunk diameters means nothing)."""
    return ("total_" if additive() else "mean_") + V["measure"]


def _spec():
    ic, gc, cc, m = id_col(), group_col(), V["category"], V["measure"]
    return result_spec(
        "merged",
        V["entities"],
        [ic, gc, cc, m, "last_updated", "documents"],
        {
            ic: "string",
            gc: "string",
            cc: "string",
            m: "number",
            "last_updated": "string",
            "documents": "integer",
        },
        [ic],
        {"entities": "integer", _fig(): "number"},
        f"Current {ent_noun()} records merged from update documents",
    )


def _compute(reg, docs):
    """docs: [{"file", "issued", "records": [{id, measure?, category?}]}], already cleaned."""
    ic, m, cc, scope = id_col(), V["measure"], V["category"], in_scope(reg)
    state = {}
    for doc in sorted(docs, key=lambda d: (d["issued"], d["file"])):
        for r in doc["records"]:
            k = r[ic]
            if k not in scope:
                continue
            s = state.setdefault(k, {m: None, cc: None, "last_updated": None, "documents": 0})
            for f in (m, cc):
                if r.get(f) is not None:
                    s[f] = r[f]
            s["last_updated"] = doc["issued"]
            s["documents"] += 1
    rows = [
        {
            ic: k,
            group_col(): scope[k]["group"],
            cc: s[cc],
            m: None if s[m] is None else rnd(s[m], 2),
            "last_updated": s["last_updated"],
            "documents": s["documents"],
        }
        for k, s in sorted(state.items())
    ]
    vals = [s[m] for s in state.values() if s[m] is not None]
    fig = sum(vals) if additive() else (sum(vals) / len(vals) if vals else 0.0)
    return rows, {"entities": len(rows), _fig(): rnd(fig, 2)}


INTROS = (
    "These are {title} files. Each JSON file under updates/ is a dated document that updates some "
    "{ents}' {measure} (in {unit}) and/or {category}. Merge them into the current record of every "
    "in-scope {ent}, with its {group}, the date it was last updated and how many documents "
    "mention it{summary}.",
    "The {title} files under updates/ are dated partial updates: a document may change the "
    "{measure} ({unit}) or the {category} of a few {ents}. Bring every in-scope {ent} up to date "
    "from them, giving its {group}, when it last changed and the number of documents naming "
    "it{summary}.",
    "What is the current {measure} (in {unit}) and {category} of each in-scope {ent}? Only the "
    "dated update documents under updates/ ({title}) say; apply them to get one record per {ent} "
    "with its {group}, its last update date and its document count{summary}.",
)


def draw(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    ic, m, cc, d = id_col(), V["measure"], V["category"], dirt()
    year = rng.choice([2022, 2023, 2024])
    ents = sorted(e["id"] for e in world["entities"])
    cat = {e["id"]: e["category"] for e in world["entities"]}
    docs = [
        {
            "file": f"updates/{year}-01-05_{rng.choice(SOURCES)}.json",
            "issued": f"{year}-01-05",
            "records": [{ic: k, m: reading(rng=rng), cc: cat[k]} for k in ents],
        }
    ]
    dates = sorted({iso_date(rng, year, start_day=31, span=150) for _ in range(4)})
    dates.insert(1, dates[0])  # two documents on one day: the file-name rule decides
    srcs = rng.sample(SOURCES, 2) + [rng.choice(SOURCES) for _ in dates[2:]]
    for day, src in zip(dates, srcs, strict=True):
        recs = []
        for k in sorted(rng.sample(ents, rng.randint(3, min(6, len(ents))))):
            r = {ic: k}
            if rng.random() < 0.8:
                r[m] = reading(rng=rng)
            if rng.random() < 0.4:
                r[cc] = rng.choice(V["categories"])
            if d >= 2 and rng.random() < 0.25:
                r[m] = None  # explicit null: no update for this field
            recs.append(r)
        docs.append({"file": f"updates/{day}_{src}.json", "issued": day, "records": recs})
    docs = list({doc["file"]: doc for doc in docs}.values())  # same day and source: keep one
    rows, summary = _compute(world_registry(world), docs)
    files = registry_files(rng, world)
    legacy_files = set(rng.sample([doc["file"] for doc in docs[1:]], 2)) if d >= 2 else set()
    unit_files = set(rng.sample([doc["file"] for doc in docs], 2)) if d >= 3 else set()
    used = set()  # the current key names the v1 documents renamed (the rule names only those)
    for doc in docs:
        recs = [dict(r) for r in doc["records"]]
        if d >= 1 and doc is docs[-1]:
            recs += [
                {ic: g, m: reading(rng=rng)}
                for g in (STALE + make_ids(rng, V["id_pattern"], 2, taken=ents + STALE))[:2]
            ]
        body = {"issued": doc["issued"], "state": "issued"}
        if doc["file"] in unit_files:
            body["unit"] = V["alt_unit"]
            for r in recs:
                if r.get(m) is not None:
                    r[m] = round(r[m] * V["alt_factor"], 6)
        if d >= 3:
            for r in recs:
                if rng.random() < 0.3:
                    r[ic] = " " + r[ic].lower() + " "
        if doc["file"] in legacy_files:
            lk = _legacy_keys()
            used.update(k for x in [body, *recs] for k in x if k in lk)
            body = {lk.get(k, k): v for k, v in body.items()}
            body["format"] = "v1"
            recs = [{lk.get(k, k): v for k, v in r.items()} for r in recs]
        body["records"] = recs
        files[doc["file"]] = json.dumps(body, indent=2) + "\n"
    if d >= 3:
        files.update(conversion_file())
    if d >= 1:
        late = f"{year}-12-20"
        files[f"updates/{late}_draft.json"] = (
            json.dumps(
                {
                    "issued": late,
                    "state": "draft",
                    "records": [{ic: k, m: reading(rng=rng)} for k in ents[:3]],
                },
                indent=2,
            )
            + "\n"
        )
    intro = INTROS[phrasing()].format(
        title=V["title"],
        ents=ent_noun(True),
        ent=ent_noun(),
        measure=words(m),
        unit=V["unit"],
        category=words(cc),
        group=words(group_col()),
        summary=plus_summary(", plus a summary"),
    )
    decisions = registry_decisions() + [
        "Apply documents in order of their issued date; for documents with the same issued date, the one whose "
        "file name sorts later (plain character order) is applied later. A later value overwrites an earlier one.",
        f"A record updates only the fields it carries; {m} and {cc} come from the documents alone.",
        "last_updated is the issued date of the latest document that mentions the "
        f"{ent_noun()}; documents counts the documents that mention it.",
        f"One row per in-scope {ent_noun()} mentioned in at least one document, keyed by {ic}.",
        summary_rule(
            f"entities counts those rows and {_fig()} "
            + (f"sums their current {m}." if additive() else f"is the mean of their current {m}.")
        ),
    ]
    if d >= 1:
        decisions += [
            "Documents whose state is draft were never issued: ignore them.",
            f"Ignore records whose {ic} is not in the registry.",
        ]
    if d >= 2:
        lk = _legacy_keys()
        decisions += [
            "A null field means no update for that field.",
            'Documents marked "format": "v1" use older key names: '
            + ", ".join(f"{v} = {k}" for k, v in lk.items() if k in used)
            + ".",
        ]
    if d >= 3:
        decisions += [
            f'A document with a "unit" key gives its {m} values in that unit ({V["alt_unit"]}). '
            + conversion_rule(),
            f"{ic} values may be lower case or padded with spaces; compare them trimmed and upper-cased.",
        ]
    naive = _compute(all_in_scope(world_registry(world)), docs)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def _read_docs(ws):
    ic, m, cc = id_col(), V["measure"], V["category"]
    back = {v: k for k, v in _legacy_keys().items()}
    docs = []
    for name in ws_list(ws, "updates"):
        if not name.endswith(".json"):
            continue
        body = read_json(ws, "updates/" + name)
        if body.get("format") == "v1" and not skipping("legacy_schema"):
            body = {back.get(k, k): v for k, v in body.items()}
            body["records"] = [{back.get(k, k): v for k, v in r.items()} for r in body["records"]]
        if body.get("state") == "draft" and not skipping("draft"):
            continue
        recs = []
        for r in body["records"]:
            if ic not in r:  # an old-layout record read without its key names
                continue
            x = {ic: r[ic] if skipping("dirty_ids") else norm_id(r[ic]), cc: r.get(cc)}
            v = r.get(m)
            if v is None and m in r and skipping("blanks"):
                v = 0.0  # a null read as a zero update
            if (
                v is not None
                and body.get("unit") == V["alt_unit"]
                and not skipping("unit_mismatch")
            ):
                v = rnd(v / conversion_factor(ws), V["decimals"])
            x[m] = v
            recs.append(x)
        issued = body.get("issued") or body.get("date")
        docs.append({"file": "updates/" + name, "issued": issued, "records": recs})
    return docs


def injections():
    """Hops and the stale detail file as for tables; the documents' own difficulties."""
    out = [i for i in table_injections() if i in ("hop_register", "hop_aliases", "stale_detail")]
    d = dirt()
    out += ["draft"] if d >= 1 else []
    out += ["legacy_schema", "blanks"] if d >= 2 else []
    out += ["unit_mismatch", "dirty_ids"] if d >= 3 else []
    return out


def solve(workspace, skip=None):
    set_skip(skip)
    rows, summary = _compute(load_registry(workspace), _read_docs(workspace))
    write_result(workspace, _spec(), rows, summary)
