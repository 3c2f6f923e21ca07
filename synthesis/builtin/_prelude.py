"""Shared standard-library helpers pasted into every rendered built-in generator (the prelude).

A generator must be one self-contained file, so synthesis/library.py concatenates a header
(docstring, GENERATOR, the domain vocabulary V), everything below the `# --- prelude ---` marker,
and one capability skeleton. Nothing here runs on import in the pipeline: these functions read the
module globals GENERATOR and V that the header defines.

What lives here: seeded ids and a small world (entities in groups), the multi-hop entity registry
(flat file / index + detail files / cross-reference register / legacy code aliases) with its reader,
controlled dirtiness on record tables (test rows, orphan rows, an archive distractor, a legacy
schema, unit and id noise) with its cleaner, and the workspace readers (a folder on disk, or a
draw's files dict in memory). The four output formats and build() are in _outputs.py.
"""

# ruff: noqa: F821  (GENERATOR and V come from the rendered header)
# --- prelude ---
import csv
import io
import json
import os
import random
import string
from decimal import ROUND_HALF_UP, Decimal

TOLERANCE = {"abs": 0.01, "rel": 0.0}
NUMBER_WORDS = {0: "zero", 1: "one", 2: "two", 3: "three"}


def places(n):
    """Rounding precision in words: digits in rule text could collide with answer values."""
    return (
        "a whole number" if n == 0 else f"{NUMBER_WORDS[n]} decimal place" + ("s" if n > 1 else "")
    )


UNITS_PATH = "reference/unit_conversions.csv"


def conversion_file():
    """The factor lives in the workspace, not the contract, so no rule text carries a number."""
    return {
        UNITS_PATH: to_csv(
            ["from_unit", "to_unit", "divide_by"],
            [[V["alt_unit"], V["unit"], repr(V["alt_factor"])]],
        )
    }


def conversion_rule():
    return (
        f"Convert {V['alt_unit']} to {V['unit']} by dividing by the divide_by factor in {UNITS_PATH}, then round "
        f"the result to {places(V['decimals'])} before using it."
    )


def conversion_factor(ws):
    for r in read_csv(ws, UNITS_PATH):
        if r["from_unit"].strip() == V["alt_unit"] and r["to_unit"].strip() == V["unit"]:
            return float(r["divide_by"])
    raise ValueError(f"{UNITS_PATH} has no {V['alt_unit']} -> {V['unit']} row")


# ---------------------------------------------------------------- injected difficulties

STALE = []  # the stale detail file's entity id, once registry_files made one
LIVE = []  # the in-scope entity ids of the world make_world made last
SKIP = set()  # the injections a solve() run ignores (verify's ablation check)
ATTEMPT = [0]  # which draw of the seed build() is making (0: the seed's original task)
PARSED = {}  # CSV text -> its rows, for in-memory workspaces (build() reads each file once)
ROUNDED = {}  # (x, n) -> rnd(x, n)


def reset_state():
    """Every draw starts, and build() ends, with the module globals as a fresh interpreter has them."""
    STALE.clear()
    LIVE.clear()
    SKIP.clear()
    PARSED.clear()
    ROUNDED.clear()
    ATTEMPT[0] = 0


def skipping(name):
    return name in SKIP


# The knob and level that introduce each injection: an inert one makes its level act as lower.
INJECTION_LEVELS = {
    "hop_register": ("multihop", 2),
    "hop_aliases": ("multihop", 3),
    "stale_detail": ("dirtiness", 1),
    "test_rows": ("dirtiness", 1),
    "archive": ("dirtiness", 1),
    "draft": ("dirtiness", 1),
    "legacy_schema": ("dirtiness", 2),
    "blanks": ("dirtiness", 2),
    "unit_mismatch": ("dirtiness", 3),
    "dirty_ids": ("dirtiness", 3),
}


def set_skip(skip):
    """solve(workspace, skip=NAME) reads the workspace as a solver who ignores that injection."""
    SKIP.clear()
    if skip:
        SKIP.add(skip)


