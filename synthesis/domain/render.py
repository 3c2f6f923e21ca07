"""A grounded, executed task as a generator file, so forge and verify treat it like any task.

The generator embeds everything as data (workspace files, instruction, predicates, the reference
plan). The snapshot (the workspace's state/ files, megabytes for a domain of real size) is stored
once, as one zlib-compressed, base64 `STATE` literal that `build` unpacks; the rest stays readable
JSON in `TASK`, so the generator is still one standard-library file. `build(seed)` returns them (the task was grounded for one seed already, so every seed
builds the same task) and `solve(workspace)` replays the reference plan through the workspace's
own skill CLIs, the interface the agent gets, resolving each value a lookup produced from that
lookup's printed result. Verify's oracle check is then "replaying the reference passes".
"""

from __future__ import annotations

import ast
import base64
import json
import zlib
from typing import Any

from clawloop.synthesis.domain.workspace import STATE_DIR

TOLERANCE = {"abs": 0.01, "rel": 0.0}

TEMPLATE = '''"""{title}"""

GENERATOR = {meta}

import base64
import json
import os
import subprocess
import sys
import zlib

TASK = json.loads({task})

# The snapshot files, {{relative path: text}} as JSON, zlib-compressed and base64: stored once.
STATE = {state}


def _files():
    files = dict(TASK["files"])
    files.update(json.loads(zlib.decompress(base64.b64decode(STATE)).decode("utf-8")))
    return dict(sorted(files.items()))


def build(seed):
    return {{
        "instruction": TASK["instruction"],
        "files": _files(),
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
    snapshot = {p: t for p, t in files.items() if p.startswith(STATE_DIR + "/")}
    task = {
        "instruction": instruction,
        "files": {p: t for p, t in files.items() if p not in snapshot},
        "predicates": predicates,
        "plan": plan,
        "contract": task_contract,
    }
    blob = json.dumps(task, sort_keys=True, ensure_ascii=False, default=str)
    return TEMPLATE.format(
        title=" ".join(title.split()).replace('"""', ""),
        meta=json.dumps(meta, sort_keys=True),
        task=repr(blob),
        state=repr(pack(snapshot)),
    )


def pack(files: dict[str, str]) -> str:
    """{path: text} as the generator's STATE literal: canonical JSON, zlib level 9, base64
    (deterministic, so one task always renders the same generator)."""
    raw = json.dumps(files, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def unpack(state: str) -> dict[str, str]:
    """The inverse of pack (what the generator's build does)."""
    return json.loads(zlib.decompress(base64.b64decode(state)).decode("utf-8"))


def embedded_state(code: str) -> dict[str, str]:
    """The snapshot files a rendered generator's STATE literal holds, read as data (never run);
    {} for a generator rendered before the snapshot moved out of TASK["files"]."""
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
            "STATE"
        ]:
            return unpack(ast.literal_eval(node.value))
    return {}
