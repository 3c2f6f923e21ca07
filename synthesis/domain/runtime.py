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

Reference plans (`run_plans`, in the sandbox): the snapshot is read from the workspace's files
once; each plan then runs in its own forked process on a copy of it, bounded to PLAN_MEMORY_MB
of memory beyond the snapshot and PLAN_SECONDS of CPU and wall time (the plans file may set
both), so a plan that runs out is one plan failed, with the reason, not the executor killed.
A plan's final state comes back as a delta against the initial one (`delta`), never whole; the
host rebuilds it with `apply_delta` over the initial state it computes from the same files with
this module's pure data functions (`load_state`, `as_records`), no domain code involved.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import pickle
import signal
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
    except MemoryError:  # the process's limit, not the tool's answer: the caller says which
        raise
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
    except MemoryError:
        print(json.dumps({"error": "the tool ran out of memory; the state is unchanged"}))
        return 1
    print(json.dumps(result, indent=1, ensure_ascii=False, default=str))
    return 0


# ---------------------------------------------------------------- reference plans


def resolve(value, results):
    """A parameter: a literal, or {"$ref": [step, field]}: a field of an earlier step's result
    (the value a lookup produced, consumed later); a dotted field is a path into it
    (`address.city`, `payment_history.0.payment_method_id`)."""
    if isinstance(value, dict) and "$ref" in value:
        step, field = value["$ref"]
        got = results[step]
        if isinstance(got, list) and got:
            got = got[0]
        if isinstance(got, dict) and field in got:
            return got[field]
        found = field_at(got, field)
        if found is None:
            raise ToolFailed(f"step {step}'s result has no field {field!r}")
        return found
    return value


def field_at(value, path):
    """The value at a dotted path (list positions as numbers); None where there is none."""
    for part in str(path).split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _copy(state):
    """A copy of a json state to restore if a step fails: a pickle round trip (several times
    faster than deepcopy on megabytes of records), deepcopy for what pickle cannot take."""
    try:
        return pickle.loads(pickle.dumps(state, pickle.HIGHEST_PROTOCOL))
    except Exception:  # a tool put something unpicklable in the state
        return copy.deepcopy(state)


def run_plan(root, spec, plan, state=None):
    """Run a plan's steps on a fresh copy of the snapshot (or on `state`), in memory. Each step
    says whether it must succeed ("ok") or fail ("error"); a broken expectation ends the plan."""
    state = load_state(root, spec) if state is None else state
    trace, results = [], []
    for i, step in enumerate(plan["steps"]):
        tool = spec["tools"][step["tool"]]
        expect = step.get("expect", "ok")  # "any": a probe that applies tools regardless
        # Only a step allowed to fail needs the state before it: a failed "ok" step ends the plan.
        backup = _copy(state) if spec["store"] != "sqlite" and expect != "ok" else None
        try:
            params = {k: resolve(v, results) for k, v in step["params"].items()}
            result, error = invoke(root, tool, state, params), ""
            if spec["store"] == "sqlite":
                state.commit()
        except ToolFailed as exc:
            result, error, params = None, str(exc), step["params"]
            if spec["store"] == "sqlite":
                state.rollback()
            elif backup is not None:
                state = backup
        results.append(result)
        text = json.dumps(result, default=str, ensure_ascii=False)[:MAX_RESULT]
        trace.append({"step": i, "params": params, "error": error, "result": text})
        if (expect == "ok" and error) or (expect == "error" and not error):
            why = error or "it succeeded"
            return {
                "ok": False,
                "why": f"step {i} {step['tool']}: expected {expect}: {why}",
                "trace": trace,
            }
    return {"ok": True, "trace": trace, "final": as_records(spec, state)}


# ---------------------------------------------------------------- final states as deltas


def delta(initial, final):
    """A final state {table: [record]} told against the initial one: per table "same", or a
    list of segments, each [start, stop] (initial records start..stop-1, unchanged) or
    {"r": record} (a changed or new record). A table absent is one the plan removed. A plan's
    result is then the size of what it changed, not of the state."""
    out = {}
    for name, rows in final.items():
        base = initial.get(name, [])
        out[name] = "same" if rows == base else _segments(base, rows)
    return out


def _segments(base, rows):
    out, k, index = [], 0, None
    for rec in rows:
        if k < len(base) and base[k] == rec:
            j = k
        elif k + 1 < len(base) and base[k + 1] == rec:  # the record before it changed
            j = k + 1
        else:
            if index is None:  # records moved: find them by content (built once, if ever)
                index = {}
                for i, r in enumerate(base):
                    index.setdefault(json.dumps(r, sort_keys=True, default=str), i)
            j = index.get(json.dumps(rec, sort_keys=True, default=str))
        if j is None:
            out.append({"r": rec})
            continue
        if out and isinstance(out[-1], list) and out[-1][1] == j:
            out[-1][1] = j + 1
        else:
            out.append([j, j + 1])
        k = j + 1
    return out


def apply_delta(initial, changes):
    """The final state a delta describes (the host's side of `delta`); records are shared with
    `initial`, not copied."""
    out = {}
    for name, d in changes.items():
        if d == "same":
            out[name] = initial.get(name, [])
            continue
        rows = []
        for seg in d:
            rows.extend(initial[name][seg[0] : seg[1]] if isinstance(seg, list) else [seg["r"]])
        out[name] = rows
    return out