def table_injections():
    """The difficulties this knob level injects into the registry and the record tables, each a
    name solve(workspace, skip=name) can ignore (a skeleton's injections() starts from these):
    verify's ablation check requires each one to change the answer."""
    h, d, out = hop(), dirt(), []
    if h >= 2:
        out.append("hop_register")
    if h >= 3:
        out.append("hop_aliases")
    if h >= 1 and d >= 1:
        out.append("stale_detail")
    if d >= 1:
        out += ["test_rows", "archive"]
    if d >= 2:
        out += ["legacy_schema"] + (["blanks"] if blanks_matter() else [])
    if d >= 3:
        out += ["unit_mismatch", "dirty_ids"]
    return out


def hop():
    return int(GENERATOR["multihop"])


def dirt():
    return int(GENERATOR["dirtiness"])


def rng_for(seed, salt=""):
    # A str seed goes through sha512 in random.seed: stable across processes (no hash randomisation).
    # Draw 0 keeps the string it always had, so a seed's first draw is the task it always was.
    redraw = f"|draw {ATTEMPT[0]}" if ATTEMPT[0] else ""
    return random.Random(f"{GENERATOR['capability']}|{V['name']}|{seed}|{salt}{redraw}")


def rnd(x, n=2):
    """Round half up (not Python's half-even), so any tool that rounds the usual way agrees."""
    if (x, n) not in ROUNDED:  # the same few hundred readings come back once per skip
        q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-n), rounding=ROUND_HALF_UP)
        ROUNDED[x, n] = float(q) + 0.0
    return ROUNDED[x, n]


def fmt_num(x, n):
    return f"{x:.{n}f}"


def make_ids(rng, pattern, n, taken=()):
    seen, out = set(taken), []
    while len(out) < n:
        s = "".join(
            rng.choice(string.digits)
            if c == "#"
            else rng.choice(string.ascii_uppercase)
            if c == "@"
            else c
            for c in pattern
        )
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def norm_id(s):
    return str(s).strip().upper()


def id_col():
    return V["entity"] + "_id"


def group_col():
    return V["group"]


def date_col():
    return V["event"] + "_date"


def ent_noun(plural=False):
    return (V["entities"] if plural else V["entity"]).replace("_", " ")


def reading(lo=None, hi=None, rng=None):
    lo = V["low"] if lo is None else lo
    hi = V["high"] if hi is None else hi
    return rnd(rng.uniform(lo, hi), V["decimals"])


def iso_date(rng, year, start_day=0, span=150):
    import datetime

    d = datetime.date(year, 1, 1) + datetime.timedelta(days=start_day + rng.randrange(span))
    return d.isoformat()


# ---------------------------------------------------------------- the world and its registry


def make_world(rng, n_min=8, n_max=11):
    """Entities spread over groups; one or two carry the excluded status (never a whole group)."""
    k = min(len(V["groups"]), rng.randint(3, 4))
    gnames = rng.sample(V["groups"], k)
    codes = make_ids(rng, V["group_code_pattern"], k)
    aliases = make_ids(rng, "L-####", k)
    groups = [
        {"name": g, "code": c, "alias": a} for g, c, a in zip(gnames, codes, aliases, strict=True)
    ]
    n = rng.randint(n_min, n_max)
    ids = make_ids(rng, V["id_pattern"], n)
    names = rng.sample(V["names"], n)
    ordinary = [s for s in V["statuses"] if s != V["excluded_status"]]
    ents = []
    for i, (eid, name) in enumerate(zip(ids, names, strict=True)):
        g = groups[i % k]
        status = ordinary[0] if rng.random() < 0.6 else rng.choice(ordinary)
        ents.append(
            {
                "id": eid,
                "name": name,
                "group": g["name"],
                "group_code": g["code"],
                "group_alias": g["alias"],
                "category": rng.choice(V["categories"]),
                "status": status,
            }
        )
    # Exclusions land on the first member of distinct groups, so every group keeps live members.
    for i in range(1 if n < 10 else 2):
        ents[i]["status"] = V["excluded_status"]
    rng.shuffle(ents)
    LIVE[:] = sorted(e["id"] for e in ents if e["status"] != V["excluded_status"])
    return {"groups": groups, "entities": ents}


