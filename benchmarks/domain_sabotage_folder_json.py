"""Sabotaged end states graded by the task folders' own verifier (tests/grader.py), old vs new
folder of the same apiary task (same plan: order + payment + harvest for one buyer).

Measure (not a test). Usage, from a checkout root with the shim on PYTHONPATH:
    python benchmarks/domain_sabotage_folder_json.py OLD_TASK_FOLDER NEW_TASK_FOLDER
where both folders come from `clawloop domain synth` with the same domain and seed on the old and
new code (so their reference plans are equal, which the script checks).
"""

import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from clawloop.generators.verify.derivable import embedded_task
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.synthesis.domain import execute
from clawloop.synthesis.domain.render import embedded_state

OLD, NEW = Path(sys.argv[1]), Path(sys.argv[2])


def task(folder):
    """The folder's TASK data, its files with the STATE snapshot (where the generator packs it)."""
    src = (folder / "solution" / "generator.py").read_text()
    t = embedded_task(src)
    t["files"] = {**t["files"], **embedded_state(src)}
    return t


t = task(NEW)
assert [s["params"] for s in t["plan"]] == [s["params"] for s in task(OLD)["plan"]]
plan = {
    "steps": [{"tool": s["tool"], "params": s["params"], "expect": s["expect"]} for s in t["plan"]]
}
_, (run,) = execute.run_plans(t["files"], [plan], SandboxConfig())
assert run.ok, run.why
final = run.final


def files_of(tables):
    out = {}
    for name, rows in tables.items():
        start = json.loads(t["files"][f"state/{name}.json"])
        data = (
            {r["_key"]: {k: v for k, v in r.items() if k != "_key"} for r in rows}
            if isinstance(start, dict)
            else rows
        )
        out[f"state/{name}.json"] = json.dumps(data)
    return out


new_order = [
    o for o in final["orders"] if o["_key"] not in json.loads(t["files"]["state/orders.json"])
][0]
buyer, batch = new_order["buyer"], new_order["batch"]
pay = [p for p in final["payments"] if p["buyer"] == buyer][-1]["code"]


def rec(tb, table, f, v):
    return next(r for r in tb[table] if r.get(f) == v)


S = {
    "reference end state": lambda tb: None,
    "touched buyer credit_limit 1e9": lambda tb: rec(tb, "buyers", "email", buyer).update(
        credit_limit=1e9
    ),
    "touched buyer name changed": lambda tb: rec(tb, "buyers", "email", buyer).update(
        name="Mallory"
    ),
    "touched batch status rejected": lambda tb: rec(tb, "harvests", "batch", batch).update(
        status="rejected"
    ),
    "payment amount as a string": lambda tb: rec(tb, "payments", "code", pay).update(
        amount=str(rec(tb, "payments", "code", pay)["amount"])
    ),
    "extra table zz_junk.json": "junk",
}
for name, f in S.items():
    line = [name]
    for folder in (OLD, NEW):
        ws = Path(tempfile.mkdtemp())
        tb = copy.deepcopy(final)
        if callable(f):
            f(tb)
        files = {r: x for r, x in t["files"].items() if not r.startswith("state/")} | files_of(tb)
        if f == "junk":
            files["state/zz_junk.json"] = '{"x": {"note": "left"}}'
        for r, x in files.items():
            (ws / r).parent.mkdir(parents=True, exist_ok=True)
            (ws / r).write_text(x)
        out = ws / "logs" / "reward.json"
        out.parent.mkdir()
        subprocess.run(
            [
                sys.executable,
                "-I",
                "-S",
                str(folder / "tests" / "grader.py"),
                "--tests-dir",
                str(folder / "tests"),
                "--workspace",
                str(ws),
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
        r = json.loads(out.read_text())
        line.append(f"reward {r['reward']:.0f} (fraction {r['fraction']:.3f})")
    print(f"{line[0]:<32} old: {line[1]:<28} new: {line[2]}")