# ---------------------------------------------------------------- one process per plan

PLAN_MEMORY_MB = 512  # memory a plan may use beyond the loaded snapshot (its own process)
PLAN_SECONDS = 60  # wall and CPU seconds a plan may take
SIGNALS = {
    9: "SIGKILL (out of memory)",
    14: "SIGALRM (over its time)",
    24: "SIGXCPU (over its CPU time)",
}


def _vm_bytes():
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _limit(memory_mb, seconds):
    """Bound this (forked) process: address space = what it holds now + memory_mb, CPU and wall
    time = seconds. Never above a limit the sandbox already set."""
    import resource

    def lower(kind, want):
        soft, hard = resource.getrlimit(kind)
        for cap in (soft, hard):
            if cap != resource.RLIM_INFINITY:
                want = min(want, cap)
        resource.setrlimit(kind, (want, hard))

    vm = _vm_bytes()
    if vm is not None:
        lower(resource.RLIMIT_AS, vm + memory_mb * 1024 * 1024)
    lower(resource.RLIMIT_CPU, int(seconds))
    for sig in (signal.SIGALRM, signal.SIGXCPU):  # over the limit ends the process, whatever
        signal.signal(sig, signal.SIG_DFL)  # handler it inherited
    signal.alarm(int(seconds))


def _child(root, spec, plan, initial, blob, memory_mb, seconds):
    """What the forked process computes: the plan's result, with its final state as a delta."""
    try:
        _limit(memory_mb, seconds)
        state = pickle.loads(blob) if blob is not None else None
        res = run_plan(root, spec, plan, state)
        if res.get("ok"):
            res["final"] = delta(initial, res["final"])
        return json.dumps(res, default=str, ensure_ascii=False)
    except MemoryError:
        why = f"the plan ran out of memory (limit {memory_mb} MiB beyond the snapshot)"
    except Exception as exc:  # one broken plan must not hide the others' results
        why = f"{type(exc).__name__}: {exc}"
    return json.dumps({"ok": False, "why": why, "trace": []})


def run_isolated(root, spec, plan, initial, blob, memory_mb=PLAN_MEMORY_MB, seconds=PLAN_SECONDS):
    """Run one plan in a forked process bounded by `_limit`; its result, or why it has none."""
    if not hasattr(os, "fork"):
        return json.loads(_child(root, spec, plan, initial, blob, 1 << 20, 1 << 20))
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # the child: compute, write the result to the pipe, exit without cleanup
        code = 0
        try:
            os.close(read_end)
            data = _child(root, spec, plan, initial, blob, memory_mb, seconds).encode()
            with os.fdopen(write_end, "wb") as w:
                w.write(data)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as r:
        data = r.read()
    _, status, usage = os.wait4(pid, 0)
    peak_mb = round(usage.ru_maxrss / 1024, 1)  # the plan process's peak resident set (KiB)
    try:
        return dict(json.loads(data.decode()), peak_mb=peak_mb)
    except ValueError:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            how = f"was killed by {SIGNALS.get(sig, f'signal {sig}')}"
        else:
            how = f"exited {os.WEXITSTATUS(status)} without a result"
        limits = f"limits: {memory_mb} MiB beyond the snapshot, {seconds} s"
        why = f"the plan's process {how} ({limits})"
        return {"ok": False, "why": why, "trace": [], "peak_mb": peak_mb}


def run_plans(plans_path, out_path, root=ROOT):
    """Every plan of PLANS.json ({"plans": [...], "memory_mb", "seconds"} or a bare list), each in
    its own bounded process over one loaded snapshot; OUT is JSON lines, one per plan, written
    as each ends (a crash leaves the ones before it readable). The initial state is not written:
    the host computes it from the same files with `as_records(spec, load_state(...))`."""
    spec = read_spec(root)
    with open(plans_path, encoding="utf-8") as f:
        doc = json.load(f)
    plans = doc["plans"] if isinstance(doc, dict) else doc
    memory_mb = (
        int(doc.get("memory_mb", PLAN_MEMORY_MB)) if isinstance(doc, dict) else PLAN_MEMORY_MB
    )
    seconds = int(doc.get("seconds", PLAN_SECONDS)) if isinstance(doc, dict) else PLAN_SECONDS
    state = load_state(root, spec)
    initial = as_records(spec, state)
    blob = None if spec["store"] == "sqlite" else pickle.dumps(state, pickle.HIGHEST_PROTOCOL)
    if spec["store"] == "sqlite":
        state.close()  # each plan loads its own connection: none is carried across a fork
    del state
    with open(out_path, "w", encoding="utf-8") as out:
        for i, plan in enumerate(plans):
            res = run_isolated(root, spec, plan, initial, blob, memory_mb, seconds)
            out.write(json.dumps(dict(res, plan=i), default=str, ensure_ascii=False) + "\n")
            out.flush()


if __name__ == "__main__":  # python3 runtime.py PLANS.json OUT.json (the reference executor)
    run_plans(sys.argv[1], sys.argv[2])