def registry_files(rng, world):
    """The entity registry, spread over more files as multihop grows; returns {relpath: text}."""
    ic, gc, h, files = id_col(), group_col(), hop(), {}
    STALE[:] = []
    ents = sorted(world["entities"], key=lambda e: e["id"])
    if h == 0:
        rows = [[e["id"], e["name"], e["group"], e["category"], e["status"]] for e in ents]
        files[f"data/{V['entities']}.csv"] = to_csv([ic, "name", gc, V["category"], "status"], rows)
        return files
    index = [[e["id"], e["name"], f"data/{V['entities']}/{e['id']}.json"] for e in ents]
    files["data/index.csv"] = to_csv([ic, "name", "detail_file"], index)
    for e in ents:
        d = {ic: e["id"], "name": e["name"], V["category"]: e["category"], "status": e["status"]}
        if h == 1:
            d[gc] = e["group"]
        elif h == 2:
            d[gc + "_code"] = e["group_code"]
        else:
            d["legacy_" + gc + "_code"] = e["group_alias"]
        files[f"data/{V['entities']}/{e['id']}.json"] = json.dumps(d, indent=2) + "\n"
    if h >= 2:
        grows = sorted([g["code"], g["name"]] for g in world["groups"])
        files[f"reference/{gc}_register.csv"] = to_csv(["code", "name"], grows)
    if h >= 3:
        arows = sorted([g["alias"], g["code"]] for g in world["groups"])
        files[f"reference/{gc}_code_aliases.csv"] = to_csv(["legacy_code", "code"], arows)
    if dirt() >= 1:
        # A stale detail file for an entity that is not in the index.
        ghost = make_ids(rng, V["id_pattern"], 1, taken=[e["id"] for e in ents])[0]
        g = world["groups"][0]
        d = {
            ic: ghost,
            "name": "(withdrawn)",
            V["category"]: V["categories"][0],
            "status": V["statuses"][0],
            gc: g["name"],
            gc + "_code": g["code"],
        }
        files[f"data/{V['entities']}/{ghost}.json"] = json.dumps(d, indent=2) + "\n"
        # The stale entity has records among the orphan rows, so a reader who takes every detail
        # file (not the index's) counts them: the stale file is load-bearing.
        STALE[:] = [ghost]
    return files


def registry_decisions():
    ic, gc, h, out = id_col(), group_col(), hop(), []
    if h == 0:
        out.append(
            f"The registry of {ent_noun(True)} is data/{V['entities']}.csv; join other sources to it on {ic}."
        )
    else:
        out.append(
            f"The registry of {ent_noun(True)} is data/index.csv; each listed {ent_noun()} has its attributes "
            f"in the detail_file it names. Join other sources to it on {ic}."
        )
    if h >= 1 and dirt() >= 1:
        out.append(
            f"Detail files of {ent_noun(True)} that data/index.csv does not list are stale: ignore them."
        )
    if h == 2:
        out.append(
            f"A detail file gives the {gc} only as {gc}_code; the {gc} name is the name in "
            f"reference/{gc}_register.csv for that code."
        )
    if h == 3:
        out.append(
            f"A detail file gives the {gc} only as legacy_{gc}_code; map it to a code with "
            f"reference/{gc}_code_aliases.csv, then to the {gc} name with reference/{gc}_register.csv."
        )
    out.append(
        f"{ent_noun(True).capitalize()} whose status is {V['excluded_status']} are out of scope: leave them "
        "and all their records out of every output, count and total."
    )
    return out


