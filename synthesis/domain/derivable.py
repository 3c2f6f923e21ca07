"""Is every value a domain task's reference writes derivable from its instruction and state?

A value the end-state tests require is derivable when the agent can know it: the tools derive it
by the domain's rules (a balance, a fee, an assigned id), the instruction states it (booleans,
dates and enumerations included), or it is read from a record the instruction names by business
key, or from a record reached from a named one by following its references (an order names its
buyer: the buyer's record is reached, never named). The reference plan knows where each argument
came from: a literal it passes (then the instruction must state that literal, also where a tool
nests it inside a field, as a certificate's amount inside `payment_methods`) or a lookup's
result (`{"$ref": [step, field]}`: then the instruction must name the record that lookup reads,
by the key the lookup passes, or that lookup's key must itself be a `$ref` to a step so
identified: a chain). A written value no argument accounts for is the tools' own work and needs
nothing.

A fix after a refused step (error recovery) may take a value the refusal's text states instead
(the balance a credit hold names): the plan stores that text on the refused step (`refusal`), as
the reference run met it, so the instruction need not give the fix away. A fix marked `found`
changes the only record holding that value of the refused call which the fix is accepted on
(ground.found_fix: the other pending order a gift card paid for): where the instruction states
the value, the agent finds that record, and the instruction need not name it.

Pure, on what a task stores (its plan, predicates and instruction), so the same check can run
where a task is made (synth.py drops it, the value named) and wherever a stored task is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from clawloop.synthesis.domain.ground import names_field
from clawloop.synthesis.domain.instruct import render
from clawloop.synthesis.domain.predicates import KEY_FIELD, lands, leaves, nested_in, same_value

ENUMERATION = re.compile(r"^\s*\d+[.)]\s+", re.MULTILINE)  # "3. ..." list numbers state nothing
NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?![\w-]|\.\d)")


class Underivable(ValueError):
    """A task's reference writes a value its instruction gives no way to know."""


@dataclass(frozen=True)
class Arg:
    step: int
    tool: str
    param: str
    value: Any = None  # a literal (None for a lookup's result)
    lookup: int | None = None  # the step whose result it is


def plan_args(plan: list[dict[str, Any]]) -> list[Arg]:
    """Every argument the plan's steps pass: a literal (a whole list or object too, as an
    airline's `passengers`), or a lookup step's result."""
    out = []
    for i, s in enumerate(plan):
        for name, v in (s.get("params") or {}).items():
            if isinstance(v, dict) and "$ref" in v:
                out.append(Arg(i, str(s.get("tool")), name, lookup=int(v["$ref"][0])))
            else:
                out.append(Arg(i, str(s.get("tool")), name, v))
    return out


def mentions(text: str, value: Any) -> bool:
    """Does the instruction state `value` (as the state holds it, in any case, on word
    boundaries; a number in any common spelling of its magnitude; a list or object as JSON, or
    each value inside it)?"""
    text = ENUMERATION.sub(" ", text)
    if isinstance(value, dict | list):
        inside = [v for _, v in leaves(value)]
        return render(value) in text or (bool(inside) and all(mentions(text, v) for v in inside))
    if isinstance(value, bool) or value is None:
        return bool(re.search(rf"\b{render(value)}\b", text, re.IGNORECASE))
    if isinstance(value, int | float):
        return any(abs(float(m) - float(value)) < 1e-9 for m in NUMBER.findall(text))
    s = str(value).strip()
    return bool(s) and bool(re.search(rf"(?<![\w]){re.escape(s)}(?![\w])", text, re.IGNORECASE))


