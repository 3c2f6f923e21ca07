"""The generator contract (fixed; docs/architecture.md, "The generator") as typed records and a strict validator.

A generator is one standard-library Python file with a `GENERATOR` metadata dict, `build(seed)`
and `solve(workspace)`. It always runs inside a sandbox (generators/runner.py); this module only
checks what came back, on the host, so a hostile generator cannot hand us a malformed task.
The GENERATOR metadata and ContractError are generators/meta.py (it imports no grader).
"""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Any

from clawloop.generators.meta import ContractError
from clawloop.harness.taskfolder.grader import REPORT_WHERE, report_facts
from clawloop.harness.taskfolder.spec import LENIENCIES, BuildResult, Contract, OutputSpec

# What one contract output entry may be; "state" is a domain task's final database state (a folder
# of <table>.json or an SQL dump), graded by end-state predicates (harness/taskfolder/state_predicates.py).
FILE_FORMATS = ("json", "csv", "report", "state")
STATE_STORES = ("json", "sqlite")
MAX_FILES = 400
MAX_TOTAL_BYTES = 8 * 1024 * 1024


def check_relpath(p: Any, what: str) -> str:
    """A workspace-relative POSIX path with no escape (no absolute path, no `..`)."""
    if not isinstance(p, str) or not p or p.startswith("/") or "\\" in p or "\x00" in p:
        raise ContractError(f"{what}: {p!r} is not a relative POSIX path")
    norm = posixpath.normpath(p)
    if norm != p.rstrip("/") or norm.startswith("..") or norm == ".":
        raise ContractError(f"{what}: {p!r} escapes the workspace or is not normalised")
    return norm


def _output_spec(o: Any, i: int) -> OutputSpec:
    where = f"contract.outputs[{i}]"
    if not isinstance(o, dict):
        raise ContractError(f"{where} must be an object")
    fmt = o.get("format")
    if fmt not in FILE_FORMATS:
        raise ContractError(f"{where}.format must be one of {FILE_FORMATS}, got {fmt!r}")
    spec = OutputSpec(
        path=check_relpath(o.get("path"), f"{where}.path"),
        format=fmt,
        columns=[str(c) for c in o.get("columns", [])],
        key=[str(c) for c in o.get("key", [])],
        schema=dict(o.get("schema", {}) or {}),
        sidecar=check_relpath(o["sidecar"], f"{where}.sidecar") if o.get("sidecar") else "",
        lenient=[str(x) for x in o.get("lenient", []) or []],
        covers=_covers(o.get("covers"), f"{where}.covers"),
    )
    unknown = sorted(set(spec.lenient) - set(LENIENCIES))
    if unknown:
        raise ContractError(f"{where}.lenient: unknown {unknown}; known: {list(LENIENCIES)}")
    if fmt == "csv" and not spec.columns:
        raise ContractError(f"{where}: a csv output must list its columns")
    if not set(spec.key) <= set(spec.columns):
        raise ContractError(f"{where}: key columns {spec.key} must be among columns {spec.columns}")
    if fmt == "state" and spec.schema.get("store") not in STATE_STORES:
        raise ContractError(f"{where}: a state output needs schema.store, one of {STATE_STORES}")
    if fmt == "state" and spec.schema.get("store") == "sqlite" and not spec.schema.get("file"):
        raise ContractError(f"{where}: a sqlite state output needs schema.file (the SQL dump)")
    if fmt == "report" and not spec.sidecar:
        raise ContractError(f"{where}: a report output needs a machine-checkable sidecar path")
    return spec


