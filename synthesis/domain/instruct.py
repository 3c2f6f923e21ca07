"""The instruction of a domain-grounded task, written behind an information barrier.

Both writers take a `Goal` (predicates.py) and nothing else: the entities by business key, the
changes the end state must show, a branch condition, the constraints. Neither sees the reference
steps or which tools made them, so the instruction asks for an outcome and the agent has to find
the way. Values the tools derive (a balance, a fee, an assigned id) are not in the Goal's stated
fields, so no writer can give them away; the verify stage's leak audit checks that anyway.

Offline, `write_instruction` is deterministic. With an endpoint, `llm_instruction` asks the LLM to
rewrite the same Goal as a request from a person in the domain; a reply that is empty, too long,
or names a tool falls back to the deterministic text, with the reason.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clawloop.harness.llm import ChatFn, LLMError
from clawloop.synthesis.domain.predicates import Goal

MAX_CHARS = 4000


def render(v: Any) -> str:
    """A value as the state holds it: JSON's true/false/null (and a list or object as JSON),
    numbers and text as written."""
    return json.dumps(v) if isinstance(v, bool | dict | list) or v is None else str(v)


def _value(v: Any) -> str:
    return f"`{render(v)}`"


def _entity(d: dict[str, Any]) -> str:
    via = d.get("via")
    if via and d.get("key_field") in (None, "_key"):  # keyed by its object key: no field
        return f"the `{d['table']}` record keyed by {_ref(via)}"
    if via:
        return f"the `{d['table']}` record whose `{d['key_field']}` is {_ref(via)}"
    if d.get("key_field") in (None, "_key"):
        return (
            f"`{d['table']}` record {_value(d['key'])}"
            if d.get("key") is not None
            else f"a `{d['table']}` record"
        )
    return f"`{d['table']}` record with `{d['key_field']}` {_value(d['key'])}"


def _ref(r: dict[str, Any]) -> str:
    """Where a value comes from: a field of a record named by key, or of a record reached
    through another's reference field (never named: the agent follows the chain)."""
    via = r.get("via")
    if not via:
        return f"the `{r['field']}` recorded on `{r['table']}` {_value(r['key'])}"
    if r["field"] == r["key_field"]:  # the reached record's key is the link's own value
        return _ref(via)
    if r.get("key_field") in (None, "_key"):  # keyed by its object key: no field to name
        return f"the `{r['field']}` of the `{r['table']}` record keyed by {_ref(via)}"
    return (
        f"the `{r['field']}` of the `{r['table']}` record whose `{r['key_field']}` is {_ref(via)}"
    )


def change_line(d: dict[str, Any]) -> str:
    pairs = [(f, _value(v)) for f, v in d["stated"].items()]
    pairs += [(f, _ref(r)) for f, r in d.get("referenced", {}).items()]
    stated = ", ".join(f"`{f}` = {v}" for f, v in sorted(pairs))
    derived = ", ".join(f"`{f}`" for f in d["derived"])
    if d["kind"] == "deleted":
        return f"{_entity(d)} no longer exists"
    nested = _nested(d)
    if d["kind"] == "created":
        line = f"a new `{d['table']}` record exists" + (f" with {stated}" if stated else "")
        line += f"; its {derived} as the domain's rules set them" if derived else ""
        return line + "".join(f"; {n}" for n in nested)
    parts = [stated] if stated else []
    if derived:
        parts.append(f"{derived} updated as the domain's rules require")
    return f"{_entity(d)}: " + ("; ".join(parts + nested) or "updated")


def _nested(d: dict[str, Any]) -> list[str]:
    """What a derived field must hold inside it that the plan chose: an argument nested in it
    ("`payment_methods` holds `amount` = `100`", a certificate's), or the looked-up list it is
    built from ("`flights` follows the `flights` recorded on `reservations` `S43MQ9`"), or the
    list or object the plan passed whole that it is built from, as JSON."""
    out = []
    for f in d["derived"]:
        if (src := (d.get("follows") or {}).get(f)) is not None:
            out.append(f"`{f}` follows {_ref(src)} (the domain's rules fill in the rest)")
        if f in (d.get("given") or {}):
            out.append(
                f"`{f}` follows {_value(d['given'][f])} (the domain's rules fill in the rest)"
            )
        pairs = [(k, _value(v)) for k, v in (d.get("inside") or {}).get(f, {}).items()]
        pairs += [(k, _ref(r)) for k, r in (d.get("inside_referenced") or {}).get(f, {}).items()]
        if pairs:
            out.append(f"`{f}` holds " + ", ".join(f"`{k}` = {v}" for k, v in sorted(pairs)))
    return out


