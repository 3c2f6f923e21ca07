"""Trivial-solution probes: outputs a lazy or gaming agent could write without doing the task.

A sound task's grader must fail every probe (reward < 1). The verify stage writes each probe's
files into a copy of the workspace and grades it; a probe that passes drops the task.

    trivial_probes(contract, files) -> {"empty": {...}, "copy_inputs": {...}, "constant": {...}}

Each probe maps output paths (a report's markdown and its sidecar included) to file contents, built
only from the contract's shape and the starting files, never from the answer key.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

CONSTANT_ROWS = 3  # rows/items the constant probe writes, so key uniqueness is tested too


COPY_FILES = 24  # starting files tried as answers, smallest first
COPY_MAX = 1 << 20  # bigger files are data, not a hidden answer


def _csv_text(columns: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(rows)
    return buf.getvalue()


def shaped_value(schema: Any, mode: str, depth: int = 0) -> Any:
    """A JSON value of the schema's shape: "empty" (no data) or "constant" (every leaf one value)."""
    schema = schema if isinstance(schema, dict) else {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if depth > 12:
        return None
    if kind == "object" or (kind is None and isinstance(schema.get("properties"), dict)):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {str(k): shaped_value(v, mode, depth + 1) for k, v in props.items()}
    if kind == "array":
        if mode == "empty":
            return []
        return [shaped_value(schema.get("items"), mode, depth + 1) for _ in range(CONSTANT_ROWS)]
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return mode == "constant"
    if kind == "string":
        return "" if mode == "empty" else "n/a"
    return None if mode == "empty" else 0


def _pick_input(files: dict[str, str], suffix: str, columns: list[str]) -> str:
    """The starting file a copier would most plausibly copy: same suffix, most shared columns."""

    def score(item: tuple[str, str]) -> tuple[int, int, str]:
        path, text = item
        first = text.split("\n", 1)[0]
        shared = sum(1 for c in columns if c in first)
        return (int(path.endswith(suffix)), shared, path)

    if not files:
        return ""
    return max(sorted(files.items()), key=score)[1]


def trivial_probes(contract: dict[str, Any], files: dict[str, str]) -> dict[str, dict[str, str]]:
    probes: dict[str, dict[str, str]] = {"empty": {}, "copy_inputs": {}, "constant": {}}
    for o in contract.get("outputs", []):
        fmt, path = o.get("format"), str(o.get("path", ""))
        columns = [str(c) for c in o.get("columns", [])]
        if fmt == "state":
            for name, probe in state_probes(o, files).items():
                probes.setdefault(name, {}).update(probe)
            continue
        if fmt == "csv":
            probes["empty"][path] = _csv_text(columns, [])
            probes["constant"][path] = _csv_text(
                columns, [["0"] * len(columns) for _ in range(CONSTANT_ROWS)]
            )
            probes["copy_inputs"][path] = _pick_input(files, ".csv", columns)
            continue
        target = path
        if fmt == "report":
            target = str(o.get("sidecar", ""))
            probes["empty"][path] = ""
            probes["constant"][path] = "# Report\n\nAll values are 0.\n"
            probes["copy_inputs"][path] = _pick_input(files, ".md", [])
        schema = o.get("schema") or {}
        probes["empty"][target] = json.dumps(shaped_value(schema, "empty"))
        probes["constant"][target] = json.dumps(shaped_value(schema, "constant"))
        probes["copy_inputs"][target] = _pick_input(
            files, ".json", list((schema.get("properties") or {}).keys())
        )
    probes.update(copy_probes(contract, files))
    return probes


def copy_probes(contract: dict[str, Any], files: dict[str, str]) -> dict[str, dict[str, str]]:
    """One probe per starting file (the first COPY_FILES by size): that file copied verbatim to
    every graded output. A file that passes is an answer left in the workspace (`cp README.txt
    output/totals.json`), whatever its name or format."""
    targets = []
    for o in contract.get("outputs", []):
        if o.get("format") == "state":  # a folder of starting files, probed by state_probes
            continue
        targets.append(str(o.get("path", "")))
        if o.get("format") == "report":
            targets.append(str(o.get("sidecar", "")))
    small = sorted((len(text), path) for path, text in files.items() if len(text) <= COPY_MAX)
    return {
        f"copy:{path}": {target: files[path] for target in targets}
        for _, path in small[:COPY_FILES]
        if targets
    }


def _touched(value: Any) -> Any:
    """Every scalar changed: what an agent that rewrites every record leaves behind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, list):
        return [_touched(v) for v in value]
    if isinstance(value, dict):
        return {k: _touched(v) for k, v in value.items()}
    return value


def state_probes(o: dict[str, Any], files: dict[str, str]) -> dict[str, dict[str, str]]:
    """A state output's probes: every table emptied ("delete all") and, for json tables, every
    field of every record changed ("touch all"). The guard predicate must fail both."""
    path = str(o.get("path", ""))
    schema = o.get("schema") or {}
    if schema.get("store") == "sqlite":
        return {"state_delete_all": {f"{path}/{schema.get('file', '')}": ""}}
    delete, touch = {}, {}
    for rel, text in files.items():
        if rel.startswith(path + "/") and rel.endswith(".json"):
            try:
                data = json.loads(text)
            except ValueError:
                continue
            delete[rel] = "{}" if isinstance(data, dict) else "[]"
            if isinstance(data, dict):
                touched = {k: _touched(v) for k, v in data.items()}
            else:
                touched = [_touched(v) for v in data]
            touch[rel] = json.dumps(touched)
    return {"state_delete_all": delete, "state_touch_all": touch}