def _written(preds: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(table, field, value) of every value the tests require the end state to hold: changed
    fields, and the fields a created record is matched by (never its tool-assigned id); a field
    checked as it started (`unchanged`: alternatives.accept_all) is written by nothing."""
    out = []
    for p in preds:
        if p.get("kind") == "field" and not p.get("unchanged"):
            out.append((p["table"], p["field"], p["value"]))
        elif p.get("kind") == "count" and p.get("fields") is not None:
            out += [(p["table"], f, v) for f, v in p["match"].items() if f != KEY_FIELD]
    return out


def _records(preds: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(table, key field, key) of every existing record the tests require changed or gone (a
    field checked as it started asks nothing of the agent)."""
    out: dict[str, tuple[str, str, Any]] = {}
    for p in preds:
        kind, match = p.get("kind"), p.get("match") or {}
        if p.get("unchanged"):  # a field the task leaves as it was (alternatives.accept_all)
            continue
        if len(match) == 1 and (kind in ("field", "rest") or (kind == "count" and not p["count"])):
            ((f, v),) = match.items()
            if v is not None:
                out.setdefault(repr((p["table"], f, v)), (p["table"], f, v))
    return list(out.values())


def fixes(plan: list[dict[str, Any]], step: int) -> bool:
    """Is this step a fix: the one after a step the plan expects refused (its `refusal` is the
    text the agent meets at run time, and what it states the agent learns)?"""
    return 0 < step < len(plan) and plan[step - 1].get("expect") == "error"


def identified(args: list[Arg], instruction: str) -> set[int]:
    """The steps whose record the agent can find: one a literal argument the instruction states
    names (a key), or one whose argument is an identified earlier step's result (the record a
    named order's `buyer` leads to), transitively."""
    out: set[int] = set()
    for step in sorted({a.step for a in args}):  # a $ref points back: one pass in plan order
        mine = [a for a in args if a.step == step]
        keys = [a for a in mine if a.lookup is None and not isinstance(a.value, dict | list)]
        if any(mentions(instruction, a.value) for a in keys) or any(
            a.lookup in out for a in mine if a.lookup is not None
        ):
            out.add(step)
    return out


def _keys(param: str, key_field: str, table: str) -> bool:
    """Does a parameter pass the key a record is found by: its field, or (a JSON table keyed by
    its object keys, `_key`) the table's own id (`user_id` for users)?"""
    if key_field == KEY_FIELD:
        return any(names_field(param, f, table) for f in ("id", "code", "key", "no"))
    return names_field(param, key_field, table)


def underivable(
    plan: list[dict[str, Any]], preds: list[dict[str, Any]], instruction: str
) -> list[str]:
    """What the agent cannot know, one line per value (table.field = value, the parameter it is
    passed as, and why); empty when every written value is derivable."""
    args = plan_args(plan)
    known = identified(args, instruction)
    refusals = " ".join(str(s.get("refusal") or "") for s in plan if s.get("expect") == "error")

    def told(a: Arg) -> bool:  # stated, or (a fix's value) taught by the refusal before it
        return mentions(instruction, a.value) or (
            fixes(plan, a.step) and mentions(refusals, a.value)
        )

    def named(a: Arg) -> bool:  # the record a lookup reads is named or reached by a chain
        return a.lookup is not None and a.lookup in known

    out: list[str] = []
    for table, name, value in _written(preds):
        literal = [
            a
            for a in args
            if a.lookup is None
            and same_value(a.value, value)
            and (names_field(a.param, name, table) or not isinstance(a.value, bool))
        ]
        looked = [a for a in args if a.lookup is not None and names_field(a.param, name, table)]
        if isinstance(value, dict | list):  # each argument a tool nests in it is the plan's
            keys = {k for k, _ in leaves(value)}
            nested = [
                (a, k)
                for a in args
                if (k := nested_in(a.param, a.value, value, table) if a.lookup is None else None)
                is not None
            ]
            nested += [
                (a, k)
                for a in args
                if a.lookup is not None
                for k in sorted(keys)
                if k and names_field(a.param, k, table)
            ]
            nested += [  # a list or object passed whole that the tool built it from
                (a, "")
                for a in args
                if a.lookup is None
                and lands(a.param, a.value, value, table)
                and not same_value(a.value, value)  # stored as passed: `literal` covers it
            ]
            for a, k in nested:
                if not (told(a) if a.lookup is None else named(a)):
                    shown = render(a.value) if a.lookup is None else f"step {a.lookup}'s result"
                    out.append(
                        f"{table}.{name} holds {k or a.param} = {shown} (passed as {a.tool} "
                        f"--{a.param}), neither stated in the instruction nor read from a "
                        "record it names or reaches through one"
                    )
        if not literal and not looked:
            continue  # no argument accounts for it: the tools derive it
        if any(map(told, literal)) or any(map(named, looked)):
            continue
        a = (literal or looked)[0]
        how = "passed as" if a.lookup is None else f"read by step {a.lookup} for"
        out.append(
            f"{table}.{name} = {render(value)} ({how} {a.tool} --{a.param}) is neither stated in "
            "the instruction nor read from a record it names or reaches through one"
        )
    # A fix's record the agent finds from the refusal: the only one holding a value of the
    # refused call that the fix is accepted on (ground.found_fix), where that value is stated.
    found = [
        v
        for i, s in enumerate(plan)
        if fixes(plan, i) and s.get("found")
        and (mentions(instruction, s["found"]) or mentions(refusals, s["found"]))
        for v in (s.get("params") or {}).values()
        if not isinstance(v, dict | list)
    ]  # fmt: skip
    for table, key_field, value in _records(preds):
        if mentions(instruction, value) or mentions(refusals, value):
            continue
        if any(same_value(v, value) for v in found):
            continue
        via = [a for a in args if a.lookup is not None and _keys(a.param, key_field, table)]
        if not any(map(named, via)):
            out.append(
                f"the {table} record {key_field}={render(value)} is neither named in the "
                "instruction nor reached from a record it names"
            )
    return out


def unstated_inputs(
    plan: list[dict[str, Any]], preds: list[dict[str, Any]], instruction: str
) -> list[str]:
    """Literal arguments the instruction does not mention and no tested value holds, as
    "tool --param value": the record a fix needs (any clean inspection may do) or an input a
    derived value depends on (a discount behind a total). Which it is, only running another
    value would tell: a warning, never a drop."""
    held = [v for _, _, v in _written(preds)] + [v for _, _, v in _records(preds)]
    out = []
    for a in plan_args(plan):
        if a.lookup is not None or mentions(instruction, a.value):
            continue
        if not any(same_value(a.value, v) for v in held):
            out.append(f"{a.tool} --{a.param} {render(a.value)}")
    return list(dict.fromkeys(out))
