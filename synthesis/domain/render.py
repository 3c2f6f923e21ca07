"""A grounded, executed task as a generator file, so forge and verify treat it like any task.

The generator embeds everything as data (workspace files, instruction, predicates, the reference
plan): `build(seed)` returns them (the task was grounded for one seed already, so every seed
builds the same task) and `solve(workspace)` replays the reference plan through the workspace's
own skill CLIs, the interface the agent gets, resolving each value a lookup produced from that
lookup's printed result. Verify's oracle check is then "replaying the reference passes".
"""

from __future__ import annotations

import json
from typing import Any

TOLERANCE = {"abs": 0.01, "rel": 0.0}

TEMPLATE = '''"""{title}"""

GENERATOR = {meta}

import json
import os
import subprocess
import sys

TASK = json.loads({task})


def build(seed):
    return {{
        "instruction": TASK["instruction"],
        "files": TASK["files"],
        "answer": {{"state": {{"predicates": TASK["predicates"]}}}},
        "contract": TASK["contract"],
    }}


def _arg(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def solve(workspace):
    sys.path.insert(0, os.path.join(workspace, "skills", "_lib"))
    from runtime import resolve  # the skill CLIs' runtime: a lookup's value, as plans resolve it

    results = []
    for step in TASK["plan"]:
        cmd = [sys.executable, os.path.join(workspace, "skills", step["skill"], step["tool"])]
        for name, value in step["params"].items():
            cmd += ["--" + name, _arg(resolve(value, results))]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=workspace, timeout=60)
        if (done.returncode == 0) != (step["expect"] == "ok"):
            raise RuntimeError(f"{{step['tool']}} exited {{done.returncode}}: {{done.stdout}}{{done.stderr}}")
        results.append(json.loads(done.stdout) if done.stdout.strip() else None)
'''


def contract(snapshot_schema: dict[str, Any], decisions: list[str]) -> dict[str, Any]:
    return {
        "outputs": [{"path": "state", "format": "state", "schema": snapshot_schema}],
        "tolerance": TOLERANCE,
        "decisions": decisions,
    }


def render_generator(
    title: str,
    meta: dict[str, Any],
    instruction: str,
    files: dict[str, str],
    predicates: list[dict[str, Any]],
    plan: list[dict[str, Any]],
    task_contract: dict[str, Any],
) -> str:
    task = {
        "instruction": instruction,
        "files": files,
        "predicates": predicates,
        "plan": plan,
        "contract": task_contract,
    }
    blob = json.dumps(task, sort_keys=True, ensure_ascii=False, default=str)
    return TEMPLATE.format(
        title=" ".join(title.split()).replace('"""', ""),
        meta=json.dumps(meta, sort_keys=True),
        task=repr(blob),
    )