def write_instruction(goal: Goal) -> str:
    """The deterministic writer: the goal as a numbered list of outcomes."""
    lines = [
        f"You manage the records of {goal.domain}: {goal.description.strip()}".rstrip(),
        "",
        "The state is in `state/`; the tools that change it are command-line skills in `skills/` "
        "(each folder has a SKILL.md; run a tool with `--help` for its parameters). The domain's "
        "rules are in `policy.md`.",
        "",
        "When you are done, the state must show:",
    ]
    items = [change_line(d) for d in goal.changes]
    if goal.condition:
        c = goal.condition
        cond = (
            f"`{c['table']}` record with `{c['key_field']}` {_value(c['key'])} has `{c['field']}` "
            f"= {_value(c['value'])}"
        )
        then = "; ".join(change_line(d) for d in goal.then_changes) or "nothing more changes"
        other = "; ".join(change_line(d) for d in goal.else_changes) or "nothing more changes"
        items.append(f"if the {cond} (check it first): {then}. Otherwise: {other}")
    lines += [f"{i}. {t}" for i, t in enumerate(items, 1)]
    if goal.recovery and goal.taught:
        day = " (date what you record for it on the day of the refused change)"
        lines += [
            "",
            "Some of this the domain's rules will refuse at first, and what fixes it is not "
            "listed above: the refusal says what is wrong. Fix that cause as the policy allows"
            + (day if goal.same_day else "")
            + (
                ", then finish. Any fix the policy allows that lets the refused change through "
                "is accepted; records it had no need to change must stay as they were."
                if goal.any_fix
                else ", then finish; the records the fix changes are checked too."
            )
            + "".join(
                f" Where {'your' if goal.any_fix else 'the'} fix takes `{k}`, give {_value(v)}."
                for k, v in sorted(goal.fix_values.items())
            ),  # fmt: skip
        ]
    elif goal.recovery:
        lines += [
            "",
            "Some of this the domain's rules may refuse at first: find out why, fix the cause as "
            "the policy allows, then finish.",
        ]
    lines += ["", "Constraints:"] + [f"- {c}" for c in goal.constraints]
    return "\n".join(lines) + "\n"


SYSTEM = (
    "You write task instructions for an operations assistant. Rewrite the goal below as a short, "
    "natural request from a person who works in this domain. Keep every entity identifier, every "
    "stated value and the condition exactly as given; do not add values, do not mention tools, "
    "commands or steps (the assistant must find them). Reply with the instruction text only."
)


def llm_instruction(goal: Goal, chat: ChatFn, tool_names: list[str]) -> tuple[str, str]:
    """(instruction, note): the LLM's rewrite, or the deterministic text and why it was kept."""
    fallback = write_instruction(goal)
    ask = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": json.dumps(goal.to_dict(), indent=1, default=str)},
    ]
    try:
        text = chat(ask).strip()
    except LLMError as exc:
        return fallback, f"llm writer failed ({exc.kind}): deterministic instruction kept"
    named = [t for t in tool_names if re.search(rf"\b{re.escape(t)}\b", text)]
    if not text or len(text) > MAX_CHARS or named:
        why = f"names tool(s) {named}" if named else "empty" if not text else "too long"
        return fallback, f"llm instruction rejected ({why}): deterministic instruction kept"
    missing = [k for k in _identifiers(goal) if k not in text]
    if missing:
        return fallback, f"llm instruction dropped identifiers {missing[:3]}: deterministic kept"
    tail = "\n\nState: `state/`; tools: the skill CLIs in `skills/`; rules: `policy.md`.\n"
    return text + tail, "llm instruction"


def _identifiers(goal: Goal) -> list[str]:
    out = []
    for d in [*goal.changes, *goal.then_changes, *goal.else_changes]:
        if d.get("key") is not None and not d.get("via"):
            out.append(str(d["key"]))
    if goal.condition:
        out.append(str(goal.condition["key"]))
    return out
