"""seed_library: sabotaged end states graded by the old and new task folders' own grader.py.

Measure (not a test). Usage, from a checkout root with the shim on PYTHONPATH:
    python benchmarks/domain_sabotage_folder_sql.py OLD_TASK_FOLDER NEW_TASK_FOLDER
where both folders come from `clawloop domain synth` with the same domain and seed on the old and
new code (so their reference plans are equal, which the script checks).
"""

import json
import re
import sqlite3
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
snap = next(r for r in t["files"] if r.endswith(".sql"))
conn = sqlite3.connect(":memory:")
conn.executescript(t["files"][snap])
conn.execute("PRAGMA foreign_keys = OFF")
for name, rows in run.final.items():
    conn.execute(f'DELETE FROM "{name}"')
    for r in rows:
        conn.execute(
            f'INSERT INTO "{name}" ({", ".join(r)}) VALUES ({", ".join("?" * len(r))})',
            list(r.values()),
        )
conn.commit()
changed = sorted(
    {
        p["match"]["member_no"]
        for p in t["predicates"]
        if p.get("table") == "members" and p.get("kind") == "field"
    }
)[0]


def dump(sql=""):
    c = sqlite3.connect(":memory:")
    c.executescript("\n".join(conn.iterdump()))
    c.execute("PRAGMA foreign_keys = OFF")
    if sql:
        c.executescript(sql)
    return "\n".join(c.iterdump()) + "\n"


S = {
    "reference end state": dump(),
    f"touched member {changed} name changed": dump(
        f"UPDATE members SET name = 'Mallory' WHERE member_no = '{changed}';"
    ),
    f"touched member {changed} put on hold": dump(
        f"UPDATE members SET status = 'hold', hold_reason = 'x' WHERE member_no = '{changed}';"
    ),
    "extra table zz_junk": dump("CREATE TABLE zz_junk (note TEXT);"),
    "CHECK constraints stripped": re.sub(r"\s*CHECK\s*\((?:[^()]|\([^()]*\))*\)", "", dump()),
}
for name, text in S.items():
    line = [name]
    for folder in (OLD, NEW):
        ws = Path(tempfile.mkdtemp())
        files = {r: x for r, x in t["files"].items() if r != snap} | {snap: text}
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
    print(f"{line[0]:<36} old: {line[1]:<28} new: {line[2]}")
