"""Optional LLM analysis of a domain's tools: what the AST could not resolve, an LLM reads.

The AST analysis (analysis.py) is exact where the code is plain and silent where it is not: a
table chosen at run time (`state[TABLES[kind]]`), a helper in a library the host does not parse.
With an endpoint, each tool's source goes to the LLM with the domain's tables and fields; its
answer ({"reads", "writes", "returns"}, JSON, read by synthesis/llm_json.py) is validated (only tables the state holds), the
error fed back on a malformed reply, and cached by the source's hash, the model and the prompt
version. The answer only *adds* to the AST's edges, never removes one: execution stays the
arbiter (a write the LLM imagines changes nothing when the reference plan runs, so a task built
on it is dropped).

    domain, rows = refine_with_llm(load_domain(root), chat, cache_dir, model="m")
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from clawloop.harness.llm import ChatFn, LLMError
from clawloop.synthesis.domain.model import Domain, Tool
from clawloop.synthesis.domain.state import table_fields
from clawloop.synthesis.llm_json import ReplyError, ask_json

PROMPT_VERSION = "domain-analysis-v1"
MAX_REPAIRS = 2
MAX_SOURCE_CHARS = 12_000

SYSTEM = (
    "You read the source of one tool of an executable domain and say which state tables it "
    "reads and writes and which fields its result holds. The state is a dict of tables (JSON) "
    "or a sqlite3.Connection; the tool's first argument is the whole state. Name only tables "
    "from the list given. Answer with one JSON object and nothing else: "
    '{"reads": [table], "writes": [table], "returns": [field]}.'
)


class ToolReading(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reads: list[str]
    writes: list[str]
    returns: list[str] = []


def tool_source(domain: Domain, tool: Tool) -> str:
    """The tool's file (the tool and its helpers), capped."""
    text = (domain.root / tool.file).read_text(encoding="utf-8", errors="replace")
    return text[:MAX_SOURCE_CHARS]


def cache_key(domain: Domain, tool: Tool, model: str) -> str:
    text = f"{PROMPT_VERSION}\0{model}\0{tool.name}\0{tool_source(domain, tool)}"
    return hashlib.sha256(text.encode()).hexdigest()


def prompt(domain: Domain, tool: Tool) -> list[dict[str, str]]:
    fields = table_fields(domain.root, domain.state_format, domain.state_path)
    tables = "\n".join(f"- {t}: {', '.join(sorted(fields.get(t, ())))}" for t in domain.tables)
    user = (
        f"Domain {domain.name} ({domain.state_format} state). Tables and their fields:\n{tables}\n\n"
        f"The tool `{tool.name}` is in {tool.file}:\n```python\n{tool_source(domain, tool)}\n```"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def check_reading(value: Any, tables: tuple[str, ...]) -> ToolReading:
    """A parsed reply as a ToolReading; ValueError with the reason (wrong shape, unknown table)."""
    try:
        reading = ToolReading.model_validate(value)
    except ValidationError as exc:
        raise ValueError("; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}"
                                   for e in exc.errors()[:4])) from exc  # fmt: skip
    unknown = sorted(set(reading.reads + reading.writes) - set(tables))
    if unknown:
        raise ValueError(f"unknown tables {unknown}: name only {list(tables)}")
    return reading


def ask(domain: Domain, tool: Tool, chat: ChatFn) -> tuple[ToolReading | None, str]:
    """(reading, "") or (None, why) after the first answer and MAX_REPAIRS re-asks."""
    try:
        reading = ask_json(chat, prompt(domain, tool), lambda v: check_reading(v, domain.tables),
                           MAX_REPAIRS, f"the reading of {tool.name}")  # fmt: skip
    except LLMError as exc:
        return None, f"LLM call failed ({exc.kind}): {str(exc)[:200]}"
    except ReplyError as exc:
        return None, str(exc)
    return reading, ""


def _cached(path: Path | None) -> ToolReading | None:
    if path is None or not path.is_file():
        return None
    try:
        return ToolReading.model_validate_json(path.read_text())
    except (OSError, ValidationError, ValueError):
        return None  # a damaged entry is asked again


def reading_for(
    domain: Domain, tool: Tool, chat: ChatFn, cache_dir: Path | None, model: str
) -> tuple[ToolReading | None, str]:
    path = Path(cache_dir) / f"{cache_key(domain, tool, model)}.json" if cache_dir else None
    cached = _cached(path)
    if cached is not None:
        return cached, "cached"
    reading, why = ask(domain, tool, chat)
    if reading is not None and path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(reading.model_dump_json())
        tmp.replace(path)
    return reading, why or "asked"


def _added(have: tuple[str, ...], more: list[str]) -> tuple[str, ...]:
    return tuple(x for x in dict.fromkeys(more) if x not in have)


def refine_with_llm(
    domain: Domain, chat: ChatFn, cache_dir: Path | None, model: str = ""
) -> tuple[Domain, list[dict[str, Any]]]:
    """(the domain with each tool's reads/writes/returns extended by the LLM's reading, one row
    per tool: what the LLM added and where the reading came from). A tool whose reading failed
    keeps the AST's edges; its row says why."""
    tools, rows = [], []
    for tool in domain.tools:
        reading, how = reading_for(domain, tool, chat, cache_dir, model)
        add_r = _added(tool.reads, reading.reads) if reading else ()
        add_w = _added(tool.writes, reading.writes) if reading else ()
        add_f = _added(tool.returns, reading.returns) if reading else ()
        tools.append(replace(tool, reads=tool.reads + add_r, writes=tool.writes + add_w,
                             returns=tool.returns + add_f))  # fmt: skip
        rows.append({"tool": tool.name, "how": how, "added_reads": list(add_r),
                     "added_writes": list(add_w), "added_returns": list(add_f)})  # fmt: skip
    return replace(domain, tools=tuple(tools)), rows
