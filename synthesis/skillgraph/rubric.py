"""The rubric check: an LLM judge decides whether a forged task's instruction and tests agree.

Execution checks (forge, verify) prove that the reference solution passes and trivial outputs do
not; they cannot tell whether the instruction asks for what the tests grade. The judge reads the
task as the agent does (instruction.md, the contract) plus the graded fields' names and types
(`answer_summary`: no values, so nothing about the answer key leaks into the judge's reasoning)
and answers {"agree", "untested_asks", "unasked_tests", "reason"}; it agrees only when every
graded field is asked for and everything asked for is graded. A malformed reply is asked again.

    verdict = judge_folder(task_dir, chat)
    verdict.agree, verdict.feedback()
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from clawloop.harness.llm import ChatFn
from clawloop.synthesis.skillgraph.prompts import ReplyError, ask_json, judge_messages

MAX_SUMMARY_KEYS = 40  # per object in the answer summary
ENTITY_MAP_MIN = 9  # an object with this many same-shaped values reads as a map keyed by entity


class RubricError(ValueError):
    """The judge gave no valid verdict (after the re-asks)."""


class RubricVerdict(BaseModel):
    """The judge's verdict on one task."""

    model_config = ConfigDict(extra="ignore")
    agree: StrictBool
    untested_asks: list[str] = Field(default_factory=list)
    unasked_tests: list[str] = Field(default_factory=list)
    reason: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> RubricVerdict:
        if self.agree and (self.untested_asks or self.unasked_tests):
            raise ValueError(
                "agree is true but untested_asks or unasked_tests is not empty; agree must be "
                "false when either list names something"
            )
        if not self.agree and not (self.untested_asks or self.unasked_tests or self.reason.strip()):
            raise ValueError("agree is false: name the mismatch in the lists or the reason")
        return self

    def feedback(self) -> str:
        """The verdict as text for the Constructor's repair."""
        lines = [self.reason.strip() or "the instruction and the tests disagree"]
        lines += [f"- graded but never asked for: {x}" for x in self.unasked_tests]
        lines += [f"- asked for but not graded: {x}" for x in self.untested_asks]
        lines.append(
            "Make the instruction ask for every graded field (say what it means) and grade "
            "everything it asks for."
        )
        return "\n".join(lines)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), "value")


def shape(value: Any, schema: Any = None, depth: int = 0) -> str:
    """A value's structure: field names and types, no values (entity-keyed maps shown as
    `{<key>: ...}` so their keys, which are data, stay hidden)."""
    schema = schema if isinstance(schema, dict) else {}
    if depth > 6:
        return "..."
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        each = schema.get("additionalProperties")
        shapes = {k: shape(v, props.get(k, each), depth + 1) for k, v in value.items()}
        if value and (
            (isinstance(each, dict) and not props)
            or (len(value) >= ENTITY_MAP_MIN and len(set(shapes.values())) == 1)
        ):
            return f"{{<key>: {next(iter(shapes.values()))}}} ({len(value)} entries)"
        items = list(shapes.items())[:MAX_SUMMARY_KEYS]
        more = ", ..." if len(shapes) > MAX_SUMMARY_KEYS else ""
        return "{" + ", ".join(f"{k}: {s}" for k, s in items) + more + "}"
    if isinstance(value, list):
        item_schema = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        if not value:
            return "list (empty)"
        if all(isinstance(v, dict) for v in value):
            merged: dict[str, Any] = {}
            for v in value:
                merged.update({k: x for k, x in v.items() if k not in merged})
            return f"list[{shape(merged, item_schema, depth + 1)}] ({len(value)} items)"
        kinds = sorted({shape(v, item_schema, depth + 1) for v in value})
        return f"list[{' | '.join(kinds[:4])}] ({len(value)} items)"
    return _scalar(value)


def answer_summary(answer: Mapping[str, Any], contract: Mapping[str, Any]) -> str:
    """What the tests grade, per graded file: its format and the answer's shape (no values)."""
    outputs = {
        (o.get("sidecar") if o.get("format") == "report" else o.get("path")): o
        for o in contract.get("outputs", [])
        if isinstance(o, dict)
    }
    lines = []
    for path in sorted(answer):
        o = outputs.get(path, {})
        fmt = o.get("format", "?")
        if fmt == "csv":
            rows = answer[path] if isinstance(answer[path], list) else []
            lines.append(
                f"- {path} (csv): columns {o.get('columns', [])}, key {o.get('key', [])}, "
                f"{len(rows)} row(s); cells: {shape(rows)}"
            )
        else:
            kind = f"report sidecar of {o.get('path')}" if fmt == "report" else fmt
            lines.append(f"- {path} ({kind}): {shape(answer[path], o.get('schema'))}")
    return "\n".join(lines)


def judge(
    instruction: str,
    contract: Mapping[str, Any] | str,
    answer_keys_summary: str,
    chat: ChatFn,
    max_reasks: int = 1,
) -> RubricVerdict:
    """Ask the judge whether `instruction` and the graded fields agree; a malformed reply goes
    back with the error up to `max_reasks` times, then RubricError. LLMError propagates."""
    contract_text = (
        contract if isinstance(contract, str) else json.dumps(contract, indent=1, sort_keys=True)
    )

    def validate(value: Any) -> RubricVerdict:
        try:
            return RubricVerdict.model_validate(value)
        except ValidationError as exc:
            msgs = [f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()]
            raise ValueError("the verdict does not match the schema: " + "; ".join(msgs)) from exc

    messages = judge_messages(instruction, contract_text, answer_keys_summary)
    try:
        return ask_json(chat, messages, validate, max_reasks, "rubric judge")
    except ReplyError as exc:
        raise RubricError(str(exc)) from exc


def judge_folder(task_dir: Path, chat: ChatFn, max_reasks: int = 1) -> RubricVerdict:
    """`judge` on a forged task folder: its instruction.md, tests/contract.json and the shape of
    tests/answer.json."""
    task_dir = Path(task_dir)
    try:
        instruction = (task_dir / "instruction.md").read_text()
        contract = json.loads((task_dir / "tests" / "contract.json").read_text())
        answer = json.loads((task_dir / "tests" / "answer.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RubricError(
            f"{task_dir}: cannot read the task for the rubric (instruction.md, "
            f"tests/contract.json, tests/answer.json): {exc}"
        ) from exc
    return judge(instruction, contract, answer_summary(answer, contract), chat, max_reasks)
