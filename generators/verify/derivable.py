"""The derivable check on a stored domain task: every value its reference writes is one the
agent can know (issue 24, item 3).

Synthesis runs the same test when it makes a task (synthesis/domain/synth.py); this reads it back
from the folder, so a task whose instruction.md was edited, or one made by an older synth, is
held to it too. What the test needs is in the folder: the reference plan (the `TASK` data the
generator embeds in solution/generator.py; the packed `STATE` snapshot is not needed), the
end-state predicates (tests/answer.json) and the instruction the agent reads (instruction.md).
The test itself is synthesis's one function (synthesis.domain.derivable.underivable), asked
rather than copied so that making a task and verifying it cannot disagree.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from clawloop.synthesis.domain.derivable import underivable

DOMAIN_ORIGIN = (
    "domain:"  # task.toml's origin of a domain-grounded task (synthesis/domain/synth.py)
)
GENERATOR = "solution/generator.py"


def embedded_task(code: str) -> dict[str, Any]:
    """The `TASK = json.loads("...")` data of a rendered domain generator, read without running
    it (a ValueError says what is missing)."""
    try:
        tree = ast.parse(code, filename=GENERATOR)
    except SyntaxError as exc:
        raise ValueError(f"{GENERATOR} does not parse: {exc}") from exc
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["TASK"]
            and isinstance(node.value, ast.Call)
            and len(node.value.args) == 1
        ):
            try:
                task = json.loads(ast.literal_eval(node.value.args[0]))
            except (ValueError, TypeError, json.JSONDecodeError) as exc:
                raise ValueError(f"{GENERATOR}: TASK is not a JSON literal ({exc})") from exc
            if isinstance(task, dict) and isinstance(task.get("plan"), list):
                return task
            raise ValueError(f"{GENERATOR}: TASK holds no reference plan")
    raise ValueError(f"{GENERATOR} embeds no TASK data: not a rendered domain generator")


def derivable_verdict(code: str, answer: dict[str, Any], instruction: str) -> tuple[bool, str]:
    """(passed, reason) for one domain task: dropped with the first values the agent cannot know
    named (table.field = value, the tool argument it is passed as)."""
    plan = embedded_task(code)["plan"]
    preds = (answer.get("state") or {}).get("predicates")
    if not isinstance(preds, list):
        raise ValueError("tests/answer.json holds no state predicates: not a domain task's key")
    lost = underivable(plan, preds, instruction)
    if lost:
        more = f" (and {len(lost) - 3} more)" if len(lost) > 3 else ""
        return False, (
            "; ".join(lost[:3]) + more + ": the agent cannot know it. State the value in "
            "instruction.md or name the record it is read from"
        )
    return True, "every value the reference writes is stated or read from a named record"
