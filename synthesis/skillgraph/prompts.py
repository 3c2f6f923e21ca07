"""What SkillSynth's three LLM roles are told, and how their JSON replies are read.

The Planner turns a sampled skill path into a structured plan, the Constructor writes the task as
a generator in the project's contract, and the judge checks that a forged task's instruction and
its tests agree. Each system prompt opens with a role marker (`PLANNER_MARK`, ...) so one
endpoint (or a scripted fake in tests) can tell the roles apart. `ask_json` (generators/
llm_json.py) is the one reply loop for the JSON roles: parse, validate, feed the error back.
"""

from __future__ import annotations

from typing import Any

from clawloop.synthesis.llm_json import ReplyError, ask_json, parse_json_reply, trim
from clawloop.synthesis.llm_prompts import CONTRACT_TEXT

__all__ = ["ReplyError", "ask_json", "parse_json_reply", "trim"]  # the reply loop's home: llm_json

PLANNER_MARK = "[skillsynth:planner]"
CONSTRUCTOR_MARK = "[skillsynth:constructor]"
JUDGE_MARK = "[skillsynth:judge]"
MAX_BODY_CHARS = 1500  # of each SKILL.md body in the Planner's prompt
MAX_FEEDBACK_CHARS = 2500  # of a failure fed back to the Constructor

# ---- Planner ------------------------------------------------------------------------------

PLANNER_SYSTEM = (
    f"{PLANNER_MARK} You plan training tasks for a shell-and-files agent. A task is a chain of "
    "skills: each skill takes the workspace from one abstract state (scenario) to the next. You "
    "turn a chain into a concrete, checkable task plan. Reply with one ```json block only."
)

PLAN_SCHEMA_TEXT = """{
  "goal": "one paragraph: what the agent must achieve, end to end",
  "domain": "a concrete long-tail domain, lower_snake_case (e.g. trail_maintenance)",
  "multihop": 0-3 (how many sources the answer must join),
  "dirtiness": 0-3 (distractors, missing fields, unit mismatches injected on purpose),
  "files": [{"path": "relative/path.csv", "kind": "csv|json|md|txt|...",
             "holds": "what the file contains"}],
  "steps": [{"skill": "<the step's skill name>", "state": "the workspace after this step"}],
  "outputs": [{"path": "output/x.json", "format": "json|csv|report",
               "contains": "what the output holds"}],
  "checks": [{"fact": "one fact the tests check", "output": "output/x.json"}]
}"""