def load_registry(ws):
    """{id: {"name", "group", "category", "status"}} read back from any multihop layout."""
    ic, gc, h, reg = id_col(), group_col(), hop(), {}
    if h == 0:
        for r in read_csv(ws, f"data/{V['entities']}.csv"):
            reg[norm_id(r[ic])] = {
                "name": r["name"],
                "group": r[gc],
                "category": r[V["category"]],
                "status": r["status"],
            }
        return reg
    names = {}
    if h >= 2 and not skipping("hop_register"):
        names = {r["code"].strip(): r["name"] for r in read_csv(ws, f"reference/{gc}_register.csv")}
    alias = {}
    if h >= 3 and not skipping("hop_aliases"):
        alias = {
            r["legacy_code"].strip(): r["code"].strip()
            for r in read_csv(ws, f"reference/{gc}_code_aliases.csv")
        }
    listed = [(r[ic], r["detail_file"].strip()) for r in read_csv(ws, "data/index.csv")]
    if skipping("stale_detail"):  # every detail file in the folder, listed or not
        folder = f"data/{V['entities']}"
        listed = [(n[:-5], f"{folder}/{n}") for n in ws_list(ws, folder) if n.endswith(".json")]
    for rid, detail in listed:
        d = read_json(ws, detail)
        if h == 1:
            group = d.get(gc, "")
        elif h == 2:
            code = d.get(gc + "_code", "")
            group = names.get(code, code)
        else:
            code = d.get("legacy_" + gc + "_code", d.get(gc + "_code", ""))
            code = alias.get(code, code)
            group = names.get(code, code)
        reg[norm_id(rid)] = {
            "name": d["name"],
            "group": group,
            "category": d[V["category"]],
            "status": d["status"],
        }
    return reg


def in_scope(reg):
    return {k: v for k, v in reg.items() if v["status"] != V["excluded_status"]}


def all_in_scope(reg):
    """The registry as a careless reader takes it, nobody out of scope: what such a reader would
    report is what a report must not state."""
    live = next(s for s in V["statuses"] if s != V["excluded_status"])
    return {k: dict(v, status=live) for k, v in reg.items()}


def world_registry(world):
    return {
        e["id"]: {k: e[k] for k in ("name", "group", "category", "status")}
        for e in world["entities"]
    }


# ---------------------------------------------------------------- record tables and dirtiness


