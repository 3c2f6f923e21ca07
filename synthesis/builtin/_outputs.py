"""Output formats for rendered built-in generators: contract entries, answer key, files, instruction.

Pasted after _prelude.py by synthesis/library.py (everything below the marker). A skeleton describes
its result once with `result_spec` (a keyed table plus a summary object); these functions turn it
into the contract outputs, the answer key and the written files for each output format:
json (one file with a schema), csv (columns + key), multi (a csv and a summary json) and report
(markdown for people plus a sidecar JSON holding the graded facts). build() is here too: it
re-draws the skeleton's draw(seed) until every declared injection changes the answer.
"""

# ruff: noqa: F821  (GENERATOR, V, TOLERANCE and to_csv come from the header and _prelude.py)
# --- prelude ---
import json
import os

# ---------------------------------------------------------------- outputs in four formats


def result_spec(stem, collection, columns, types, key, summary_types, title):
    return {
        "stem": stem,
        "collection": collection,
        "columns": list(columns),
        "types": dict(types),
        "key": list(key),
        "summary_types": dict(summary_types),
        "title": title,
    }


def _schema(spec):
    item = {
        "type": "object",
        "required": spec["columns"],
        "properties": {c: {"type": spec["types"][c]} for c in spec["columns"]},
    }
    summ = {
        "type": "object",
        "required": list(spec["summary_types"]),
        "properties": {k: {"type": t} for k, t in spec["summary_types"].items()},
    }
    return {
        "type": "object",
        "required": [spec["collection"], "summary"],
        "properties": {
            spec["collection"]: {"type": "array", "key": spec["key"], "items": item},
            "summary": summ,
        },
    }


def _paths(spec):
    fmt, stem = GENERATOR["output_format"], spec["stem"]
    return {
        "json": {"json": f"output/{stem}.json"},
        "csv": {"csv": f"output/{stem}.csv"},
        "multi": {"csv": f"output/{stem}.csv", "summary": "output/summary.json"},
        "report": {"report": "output/report.md", "sidecar": "output/report_facts.json"},
    }[fmt]


def contract_outputs(spec):
    p, fmt = _paths(spec), GENERATOR["output_format"]
    if fmt == "json":
        return [{"path": p["json"], "format": "json", "schema": _schema(spec)}]
    csv_out = {
        "path": p.get("csv", ""),
        "format": "csv",
        "columns": spec["columns"],
        "key": spec["key"],
    }
    if fmt == "csv":
        return [csv_out]
    if fmt == "multi":
        return [
            csv_out,
            {
                "path": p["summary"],
                "format": "json",
                "schema": _schema(spec)["properties"]["summary"],
            },
        ]
    return [
        {"path": p["report"], "format": "report", "sidecar": p["sidecar"], "schema": _schema(spec)}
    ]


class SummaryRule(str):
    """A decision about the summary object alone: left out where no output holds a summary."""


def summary_rule(text):
    return SummaryRule(text)


def has_summary():
    return GENERATOR["output_format"] != "csv"


def plus_summary(text):
    """The instruction's words about the summary, where an output holds one."""
    return text if has_summary() else ""


def _significant(x):
    text = repr(abs(float(x))).rstrip("0").rstrip(".") if "." in repr(float(x)) else str(x)
    return len(text.replace(".", "").strip("0"))


def forbidden_facts(spec, rows, summary, naive):
    """What a report must not state: the values a reader who kept the out-of-scope rows would
    give (rows of excluded entries, totals they change). Only numbers of 3+ significant digits
    that no true row or figure shares, so an honest report never states one by chance."""
    if not naive:
        return []
    tol = TOLERANCE["abs"] * 3 + 1e-9
    key = spec["key"]
    true_rows = {tuple(str(r[k]) for k in key): r for r in rows}
    true_all = [abs(v) for v in summary.values() if _is_num(v)]
    true_all += [abs(r[c]) for r in rows for c in spec["columns"] if _is_num(r.get(c))]
    out = []
    n_rows, n_summary = naive
    for r in n_rows:
        t = true_rows.get(tuple(str(r[k]) for k in key))
        near = [abs(t[c]) for c in spec["columns"] if _is_num(t.get(c))] if t else []
        for c in spec["columns"]:
            v = r.get(c)
            if c in key or not _is_num(v) or _significant(v) < 3:
                continue
            if any(abs(abs(v) - h) <= tol for h in near + true_all):
                continue
            out.append({"about": {k: r[k] for k in key}, "field": c, "value": v})
    for f, v in n_summary.items():
        if (
            _is_num(v)
            and _significant(v) >= 3
            and not any(abs(abs(v) - h) <= tol for h in true_all)
        ):
            out.append({"about": {}, "field": f, "value": v})
    return out


def _is_num(v):
    return isinstance(v, int | float) and not isinstance(v, bool)


def answer_of(spec, rows, summary):
    p, fmt = _paths(spec), GENERATOR["output_format"]
    rows = sorted(rows, key=lambda r: [str(r[k]) for k in spec["key"]])
    doc = {spec["collection"]: rows, "summary": summary}
    if fmt == "json":
        return {p["json"]: doc}
    if fmt == "csv":
        return {p["csv"]: rows}
    if fmt == "multi":
        return {p["csv"]: rows, p["summary"]: summary}
    return {p["sidecar"]: doc}