def planner_messages(steps: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The Planner's request for a path given as [{skill, description, body, pre, post}]."""
    lines = []
    for i, s in enumerate(steps, 1):
        lines.append(
            f"Step {i}: skill `{s['skill']}`\n"
            f"  before: {s['pre']}\n  after: {s['post']}\n"
            f"  description: {s['description']}\n"
            f"  SKILL.md (trimmed):\n{trim(s['body'], MAX_BODY_CHARS)}"
        )
    user = (
        "The skill chain:\n\n" + "\n\n".join(lines) + "\n\n"
        "Plan ONE task that needs every step in this order. The starting workspace holds the "
        "files the first step works on; the outputs are what the last step produces, in a form "
        "a program can check. Give exactly one `steps` entry per chain step, same skills, same "
        "order. Every check names one of the outputs; every output has at least one check. "
        "Outputs go under output/ and never overwrite a starting file. The answer must be "
        "computable by code from the starting files (no network, no external tools).\n\n"
        "Reply with JSON of this shape:\n" + PLAN_SCHEMA_TEXT
    )
    return [{"role": "system", "content": PLANNER_SYSTEM}, {"role": "user", "content": user}]


# ---- Constructor --------------------------------------------------------------------------

CONSTRUCTOR_SYSTEM = (
    f"{CONSTRUCTOR_MARK} You write task generators for training a shell-and-files agent. "
    "Follow the contract exactly. Reply with one ```python fenced block holding the whole file "
    "and nothing else."
)


def constructor_messages(
    plan_json: str, metadata: str, example_code: str = ""
) -> list[dict[str, Any]]:
    """The Constructor's first request: the contract, the plan and the metadata wanted."""
    parts = [
        "The contract:\n" + CONTRACT_TEXT,
        "Implement this task plan as ONE generator file. build(seed) makes the starting files "
        "the plan lists (contents varied by the seed), computes the answer key by code, and "
        "its instruction asks for every fact the tests check and nothing they do not check. "
        "solve(workspace) is the reference solution.\n```json\n" + plan_json + "\n```",
        f'Use exactly this metadata (add nothing but an optional "packages" list of extra '
        f"PyPI packages the agent's environment needs):\nGENERATOR = {metadata}",
    ]
    if example_code.strip():
        parts.append(
            "A working generator, as an example of the form only (write the planned task, not "
            "this one):\n```python\n" + example_code.strip() + "\n```"
        )
    return [
        {"role": "system", "content": CONSTRUCTOR_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


_STAGE_WHAT = {
    "static": "Your generator fails a static check (it was not run)",
    "forge": "Building your generator in the sandbox failed",
    "verify": "Your generator built, but the forged task failed verification",
    "rubric": "A reviewer found that the task's instruction and its tests disagree",
}


def constructor_repair(stage: str, error: str) -> dict[str, Any]:
    """The follow-up that sends one attempt's failure back to the Constructor."""
    what = _STAGE_WHAT.get(stage, "Your generator failed")
    return {
        "role": "user",
        "content": f"{what}:\n{trim(error, MAX_FEEDBACK_CHARS)}\n\nFix it and reply with the "
        "complete corrected file in one ```python block.",
    }


# ---- judge --------------------------------------------------------------------------------

JUDGE_SYSTEM = (
    f"{JUDGE_MARK} You review a task given to a shell-and-files agent: its instruction (with "
    "the output contract) and the fields its hidden tests grade. You decide whether they "
    "agree. Reply with one ```json block only."
)


def judge_messages(instruction: str, contract: str, answer_summary: str) -> list[dict[str, Any]]:
    """The judge's request: what the agent reads, and the graded fields (names and types)."""
    user = (
        "The instruction the agent reads (instruction.md):\n<<<\n"
        + trim(instruction, 12_000)
        + "\n>>>\n\nThe output contract (JSON):\n"
        + trim(contract, 6000)
        + "\n\nWhat the tests grade (answer-key field names and types, values hidden):\n"
        + trim(answer_summary, 6000)
        + "\n\nCheck two things. 1. Every graded field is asked for by the instruction, in "
        "words the agent can act on (a field that only appears in a schema with no statement "
        "of what it means is not asked for). 2. Everything the instruction asks the agent to "
        "produce is graded. Reply with JSON:\n"
        '{"agree": true|false, "untested_asks": ["asked for but not graded", ...], '
        '"unasked_tests": ["graded but never asked for", ...], "reason": "one sentence"}\n'
        "agree is true only when both lists are empty."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


# A compact, complete generator shown to the Constructor as the form to follow (the built-in
# library's are ~29 KB each). tests/synthesis/skillgraph/test_construct.py forges and verifies it.
EXAMPLE_GENERATOR = '''"""Flag overdue trail inspections by joining a segment index with an inspection log."""

GENERATOR = {"capability": "skill_graph", "domain": "trail_maintenance",
             "multihop": 1, "dirtiness": 0, "output_format": "json"}

import csv
import json
import os
import random


def _data(seed):
    rng = random.Random(seed)
    ids = sorted(rng.sample(range(100, 999), 6))
    segments = [{"segment": "TR-%d" % n, "max_days": rng.choice([30, 60, 90])} for n in ids]
    late = rng.choice(segments)["segment"]  # at least one segment is overdue
    log = []
    for s in segments:
        low = s["max_days"] + 1 if s["segment"] == late else 5
        for _ in range(rng.randint(1, 3)):
            log.append({"segment": s["segment"], "days_since": rng.randint(low, 140)})
    rng.shuffle(log)
    return segments, log


def _answer(segments, log):
    latest = {}
    for r in log:
        seg, days = r["segment"], int(r["days_since"])
        latest[seg] = min(days, latest.get(seg, days))
    limits = {s["segment"]: int(s["max_days"]) for s in segments}
    overdue = sorted(seg for seg, days in latest.items() if days > limits[seg])
    return {"overdue": overdue, "overdue_count": len(overdue)}


def build(seed):
    segments, log = _data(seed)
    index = "segment,max_days\\n" + "".join("%s,%d\\n" % (s["segment"], s["max_days"]) for s in segments)
    insp = "segment,days_since\\n" + "".join("%s,%d\\n" % (r["segment"], r["days_since"]) for r in log)
    return {
        "instruction": (
            "segments.csv lists each trail segment and the most days allowed between "
            "inspections; inspections.csv logs inspections as days since they happened. Write "
            "output/overdue.json with `overdue`, the segments whose latest inspection is older "
            "than allowed, and `overdue_count`, how many there are."
        ),
        "files": {"segments.csv": index, "inspections.csv": insp},
        "answer": {"output/overdue.json": _answer(segments, log)},
        "contract": {
            "outputs": [{"path": "output/overdue.json", "format": "json",
                         "schema": {"type": "object",
                                    "properties": {"overdue": {"type": "array",
                                                               "items": {"type": "string"}},
                                                   "overdue_count": {"type": "integer"}}}}],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": ["The latest inspection is the one with the fewest days since",
                          "Overdue means strictly more days than allowed",
                          "List segment ids sorted ascending"],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "segments.csv")) as f:
        segments = list(csv.DictReader(f))
    with open(os.path.join(workspace, "inspections.csv")) as f:
        log = list(csv.DictReader(f))
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "overdue.json"), "w") as f:
        json.dump(_answer(segments, log), f)
'''
