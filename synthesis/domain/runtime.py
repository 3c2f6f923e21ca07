"""The skill CLIs' runtime: runs one domain tool against the workspace's state snapshot.

STANDARD LIBRARY ONLY, and never imported by the host to run domain code: this file is copied into
every domain-grounded task's workspace as `skills/_lib/runtime.py`, where the agent's skill CLIs
(`skills/<skill>/<tool> --param VALUE ...`) call `main`, and it is uploaded into a sandbox by
`clawloop.synthesis.domain.execute`, which runs reference plans with `run_plans`.

Layout it expects (written by clawloop.synthesis.domain.workspace):

    state/                   the snapshot: <table>.json files, or one SQL dump (sqlite domains)
    skills/_lib/tools.json   {"store": "json"|"sqlite", "state": "state" | "state/<name>.sql",
                              "tools": {name: {"file", "shape", "symbol", "params": [...]}}}
    skills/_lib/domain/      the domain's tools/*.py (third-party code, run only here)

A call loads the state, invokes the tool (json: the tables dict, mutated in place; sqlite: a
connection over the dump loaded in memory), and only when it succeeded saves the state back
atomically (every file written to a temporary name, then renamed). It prints the result as JSON;
an error (a returned "Error: ..." string or a raised exception) prints {"error": ...}, exits 1
and leaves the state as it was.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import sqlite3
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the workspace: skills/_lib/ is two levels down
MAX_RESULT = 20_000  # characters of a result kept in a plan's trace


class ToolFailed(Exception):
    """The tool returned or raised an error: the state is not saved."""


def read_spec(root=ROOT):
    with open(os.path.join(root, "skills", "_lib", "tools.json"), encoding="utf-8") as f:
        return json.load(f)


# ---------------------------------------------------------------- state snapshots


def load_state(root, spec):
    """The tools' first argument: {table: data} (json) or a sqlite3 connection (sqlite)."""
    path = os.path.join(root, spec["state"])
    if spec["store"] == "sqlite":
        conn = sqlite3.connect(":memory:")
        with open(path, encoding="utf-8") as f:
            conn.executescript(f.read())
        return conn
    tables = {}
    for name in sorted(os.listdir(path)):
        if name.endswith(".json"):
            with open(os.path.join(path, name), encoding="utf-8") as f:
                tables[name[: -len(".json")]] = json.load(f)
    return tables


def _replace_all(texts):
    """Write every (path, text) to a temporary file beside it, then rename them all."""
    staged = []
    try:
        for path, text in texts:
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            staged.append((tmp, path))
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)


def dump_sqlite(conn):
    return "\n".join(conn.iterdump()) + "\n"