def _cell_text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def write_result(ws, spec, rows, summary):
    """Write every output the contract names (the reference solution's last step). An in-memory
    workspace (build()'s check) records the answer_of values under their paths instead."""
    if isinstance(ws, dict):
        ws.update(answer_of(spec, rows, summary))
        return
    p = _paths(spec)
    os.makedirs(os.path.join(ws, "output"), exist_ok=True)
    for rel, value in answer_of(spec, rows, summary).items():
        with open(os.path.join(ws, rel), "w", encoding="utf-8", newline="") as f:
            if rel.endswith(".csv"):
                f.write(
                    to_csv(
                        spec["columns"],
                        [[_cell_text(r[c]) for c in spec["columns"]] for r in value],
                    )
                )
            else:
                json.dump(value, f, indent=2)
    if "report" in p:
        rows = answer_of(spec, rows, summary)[p["sidecar"]][spec["collection"]]
        lines = [
            f"# {spec['title']}",
            "",
            "| " + " | ".join(spec["columns"]) + " |",
            "|" + "---|" * len(spec["columns"]),
        ]
        lines += ["| " + " | ".join(_cell_text(r[c]) for c in spec["columns"]) + " |" for r in rows]
        lines += ["", "## Summary", ""] + [f"- {k}: {_cell_text(v)}" for k, v in summary.items()]
        with open(os.path.join(ws, p["report"]), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def output_instruction(spec):
    fmt = GENERATOR["output_format"]
    what = "one row per " + " and ".join(spec["key"]) + (" pair" if len(spec["key"]) == 2 else "")
    if fmt == "json":
        return (
            f"Write {_paths(spec)['json']}: a JSON object with a list `{spec['collection']}` ({what}) and a "
            "`summary` object, as the schema in the contract says."
        )
    if fmt == "csv":
        return f"Write {_paths(spec)['csv']} with the contract's columns ({what}) and a header row."
    if fmt == "multi":
        return (
            f"Write {_paths(spec)['csv']} with the contract's columns ({what}) and output/summary.json with "
            "the summary object the contract describes."
        )
    return (
        "Write a short markdown report to output/report.md for a human reader, and put the facts it states "
        f"in output/report_facts.json: a list `{spec['collection']}` ({what}) and a `summary` object, as the "
        "contract's schema says. The report itself is graded too: it must state every fact the contract's "
        "report entry lists, each row's values in the table row or sentence that names its key, and "
        "nothing that is not so."
    )


def finish(intro, files, spec, rows, summary, decisions, naive=None):
    """The dict build() returns: instruction, files, answer key, contract (no answer values).
    `naive` is (rows, summary) as computed with nobody out of scope: for a report, what its text
    must not state (the facts it must state the contract validator takes from the sidecar)."""
    rounding = (
        "Round every computed non-integer number in the outputs to two decimal places, half up, "
        "as the last step; compute and compare with unrounded values unless a rule says otherwise."
    )
    instruction = "\n\n".join(
        [
            intro,
            output_instruction(spec),
            "Only files under output/ are graded; do not change the input files.",
        ]
    )
    answer = answer_of(spec, rows, summary)
    paths = _paths(spec)
    if "report" in paths:
        forbidden = forbidden_facts(spec, rows, summary, naive)
        answer[paths["report"]] = {"forbidden": forbidden} if forbidden else {}
    rules = [str(d) for d in decisions if has_summary() or not isinstance(d, SummaryRule)]
    return {
        "instruction": instruction,
        "files": dict(sorted(files.items())),
        "answer": answer,
        "contract": {
            "outputs": contract_outputs(spec),
            "tolerance": dict(TOLERANCE),
            "decisions": list(dict.fromkeys(rules + [rounding])),
        },
    }


# ---------------------------------------------------------------- re-drawing until every injection matters

DRAWS = 8  # draws build() tries per seed before it gives up


def build(seed):
    """The task for `seed`: the skeleton's draw(seed), re-drawn (rng_for salted by the draw
    number) until skipping any injection this knob level declares changes the answer, as verify's
    ablation check requires. Draw 0 is the seed's original task, so a seed whose injections all
    mattered keeps its task. When no draw of DRAWS does, draw 0 is returned and verify drops it
    (naming the level the inert injection makes its knob act as): a later draw would be dropped
    as well, and draw 0 keeps the seed's task and verdict what they always were."""
    first = None
    try:
        for n in range(DRAWS):
            reset_state()
            ATTEMPT[0] = n
            task = draw(seed)
            first = first or task
            if not any_inert(task):
                return task
        return first
    finally:
        reset_state()


def any_inert(task):
    """Whether skipping some declared injection leaves the answer as the grader would take it:
    the reference solve() run with each skipped on the draw's files in memory (no disk), its
    outputs compared with the answer key (a report's forbidden values aside). A skip that
    raises changes the answer, as in verify."""
    tol = task["contract"]["tolerance"]
    paths = [o.get("sidecar") or o["path"] for o in task["contract"]["outputs"]]
    for name in injections():
        ws = dict(task["files"])
        try:
            solve(ws, skip=name)
        except Exception:  # noqa: BLE001 (the ablated reader failing is a changed answer)
            continue
        if all(same_value(task["answer"][p], ws.get(p), tol) for p in paths):
            return True
    return False


def same_value(exp, got, tol):
    """The grader's equality on in-memory values: numbers within the tolerance (an integer only
    by a whole number), booleans exactly, strings trimmed, records with exactly their keys."""
    if isinstance(exp, bool) or isinstance(got, bool):
        return exp is got
    if isinstance(exp, int | float):
        if not isinstance(got, int | float) or (
            isinstance(exp, int) and not float(got).is_integer()
        ):
            return False
        return abs(got - exp) <= tol["abs"] + tol["rel"] * abs(exp) + 1e-9
    if isinstance(exp, str):
        return isinstance(got, str) and got.strip() == exp.strip()
    if isinstance(exp, list):
        return (
            isinstance(got, list)
            and len(got) == len(exp)
            and all(same_value(e, g, tol) for e, g in zip(exp, got, strict=True))
        )
    if isinstance(exp, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(exp)
            and all(same_value(v, got[k], tol) for k, v in exp.items())
        )
    return exp == got
