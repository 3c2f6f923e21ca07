"""Asking an LLM for JSON: parse the reply, validate it, feed the error back, ask again.

One loop for every role that answers in JSON (SkillSynth's Planner and judge, scenario
inference, the domain tools' LLM analysis), so each says only what a valid answer is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from clawloop.harness.llm import ChatFn

MAX_FEEDBACK_CHARS = 2500  # of a validation error fed back

T = TypeVar("T")

_JSON_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL)


class ReplyError(ValueError):
    """A role's reply could not be read as the JSON asked for; the message is fed back."""


def trim(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marking the cut."""
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 20].rstrip() + "\n[... trimmed]"


def parse_json_reply(reply: str) -> Any:
    """The JSON value in a reply: a fenced block, else the outermost {...}; ReplyError if none."""
    text = re.sub(r"<think>.*?</think>", "", reply or "", flags=re.DOTALL).strip()
    candidates = _JSON_FENCE.findall(text)
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    if not candidates:
        raise ReplyError("the reply holds no JSON object; reply with one ```json block")
    last = ""
    for block in candidates:
        try:
            return json.loads(block)
        except json.JSONDecodeError as exc:
            last = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    raise ReplyError(f"the reply's JSON does not parse: {last}")


def ask_json(
    chat: ChatFn,
    messages: list[dict[str, Any]],
    validate: Callable[[Any], T],
    max_reasks: int,
    what: str,
) -> T:
    """Ask, parse the reply as JSON and `validate` it (raising ValueError with the reason); on a
    bad reply, send the error back and ask again, up to `max_reasks` times. Raises ReplyError
    naming `what` and the last error when every reply is bad; LLMError from `chat` propagates."""
    error = ""
    for _ in range(max_reasks + 1):
        reply = chat(messages)
        try:
            return validate(parse_json_reply(reply))
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            error = str(exc)
        messages = [
            *messages,
            {"role": "assistant", "content": trim(reply, 8000)},
            {
                "role": "user",
                "content": f"Your reply is not valid: {trim(error, MAX_FEEDBACK_CHARS)}\n\n"
                "Reply again with the complete, corrected JSON in one ```json block.",
            },
        ]
    raise ReplyError(
        f"{what}: {max_reasks + 1} replies, none valid; last error: {trim(error, 600)}"
    )