def _covers(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ContractError(f'{where} must be a list of {{"per": [key columns], "fields": [...]}}')
    out = []
    for i, c in enumerate(value):
        per, fields = (c.get("per", []), c.get("fields")) if isinstance(c, dict) else (None, None)
        if not (
            isinstance(per, list)
            and isinstance(fields, list)
            and fields
            and all(isinstance(x, str) and x for x in per + fields)
        ):
            raise ContractError(
                f'{where}[{i}] must be {{"per": [key columns], "fields": [names, non-empty]}}'
            )
        out.append({"per": list(per), "fields": list(fields)})
    return out


def _report_fact(f: Any, where: str) -> dict[str, Any]:
    """One fact of a report's criteria: {"about": {column: scalar}, "field": str, "value":
    scalar, "where"?: one of REPORT_WHERE}."""
    scalar = str | int | float | bool
    about = f.get("about", {}) if isinstance(f, dict) else None
    if (
        not isinstance(about, dict)
        or not all(isinstance(k, str) and isinstance(v, scalar) for k, v in about.items())
        or not isinstance(f.get("field"), str)
        or not f["field"]
        or not isinstance(f.get("value"), scalar)
        or f.get("where", "row" if about else "named") not in REPORT_WHERE
    ):
        raise ContractError(
            f'{where} must be {{"about": {{key column: value}}, "field": name, "value": a '
            f'string, number or boolean}} (optionally "where": one of {REPORT_WHERE})'
        )
    return dict(f, about=dict(about))


def report_criteria(o: OutputSpec, answer: dict[str, Any]) -> tuple[OutputSpec, dict[str, Any]]:
    """A report output's hidden criteria (answer[report path]): its facts (given, else every
    fact of the sidecar's answer) and forbidden facts; and the output with `covers` (given,
    else the facts' fields per key), which must name every field the facts hold."""
    where = f"answer[{o.path!r}]"
    crit = answer.get(o.path, {})
    if not isinstance(crit, dict) or set(crit) - {"facts", "forbidden"}:
        raise ContractError(
            f'{where} must be {{"facts": [...], "forbidden": [...]}} (both optional)'
        )
    facts = crit.get("facts")
    if facts is None:
        facts = report_facts(answer[o.sidecar], o.schema)
    forbidden = crit.get("forbidden", [])
    if not isinstance(facts, list) or not isinstance(forbidden, list):
        raise ContractError(f"{where}: facts and forbidden must be lists")
    facts = [_report_fact(f, f"{where}.facts[{i}]") for i, f in enumerate(facts)]
    forbidden = [_report_fact(f, f"{where}.forbidden[{i}]") for i, f in enumerate(forbidden)]
    if not facts:
        raise ContractError(
            f"{where}: a report needs facts its text must state, and its sidecar's answer holds none"
        )
    covers = o.covers
    if not covers:
        groups: dict[tuple[str, ...], list[str]] = {}
        for f in facts:
            fields = groups.setdefault(tuple(f["about"]), [])
            if f["field"] not in fields:
                fields.append(f["field"])
        covers = [{"per": list(per), "fields": fields} for per, fields in groups.items()]
    named = {(tuple(c["per"]), x) for c in covers for x in c["fields"]}
    unnamed = sorted({f["field"] for f in facts if (tuple(f["about"]), f["field"]) not in named})
    if unnamed:
        raise ContractError(
            f"contract output {o.path!r}: covers does not name the field(s) {unnamed} its facts hold"
        )
    out = {"facts": facts} | ({"forbidden": forbidden} if forbidden else {})
    return dataclasses.replace(o, covers=covers), out


def check_record_lists(value: Any, schema: Any, where: str, depth: int = 0) -> None:
    """Every list of records in an answer needs a schema saying how rows are matched: `"key":
    [fields]` (order-insensitive, by those fields) or `"ordered": true` (by position). Otherwise
    the same rows in another order would score as wrong."""
    schema = schema if isinstance(schema, dict) else {}
    if depth > 8:
        return
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        each = schema.get("additionalProperties")
        for k, v in value.items():
            check_record_lists(v, props.get(k, each), f"{where}.{k}", depth + 1)
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        key = schema.get("key")
        if schema.get("ordered") is True:
            return
        if not isinstance(key, list) or not key or not all(isinstance(k, str) for k in key):
            raise ContractError(
                f'{where} is a list of records: its schema needs "key": [fields that identify a '
                'row] (rows match in any order) or "ordered": true (rows match by position)'
            )
        lacking = [k for k in key if not all(k in row for row in value)]
        if lacking:
            raise ContractError(f"{where}: key field(s) {lacking} are not in every row")


def graded_paths(contract: Contract) -> list[str]:
    """The files the answer key grades: each output, and a report's sidecar (the report's own
    path holds the criteria for its text, which validate_build fills in when a generator
    gives none)."""
    paths = []
    for o in contract.outputs:
        paths += [o.path, o.sidecar] if o.format == "report" else [o.path]
    return paths


def validate_build(obj: Any) -> BuildResult:
    """Check a build() return value against the contract; raise ContractError saying what is wrong."""
    if not isinstance(obj, dict):
        raise ContractError(f"build() must return a dict, got {type(obj).__name__}")
    missing = {"instruction", "files", "answer", "contract"} - obj.keys()
    if missing:
        raise ContractError(f"build() result is missing key(s): {', '.join(sorted(missing))}")
    instruction, files, answer, c = obj["instruction"], obj["files"], obj["answer"], obj["contract"]
    if not isinstance(instruction, str) or not instruction.strip():
        raise ContractError("build()['instruction'] must be a non-empty string")
    if not isinstance(files, dict) or not files:
        raise ContractError("build()['files'] must be a non-empty {relpath: str} dict")
    if len(files) > MAX_FILES:
        raise ContractError(f"build()['files'] has {len(files)} files; the limit is {MAX_FILES}")
    total = 0
    for p, text in files.items():
        check_relpath(p, "build()['files'] key")
        if not isinstance(text, str):
            raise ContractError(f"build()['files'][{p!r}] must be a str, got {type(text).__name__}")
        total += len(text.encode())
    if total > MAX_TOTAL_BYTES:
        raise ContractError(f"build()['files'] total {total} bytes; the limit is {MAX_TOTAL_BYTES}")
    if not isinstance(c, dict) or not isinstance(c.get("outputs"), list) or not c["outputs"]:
        raise ContractError("build()['contract']['outputs'] must be a non-empty list")
    tol = c.get("tolerance", {"abs": 0.0, "rel": 0.0})
    if not isinstance(tol, dict) or not all(
        isinstance(v, int | float) and v >= 0 for v in tol.values()
    ):
        raise ContractError(
            "build()['contract']['tolerance'] must be {'abs': float>=0, 'rel': float>=0}"
        )
    decisions = c.get("decisions", [])
    if not isinstance(decisions, list) or not all(isinstance(d, str) for d in decisions):
        raise ContractError("build()['contract']['decisions'] must be a list of strings")
    contract = Contract(
        outputs=[_output_spec(o, i) for i, o in enumerate(c["outputs"])],
        tolerance={"abs": float(tol.get("abs", 0.0)), "rel": float(tol.get("rel", 0.0))},
        decisions=list(decisions),
    )
    if not isinstance(answer, dict):
        raise ContractError("build()['answer'] must be a {output_relpath: value} dict")
    expected = set(graded_paths(contract))
    optional = {o.path for o in contract.outputs if o.format == "report"}
    if not expected - optional <= set(answer) <= expected:
        raise ContractError(
            f"build()['answer'] keys {sorted(answer)} must equal the graded outputs "
            f"{sorted(expected - optional)} (plus, for a report, the criteria under its path: "
            f"{sorted(optional)})"
        )
    answer = dict(answer)
    for o in contract.outputs:
        if o.format == "state":
            preds = answer[o.path].get("predicates") if isinstance(answer[o.path], dict) else None
            if not isinstance(preds, list) or not preds:
                raise ContractError(
                    f"answer[{o.path!r}] must be {{'predicates': [...]}}, non-empty"
                )
        elif o.format != "csv":
            path = o.sidecar if o.format == "report" else o.path
            check_record_lists(answer[path], o.schema, f"answer[{path!r}]")
    outputs = list(contract.outputs)
    for i, o in enumerate(outputs):
        if o.format == "report":
            outputs[i], answer[o.path] = report_criteria(o, answer)
    contract = dataclasses.replace(contract, outputs=outputs)
    clash = expected & set(files)  # a state output is a folder: its files are the snapshot
    if clash:
        raise ContractError(
            f"output path(s) {sorted(clash)} already exist in the starting workspace"
        )
    return BuildResult(instruction=instruction, files=dict(files), answer=answer, contract=contract)
