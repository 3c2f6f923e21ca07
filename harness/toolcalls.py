"""Tool calls written in a model's text: the forms real models emit, read by one parser.

`parse_tool_calls(text) -> ParsedText` finds the calls a reply wrote as text, in the forms
instruct models really produce when a server has no tool parser (or the model ignores the
template's format):

- hermes tags: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen's and Hermes'
  chat templates; what vLLM's hermes parser reads). When a text has any `<tool_call>` tag, only
  the tagged blocks count, so prose around them is never read as a call;
- JSON in markdown code fences: ```` ```json {"name": "finish", "arguments": {...}}``` ```` and
  plain ```` ``` ```` (Qwen2.5-Coder answers this way);
- a bare JSON object with `name` and `arguments` in the prose;
- a list of such objects, or several objects one after another, in any of the forms above.

A call is an object with a string `name` and `arguments` (or `parameters`) that is an object or a
JSON string holding one; the OpenAI wrapper `{"type": "function", "function": {...}}` is
unwrapped. An object counts as a call only when it has `arguments`/`parameters` or no keys but
the call's own (`name`, `id`, `type`), so a data object a model shows (`{"name": "Ann", "age":
3}`, `{"word": "violet"}`) is never run. An object that is valid as a Python literal but not as
JSON (single-quoted strings: small models quote a file's content Python-style, e.g.
`"content": '{"word": "violet"}'`) is read with `ast.literal_eval` (no code runs) and the call
is marked `repaired`. Something that was meant as a call and cannot be read (an object opening
with a `name` key, or any `<tool_call>` block, that is neither JSON nor a Python literal, or a
reply cut inside it) is an error naming what is wrong; everything else is prose.

`content` is the text with every recognised call taken out (tags, whole code fences that held
calls, bare objects), what an assistant message keeps beside native `tool_calls`; `errors` say
what could not be read; `CALL_FORMAT` is the canonical form the agent asks for when it finds no
call. Pure functions only: no I/O, no knowledge of which tools exist.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

HERMES_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
# A markdown fence: ``` plus an optional info string, the body, the closing ``` (or the end of a
# reply cut at max_tokens).
FENCE_RE = re.compile(r"```([\w+.-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_OPEN_RE = re.compile(r"[\{\[]")
_LIST_OF_OBJECTS_RE = re.compile(r"\[\s*\{")
# An object that opens like a call (a `name`/`function` key first): unreadable means an error.
_ATTEMPT_RE = re.compile(r"""\{\s*["']?(?:name|function)["']?\s*:""")
CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
CALL_FORMAT = (
    '<tool_call>{"name": "write_file", "arguments": {"path": "output/result.txt", '
    '"content": "..."}}</tool_call>'
)
FORMAT_HINT = (
    f"Write each tool call as {CALL_FORMAT} (one JSON object: the tool's name and its arguments "
    'as an object, strings in double quotes, quotes inside them escaped as \\") or use native '
    "tool calls."
)


@dataclass(frozen=True)
class ParsedCall:
    """One call: `arguments` a dict when read from text, the JSON string a server sent when
    native. `form`: native | hermes | fenced | bare; `repaired`: read as a Python literal."""

    name: str
    arguments: dict[str, Any] | str
    id: str
    form: str = "native"
    repaired: bool = False


@dataclass(frozen=True)
class ParsedText:
    """What `parse_tool_calls` found: the prose left, the calls in text order, the errors."""

    content: str
    calls: tuple[ParsedCall, ...]
    errors: tuple[str, ...]

    @property
    def forms(self) -> tuple[str, ...]:
        """The distinct forms the calls were written in, in order of first use."""
        return tuple(dict.fromkeys(c.form for c in self.calls))


@dataclass(frozen=True)
class _Value:
    """A JSON/Python value read from text[start:end]; `error` when it could not be read."""

    start: int
    end: int
    value: Any = None
    repaired: bool = False
    error: str = ""


def balanced_end(text: str, start: int) -> int | None:
    """The index just past the bracket that closes the one at `start`, or None (cut off).

    Strings in double or single quotes are skipped with their backslash escapes, so a `}` inside
    `"..."` or `'...'` does not close anything."""
    closer = {"{": "}", "[": "]"}
    stack: list[str] = []
    quote = ""
    i = start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in closer:
            stack.append(closer[ch])
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return i + 1
        i += 1
    return None


def read_value(text: str) -> tuple[Any, bool]:
    """`text` as JSON (raw newlines inside strings allowed), else as a Python literal; returns
    (value, repaired). Raises ValueError with the JSON error when it is neither."""
    try:
        return json.loads(text, strict=False), False
    except json.JSONDecodeError as exc:
        json_error = exc
    try:
        return ast.literal_eval(text), True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    raise ValueError(
        f"not valid JSON ({json_error.msg} at char {json_error.pos}): {_clip(text)}"
    ) from None


def _clip(text: str, limit: int = 200) -> str:
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _values(text: str, resume: bool = True) -> list[_Value]:
    """Every top-level object (and list starting with an object) in `text`, read or not.

    After a bracket that is never closed the scan goes on inside it when `resume` (prose: a
    stray "{" must not hide a later call), else stops (a tag's body: the rest is that object)."""
    out: list[_Value] = []
    i = 0
    while True:
        m = _OPEN_RE.search(text, i)
        if m is None:
            return out
        start = m.start()
        if text[start] == "[" and not _LIST_OF_OBJECTS_RE.match(text, start):
            i = start + 1  # a list of calls starts with an object; "[1]" or "[x](y)" is prose
            continue
        end = balanced_end(text, start)
        if end is None:
            # Unclosed: a reply cut at max_tokens, or a stray bracket in prose; look on after
            # it, so one "{" in a sentence does not hide a call that follows.
            msg = f"not valid JSON (a bracket or string is never closed): {_clip(text[start:])}"
            out.append(_Value(start, len(text), error=msg))
            if not resume:
                return out
            i = start + 1
            continue
        try:
            value, repaired = read_value(text[start:end])
            out.append(_Value(start, end, value, repaired))
        except ValueError as exc:
            out.append(_Value(start, end, error=str(exc)))
        i = end


def _unwrap(obj: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI shape {"type": "function", "function": {"name", "arguments"}} as a plain call."""
    fn = obj.get("function")
    if isinstance(fn, dict) and "name" in fn and set(obj) <= {"type", "function", "id"}:
        return fn
    return obj


def is_call_shaped(obj: Any) -> bool:
    """An object that is a tool call, not data: a string name, and arguments/parameters or no
    key but a call's own."""
    if not isinstance(obj, dict):
        return False
    obj = _unwrap(obj)
    if not isinstance(obj.get("name"), str) or not obj["name"].strip():
        return False
    return "arguments" in obj or "parameters" in obj or set(obj) <= CALL_KEYS


def _arguments(obj: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments as a dict; raises ValueError saying what is wrong with them."""
    args = obj.get("arguments", obj.get("parameters"))
    if args is None or args == "":
        return {}
    if isinstance(args, str):
        try:
            args = json.loads(args, strict=False)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"'arguments' is a string that is not a JSON object ({exc.msg}): {_clip(args)}"
            ) from None
    if not isinstance(args, dict):
        raise ValueError(f"'arguments' must be an object, not {type(args).__name__}")
    return args


def _calls_of(value: Any) -> list[dict[str, Any]] | None:
    """The call objects a read value holds (an object or a list of them), None if it is data."""
    items = value if isinstance(value, list) else [value]
    if items and all(is_call_shaped(x) for x in items):
        return [_unwrap(x) for x in items]
    return None


class _Collector:
    """Accumulates calls and errors in text order, numbering calls as the agent did."""

    def __init__(self) -> None:
        self.calls: list[ParsedCall] = []
        self.errors: list[str] = []

    def add(self, objs: list[dict[str, Any]], form: str, repaired: bool, where: str) -> None:
        for obj in objs:
            try:
                args = _arguments(obj)
            except ValueError as exc:
                self.errors.append(f"{where}: {exc}")
                continue
            n = len(self.calls)
            self.calls.append(ParsedCall(obj["name"], args, f"call_text_{n}", form, repaired))


def _strip_fence(body: str) -> str:
    """A hermes block's body without a code fence around it (```json ... ``` inside the tags)."""
    m = FENCE_RE.fullmatch(body.strip())
    return m.group(2) if m else body


def _parse_hermes(text: str, out: _Collector) -> str:
    for i, m in enumerate(HERMES_RE.finditer(text)):
        where = f"tool call #{i + 1}"
        body = _strip_fence(m.group(1)).strip()
        values = _values(body, resume=False)
        if not values:
            out.errors.append(f"{where} holds no JSON object: {_clip(body)}")
        for v in values:
            if v.error:
                out.errors.append(f"{where} is {v.error}")
            elif (objs := _calls_of(v.value)) is None:
                out.errors.append(f"{where} needs a string 'name' and 'arguments': {_clip(body)}")
            else:
                out.add(objs, "hermes", v.repaired, where)
    return HERMES_RE.sub("", text).strip()


def _take_calls(segment: str, form: str, out: _Collector, where: str) -> list[tuple[int, int]]:
    """Read the calls of one segment (a fence's body, or prose); returns the spans they took."""
    spans = []
    for v in _values(segment):
        if v.error:
            if _ATTEMPT_RE.match(segment, v.start):
                out.errors.append(f"{where}: the tool call is {v.error}")
        elif (objs := _calls_of(v.value)) is not None:
            out.add(objs, form, v.repaired, where)
            spans.append((v.start, v.end))
    return spans


def _parse_untagged(text: str, out: _Collector) -> str:
    """Fenced and bare calls, in text order; returns the text with the calls taken out."""
    keep: list[str] = []
    pos = 0
    for k, m in enumerate(FENCE_RE.finditer(text)):
        prose = text[pos : m.start()]
        keep.append(_cut(prose, _take_calls(prose, "bare", out, "tool call in the text")))
        where = f"code block #{k + 1}"
        if not _take_calls(m.group(2), "fenced", out, where):
            keep.append(m.group(0))  # a block with no call (code, data) stays as written
        pos = m.end()
    prose = text[pos:]
    keep.append(_cut(prose, _take_calls(prose, "bare", out, "tool call in the text")))
    return re.sub(r"\n{3,}", "\n\n", "".join(keep)).strip()


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in reversed(spans):
        text = text[:start] + text[end:]
    return text


def parse_tool_calls(text: str | None) -> ParsedText:
    """The tool calls written in `text` (see the module docstring), the prose left, the errors.

    A reply cut at max_tokens inside a `<tool_call>` block or a fence is parsed like a closed
    one; a call cut inside its JSON is an error."""
    text = text or ""
    out = _Collector()
    parse = _parse_hermes if "<tool_call>" in text else _parse_untagged
    content = parse(text, out)
    return ParsedText(content, tuple(out.calls), tuple(out.errors))


def native_tool_call(call: ParsedCall, call_id: str) -> dict[str, Any]:
    """A parsed call as an OpenAI `tool_calls` entry, arguments as JSON text."""
    args = call.arguments
    return {
        "id": call_id,
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
        },
    }
