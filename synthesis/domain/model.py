"""Executable domains as the host knows them: parsed (ast), never run.

An executable domain is a folder (the contract, fixed):

    <domain>/domain.toml   [domain] name, description; [state] format = "json" | "sqlite", path
                           (json: a folder of <table>.json, each an object keyed by primary key or
                           a list of records; sqlite: a .db file); optional [state.keys]
                           <table> = "<business key>"
    <domain>/tools/*.py    tools: `def name(state, **params)` with type hints and a docstring, or a
                           class with a static `invoke(data, **params)` and a static `get_info()`
                           returning an OpenAI function schema (the tau-bench shape). The first
                           argument is the whole state: a dict of tables (json) or a
                           sqlite3.Connection.
    <domain>/policy.md     optional: the domain's rules, shown to the agent

Domain code is third-party code: the host parses it; whatever runs it runs in a sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DomainError(ValueError):
    """A domain folder breaks the contract: names the file and what is wrong."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # JSON-schema type: string | integer | number | boolean | array | object
    required: bool = True
    description: str = ""
    enum: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Tool:
    name: str  # the schema's function name (function shape: the function's name)
    file: str  # relative to the domain folder, e.g. "tools/orders.py"
    shape: str  # "function" | "class"
    symbol: str  # the function's or the class's name in that file
    description: str
    params: tuple[Param, ...]
    returns: tuple[str, ...] = ()  # fields of what it returns (dict keys / json.dumps(record))
    reads: tuple[str, ...] = ()  # tables it reads (from the code)
    writes: tuple[str, ...] = ()  # tables it writes (from the code)
    errors: tuple[str, ...] = ()  # the error messages it can return or raise (from the code)
    schema: dict[str, Any] = field(default_factory=dict)  # OpenAI function schema
    # Does its code use the state argument at all? False: a pure helper (think, calculate,
    # transfer_to_human_agents), offered to no skill since it cannot change or show the state.
    state_access: bool = True

    @property
    def read_only(self) -> bool:
        return not self.writes


@dataclass(frozen=True)
class Skill:
    name: str  # a folder name: [a-z0-9-]+
    tools: tuple[str, ...]
    tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class Domain:
    root: Path
    name: str
    description: str
    state_format: str  # "json" | "sqlite"
    state_path: str  # relative to root: the json folder or the .db file
    keys: dict[str, str]  # table -> business key field ([state.keys]; may be partial)
    policy: str  # policy.md text, "" if none
    tables: tuple[str, ...]
    tools: tuple[Tool, ...]

    def tool(self, name: str) -> Tool:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(name)