def to_csv(columns, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(rows)
    return buf.getvalue()


# A workspace is a folder (solve() on disk) or the {relpath: text} dict of a draw's files (build()
# checking its injections in memory): every read goes through these two.


def ws_rel(rel):
    """`rel` when it names a path inside the workspace; a data file naming one outside it (an
    absolute path, a `..`) is refused, so a solve reads its own task's files and no others."""
    norm = os.path.normpath(rel)
    if os.path.isabs(norm) or norm == ".." or norm.startswith("../"):
        raise ValueError(f"{rel!r} is not a path inside the workspace")
    return rel


def ws_text(ws, rel):
    """The text of one workspace file."""
    if isinstance(ws, dict):
        return ws[ws_rel(rel)]
    with open(os.path.join(ws, ws_rel(rel)), encoding="utf-8", newline="") as f:
        return f.read()


def ws_list(ws, folder):
    """The sorted names in one workspace folder."""
    if isinstance(ws, dict):
        head = ws_rel(folder).rstrip("/") + "/"
        return sorted({k[len(head) :].split("/")[0] for k in ws if k.startswith(head)})
    return sorted(os.listdir(os.path.join(ws, ws_rel(folder))))


def read_json(ws, rel):
    return json.loads(ws_text(ws, rel))


def read_csv(ws, rel):
    """The rows of a workspace CSV file as dicts (shared by the readers of an in-memory
    workspace, which only read them)."""
    text = ws_text(ws, rel)
    if not isinstance(ws, dict):
        return list(csv.DictReader(io.StringIO(text, newline="")))
    if text not in PARSED:
        PARSED[text] = list(csv.DictReader(io.StringIO(text, newline="")))
    return list(PARSED[text])


def legacy_path(path):
    return path[:-4] + "_legacy.csv"


def legacy_name(col):
    fixed = {
        id_col(): V["entity"] + "_ref",
        date_col(): "logged_on",
        "record_type": "kind",
        "unit": "uom",
    }
    return fixed.get(col, "".join(p.capitalize() for p in col.split("_")))


def blanks_matter():
    """Whether a blank read as zero would change this skeleton's answer (a skeleton that only
    sums or peaks its readings overrides this with False: blanks would be no difficulty)."""
    return True


def blanks_change_an_aggregate():
    """A skeleton's blanks_matter when it aggregates each entity's readings: a blank read as
    zero changes no sum and raises no peak (the readings are positive), so blanks are a
    difficulty only for a mean or a latest value."""
    return agg() in ("mean", "latest")


def blank_some(rng, rows, col, key):
    """Dirtiness >= 2: blank one value in a few entities (never an entity's only value; at least
    one somewhere, so the difficulty is there). Changes the truth."""
    if dirt() < 2 or not blanks_matter():
        return
    by_key = {}
    for r in rows:
        by_key.setdefault(r[key], []).append(r)
    hit = False
    for k in sorted(by_key):
        if len(by_key[k]) >= 2 and rng.random() < 0.35:
            rng.choice(by_key[k])[col] = None
            hit = True
    many = [k for k in sorted(by_key) if len(by_key[k]) >= 2 and k in LIVE + [""]] or [
        k for k in sorted(by_key) if len(by_key[k]) >= 2
    ]
    if not hit and many:
        rng.choice(by_key[rng.choice(many)])[col] = None
    dc = date_col()
    if agg() == "latest" and rows and dc in rows[0]:
        # Only an entity's latest-dated rows count: unless some in-scope entity's are all
        # blank (it keeps an earlier value), blank one's, or no blank changes the answer.
        def latest(k):
            top = max(r[dc] for r in by_key[k])
            return [r for r in by_key[k] if r[dc] == top]

        def earlier(k):
            return any(r[dc] < latest(k)[0][dc] and r[col] is not None for r in by_key[k])

        live = [k for k in many if k in LIVE + [""] and earlier(k)]
        if live and not any(all(r[col] is None for r in latest(k)) for k in live):
            for r in latest(rng.choice(live)):
                r[col] = None


def emit_table(rng, path, rows, columns, value_cols, known_ids=(), peaks=False):
    """Write canonical rows as CSV with dirtiness injected; returns {relpath: text}.

    rows hold canonical values (value_cols in V['unit'], None = missing). The reader `read_table`
    undoes every change here, so the answer key is computed from the clean rows. `peaks`: only
    each entity's largest value counts, so the archive's superseded values are raised, not lowered.
    """
    d, ic, files = dirt(), id_col(), {}
    dec = V["decimals"]

    def cell(r, c, alt=False):
        v = r.get(c)
        if v is None:
            return ""
        if c in value_cols:
            return repr(round(v * V["alt_factor"], 6)) if alt else fmt_num(v, dec)
        return str(v)

    out_cols = list(columns) + (["record_type"] if d >= 1 else []) + (["unit"] if d >= 3 else [])
    lines = []
    for r in rows:
        alt = d >= 3 and any(r.get(c) is not None for c in value_cols) and rng.random() < 0.4
        line = {c: cell(r, c, alt) for c in columns}
        if d >= 1:
            line["record_type"] = "live"
        if d >= 3:
            line["unit"] = V["alt_unit"] if alt else V["unit"]
            if ic in line and rng.random() < 0.3:
                line[ic] = "  " + line[ic].lower() + " "
        lines.append(line)
    if d >= 1:
        # Test rows copy rows of in-scope entities: a reader who keeps them changes the answer.
        live = [r for r in rows if r.get(ic) in LIVE] or rows
        if agg() == "latest" and date_col() in columns:  # only an entity's latest row counts
            last = {}
            for r in live:
                last[r.get(ic)] = max(last.get(r.get(ic), ""), r[date_col()])
            live = [r for r in live if r[date_col()] == last[r.get(ic)]]
        # (never more than there are: rows keyed by no id all share one latest date)
        for r in rng.sample(live, min(len(live), max(1, len(rows) // 8))):
            fake = {c: cell(r, c) for c in columns}
            for c in value_cols:
                if r.get(c) is not None:
                    fake[c] = fmt_num(r[c] * 3 + 1, dec)
            fake["record_type"] = "test"
            if d >= 3:
                fake["unit"] = V["unit"]
            lines.insert(rng.randrange(len(lines) + 1), fake)
        if ic in columns:
            ghosts = (STALE + make_ids(rng, V["id_pattern"], 2, taken=list(known_ids) + STALE))[:2]
            fakes = [(g, False) for g in ghosts]
            if STALE and date_col() in columns:
                # The stale entity's records include a high one: a reader who counts the stale
                # detail file gets a new peak, an outlier and a changed sum.
                fakes.append((STALE[0], True))
            src = next((r for r in rows if all(r.get(c) is not None for c in value_cols)), rows[0])
            for n, (g, high) in enumerate(fakes):
                fake = {c: cell(src, c) for c in columns}
                fake[ic] = g
                for c in value_cols if high else ():
                    fake[c] = fmt_num(V["high"] * 3, dec)  # above every real value and limit
                if "reading_id" in columns:  # its own id: no key shared with a real row
                    head, _, tail = str(src["reading_id"]).rpartition("-")
                    fake["reading_id"] = f"{head}-{9 * 10 ** (len(tail) - 1) + n}"
                fake["record_type"] = "live"
                if d >= 3:
                    fake["unit"] = V["unit"]
                lines.insert(rng.randrange(len(lines) + 1), fake)
        stale = [dict(x) for x in rng.sample(lines, max(1, len(lines) // 3))]
        for x in stale:
            for c in value_cols:
                if x.get(c):  # a latest value keeps the largest of one date's: stale ones win
                    v = float(x[c])
                    up = agg() == "latest" or peaks
                    x[c] = fmt_num(v * 2 + 3 if up else v / 2 + 3, dec)
        files["archive/" + path.split("/")[-1]] = to_csv(
            out_cols, [[x.get(c, "") for c in out_cols] for x in stale]
        )
    if d >= 2:
        cut = max(1, len(lines) // 3)
        main, legacy = lines[:-cut], lines[-cut:]
        lcols = [legacy_name(c) for c in reversed(out_cols)]
        files[legacy_path(path)] = to_csv(
            lcols, [[x.get(c, "") for c in reversed(out_cols)] for x in legacy]
        )
    else:
        main = lines
    files[path] = to_csv(out_cols, [[x.get(c, "") for c in out_cols] for x in main])
    if d >= 3:
        files.update(conversion_file())
    return files


def table_decisions(path, columns, value_cols, what, missing=True):
    d, out, what = dirt(), [], words(what)
    if d >= 1:
        out.append(f"In {path}, rows whose record_type is test are test entries: ignore them.")
        out.append("Files under archive/ are superseded copies: ignore them.")
        if id_col() in columns:
            out.append(f"Ignore {what} rows whose {id_col()} is not in the registry.")
    if d >= 2:
        pairs = ", ".join(
            f"{legacy_name(c)} = {c}"
            for c in list(columns) + ["record_type"] + (["unit"] if d >= 3 else [])
        )
        out.append(
            f"{legacy_path(path)} holds more {what} rows of the same table in an older layout "
            f"(columns renamed and reordered: {pairs}); use its rows together with {path}."
        )
        for c in value_cols if missing and blanks_matter() else ():
            out.append(
                f"A blank {c} is a missing value: leave that row out of every sum, mean, count, peak and comparison of {c}."
            )
    if d >= 3:
        out.append(
            f"The unit column says which unit each row's {', '.join(value_cols)} is in: {V['unit']} or "
            f"{V['alt_unit']}. " + conversion_rule()
        )
        if id_col() in columns:
            out.append(
                f"{id_col()} values may be lower case or padded with spaces; compare them trimmed and upper-cased."
            )
    return out


def read_table(ws, path, columns, value_cols):
    """Rows of a table written by emit_table, cleaned: canonical columns, values in V['unit'] or None."""
    d, ic, out, factor = dirt(), id_col(), [], []
    sources = [(path, False)] + ([(legacy_path(path), True)] if d >= 2 else [])
    if skipping("legacy_schema"):
        sources = sources[:1]
    if d >= 1 and skipping("archive"):
        sources.append(("archive/" + path.split("/")[-1], False))
    for rel, legacy in sources:
        # Each canonical column's name in this file.
        name = {c: legacy_name(c) if legacy else c for c in [*columns, "record_type", "unit"]}
        for raw in read_csv(ws, rel):

            def get(c, raw=raw, name=name):
                return (raw.get(name[c]) or "").strip()

            if d >= 1 and get("record_type").lower() == "test" and not skipping("test_rows"):
                continue
            r = {c: get(c) for c in columns}
            if ic in r:  # a reader skipping dirty ids takes them as written
                r[ic] = (raw.get(name[ic]) or "") if skipping("dirty_ids") else norm_id(r[ic])
            for c in value_cols:
                if r[c] == "":
                    r[c] = 0.0 if skipping("blanks") else None
                    continue
                v = float(r[c])
                if d >= 3 and get("unit") == V["alt_unit"] and not skipping("unit_mismatch"):
                    factor = factor or [conversion_factor(ws)]  # read once, when first needed
                    v = v / factor[0]
                r[c] = rnd(v, V["decimals"])
            out.append(r)
    return out


# ---------------------------------------------------------------- common event tables


def event_columns():
    return [id_col(), date_col(), V["measure"]]


def make_events(rng, world, year, n_lo=3, n_hi=6, span=150):
    """Dated readings of the domain's measure, a few per entity, sorted by date then id."""
    rows = []
    for e in world["entities"]:
        for _ in range(rng.randint(n_lo, n_hi)):
            rows.append(
                {
                    id_col(): e["id"],
                    date_col(): iso_date(rng, year, span=span),
                    V["measure"]: reading(rng=rng),
                }
            )
    rows.sort(key=lambda r: (r[date_col()], r[id_col()]))
    return rows


def words(s):
    return s.replace("_", " ")


# ---------------------------------------------------------------- how the measure aggregates

AGG_WORD = {"sum": "total", "mean": "mean", "max": "peak", "latest": "latest"}


def agg():
    """The domain's aggregate: sum, mean, max or latest (generators/domains.py)."""
    return V.get("aggregate", "sum")


def agg_word():
    """The column stem for one entity's aggregate: total, mean, peak or latest."""
    return AGG_WORD[agg()]


def additive():
    return agg() == "sum"


def aggregate(pairs):
    """One entity's usable readings [(date, value)] combined as the measure combines: a sum, a
    mean, the largest, or the latest-dated (the largest of those sharing that date). None when
    there are none, except for a sum (zero)."""
    if not pairs:
        return 0.0 if additive() else None
    vals = [v for _, v in pairs]
    a = agg()
    if a == "sum":
        return sum(vals)
    if a == "mean":
        return sum(vals) / len(vals)
    if a == "max":
        return max(vals)
    return max(pairs)[1]


def agg_phrase(values, dates=None):
    """The rule text for aggregate(): 'the sum of <values>', ..."""
    dates = dates or date_col()
    return {
        "sum": f"the sum of {values}",
        "mean": f"the mean of {values}",
        "max": f"the largest of {values}",
        "latest": f"the one with the latest {dates} among {values} (the largest of them when several "
        "share that date)",
    }[agg()]


def phrasing():
    """Which of a skeleton's sentence templates this domain reads (generators/library.py)."""
    return int(V.get("phrasing", 0))