def save_state(root, spec, state):
    path = os.path.join(root, spec["state"])
    if spec["store"] == "sqlite":
        _replace_all([(path, dump_sqlite(state))])
        return
    _replace_all(
        (os.path.join(path, f"{name}.json"), json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        for name, data in sorted(state.items())
    )


def as_records(spec, state):
    """The state as {table: [record]} for the host: json tables keyed by primary key become
    records with the key under "_key"; sqlite rows become dicts."""
    if spec["store"] == "sqlite":
        names = [
            r[0]
            for r in state.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        out = {}
        for name in sorted(names):
            cur = state.execute(f'SELECT * FROM "{name}"')
            cols = [c[0] for c in cur.description]
            out[name] = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        return out
    out = {}
    for name, data in state.items():
        if isinstance(data, dict):
            out[name] = [
                dict(v, _key=k) if isinstance(v, dict) else {"_key": k, "value": v}
                for k, v in data.items()
            ]
        else:
            out[name] = list(data) if isinstance(data, list) else [{"value": data}]
    return out


# ---------------------------------------------------------------- invoking a tool

_MODULES = {}


def _module(root, file):
    if file not in _MODULES:
        tools_dir = os.path.join(root, "skills", "_lib", "domain", "tools")
        if tools_dir not in sys.path:
            sys.path.insert(0, tools_dir)
        path = os.path.join(root, "skills", "_lib", "domain", file)
        name = "domain_" + os.path.splitext(os.path.basename(file))[0]
        mod_spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(mod)
        _MODULES[file] = mod
    return _MODULES[file]


def invoke(root, tool, state, params):
    """Call one tool; its result, or ToolFailed with the error text."""
    mod = _module(root, tool["file"])
    target = getattr(mod, tool["symbol"])
    if tool["shape"] == "class":
        target = target.invoke
    try:
        result = target(state, **params)
    except Exception as exc:  # a domain tool raising is an error the agent sees, not a crash
        raise ToolFailed(f"{type(exc).__name__}: {exc}") from None
    if isinstance(result, str):
        if result.strip().lower().startswith("error"):
            raise ToolFailed(result.strip())
        try:
            return json.loads(result)
        except ValueError:
            return result
    return result


def call(root, spec, name, params):
    """Load, invoke, save on success: what one CLI call does. Returns the result."""
    tool = spec["tools"][name]
    state = load_state(root, spec)
    result = invoke(root, tool, state, params)
    save_state(root, spec, state)
    return result


# ---------------------------------------------------------------- the CLI


def _coerce(param, text):
    kind = param.get("type", "string")
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
        if kind == "boolean":
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes")
        if kind in ("array", "object"):
            return json.loads(text)
    except ValueError:
        raise SystemExit(f"--{param['name']}: expected a {kind}, got {text!r}") from None
    return text


def parse_args(tool, argv):
    """`--name VALUE` pairs (or `--name=VALUE`) into typed parameters; errors name the flag."""
    params = {p["name"]: p for p in tool["params"]}
    out, i = {}, 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            raise SystemExit(f"unexpected argument {arg!r}: parameters are --name VALUE")
        name, _, value = arg[2:].partition("=")
        name = name.replace("-", "_")
        if name not in params:
            raise SystemExit(f"unknown parameter --{name}; known: {', '.join(sorted(params))}")
        if not _:
            i += 1
            if i >= len(argv):
                raise SystemExit(f"--{name} needs a value")
            value = argv[i]
        out[name] = _coerce(params[name], value)
        i += 1
    missing = [n for n, p in params.items() if p.get("required") and n not in out]
    if missing:
        raise SystemExit("missing required parameter(s): " + ", ".join(f"--{n}" for n in missing))
    return out


def usage(name, tool):
    flags = " ".join(
        f"--{p['name']} {p.get('type', 'string').upper()}"
        if p.get("required")
        else f"[--{p['name']} {p.get('type', 'string').upper()}]"
        for p in tool["params"]
    )
    return f"usage: {name} {flags}".rstrip()


def main(name, argv, root=ROOT):
    spec = read_spec(root)
    tool = spec["tools"][name]
    if argv and argv[0] in ("-h", "--help"):
        print(usage(name, tool))
        return 0
    try:
        params = parse_args(tool, argv)
    except SystemExit as exc:
        print(f"{name}: {exc}\n{usage(name, tool)}", file=sys.stderr)
        return 2
    try:
        result = call(root, spec, name, params)
    except ToolFailed as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(result, indent=1, ensure_ascii=False, default=str))
    return 0


# ---------------------------------------------------------------- reference plans


def resolve(value, results):
    """A parameter: a literal, or {"$ref": [step, field]}: a field of an earlier step's result
    (the value a lookup produced, consumed later)."""
    if isinstance(value, dict) and "$ref" in value:
        step, field = value["$ref"]
        got = results[step]
        if isinstance(got, list) and got:
            got = got[0]
        if not isinstance(got, dict) or field not in got:
            raise ToolFailed(f"step {step}'s result has no field {field!r}")
        return got[field]
    return value


def run_plan(root, spec, plan):
    """Run a plan's steps on a fresh copy of the snapshot, in memory. Each step says whether it
    must succeed ("ok") or fail ("error"); a broken expectation ends the plan."""
    state = load_state(root, spec)
    trace, results = [], []
    for i, step in enumerate(plan["steps"]):
        tool = spec["tools"][step["tool"]]
        backup = None if spec["store"] == "sqlite" else copy.deepcopy(state)
        try:
            params = {k: resolve(v, results) for k, v in step["params"].items()}
            result, error = invoke(root, tool, state, params), ""
            if spec["store"] == "sqlite":
                state.commit()
        except ToolFailed as exc:
            result, error, params = None, str(exc), step["params"]
            if spec["store"] == "sqlite":
                state.rollback()
            else:
                state = backup
        results.append(result)
        text = json.dumps(result, default=str, ensure_ascii=False)[:MAX_RESULT]
        trace.append({"step": i, "params": params, "error": error, "result": text})
        expect = step.get("expect", "ok")  # "any": a probe that applies tools regardless
        if (expect == "ok" and error) or (expect == "error" and not error):
            why = error or "it succeeded"
            return {
                "ok": False,
                "why": f"step {i} {step['tool']}: expected {expect}: {why}",
                "trace": trace,
            }
    return {"ok": True, "trace": trace, "final": as_records(spec, state)}


def run_plans(plans_path, out_path, root=ROOT):
    spec = read_spec(root)
    with open(plans_path, encoding="utf-8") as f:
        plans = json.load(f)
    out = []
    for plan in plans:
        try:
            out.append(run_plan(root, spec, plan))
        except Exception as exc:  # one broken plan must not hide the others' results
            out.append({"ok": False, "why": f"{type(exc).__name__}: {exc}", "trace": []})
    initial = as_records(spec, load_state(root, spec))
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"initial": initial, "plans": out}, f, default=str)


if __name__ == "__main__":  # python3 runtime.py PLANS.json OUT.json (the reference executor)
    run_plans(sys.argv[1], sys.argv[2])
