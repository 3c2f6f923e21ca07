"""Load an executable-domain folder into a Domain, checking the contract on the way.

Every violation is a DomainError naming the file, what is wrong and what to do: a missing or
unparsable domain.toml, no [domain] name, a [state] format other than json / sqlite, a state
path that is missing or of the wrong kind, no tools/*.py, a tools file that does not parse, a
class tool without a schema name or parameters, two tools with one name, a [state.keys] entry
for an unknown table or field.

Which symbols are tools (the host only parses the files):
- every public top-level `def` of a tools/*.py file not named `_*.py` (its first parameter is
  the state); `_private` functions and `_*.py` modules are helpers, followed for reads/writes;
- every class with a static `invoke` and a static `get_info` (the tau-bench shape); a base class
  whose get_info returns nothing (it raises NotImplementedError) is not a tool.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from clawloop.synthesis.domain.analysis import analyse
from clawloop.synthesis.domain.model import Domain, DomainError, Tool
from clawloop.synthesis.domain.parsed import Module, Project, parse_module
from clawloop.synthesis.domain.signature import (
    build_schema,
    docstring_parts,
    function_params,
    literal_schema,
    schema_params,
)
from clawloop.synthesis.domain.state import json_table_paths, table_fields

BUILTIN = Path(__file__).resolve().parent / "builtin"
FORMATS = ("json", "sqlite")


def builtin_domains() -> list[Path]:
    """The folders of the built-in executable domains, sorted by name."""
    return sorted(p.parent for p in BUILTIN.glob("*/domain.toml"))


def _read_toml(root: Path) -> dict:
    path = root / "domain.toml"
    if not path.is_file():
        raise DomainError(
            f"{path}: not found; an executable domain folder needs a domain.toml with "
            '[domain] name and [state] format = "json" | "sqlite", path'
        )
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DomainError(f"{path}: not valid TOML ({exc}); fix the syntax") from exc


def _check_state(root: Path, cfg: dict) -> tuple[str, str]:
    where = root / "domain.toml"
    state = cfg.get("state")
    if not isinstance(state, dict):
        raise DomainError(
            f'{where}: no [state] table; add [state] format = "json" | "sqlite" and path'
        )
    fmt = state.get("format")
    if fmt not in FORMATS:
        raise DomainError(
            f"{where}: [state] format is {fmt!r}; it must be one of {', '.join(FORMATS)}"
        )
    rel = state.get("path")
    if not isinstance(rel, str) or not rel:
        raise DomainError(f"{where}: [state] has no path; set path to the json folder or .db file")
    path = root / rel
    if fmt == "json" and not path.is_dir():
        raise DomainError(f"{where}: [state] path {rel!r} is not a folder of <table>.json files")
    if fmt == "json" and not json_table_paths(path):
        raise DomainError(f"{path}: no <table>.json files; put one JSON file per table there")
    if fmt == "sqlite" and not path.is_file():
        raise DomainError(f"{where}: [state] path {rel!r} is not a sqlite .db file")
    return fmt, rel


def _check_keys(root: Path, cfg: dict, fields: dict[str, tuple[str, ...]]) -> dict[str, str]:
    where = root / "domain.toml"
    keys = cfg.get("state", {}).get("keys", {})
    if not isinstance(keys, dict):
        raise DomainError(f'{where}: [state.keys] must map table names to fields (table = "field")')
    for table, key in keys.items():
        if table not in fields:
            raise DomainError(
                f"{where}: [state.keys] names table {table!r}, which the state does not have; "
                f"tables: {', '.join(fields) or '(none)'}"
            )
        if not isinstance(key, str) or (fields[table] and key not in fields[table]):
            raise DomainError(
                f"{where}: [state.keys] {table} = {key!r} is not a field of {table}; fields: "
                f"{', '.join(fields[table])}"
            )
    return dict(keys)


def _modules(root: Path) -> dict[str, Module]:
    folder = root / "tools"
    files = sorted(p for p in folder.glob("*.py") if p.is_file()) if folder.is_dir() else []
    if not files:
        raise DomainError(f"{folder}: no tools/*.py; put the domain's tools there")
    out = {}
    for path in files:
        rel = f"tools/{path.name}"
        try:
            out[path.stem] = parse_module(path, rel)
        except RecursionError as exc:
            raise DomainError(f"{root / rel}: nested too deeply to parse; simplify it") from exc
        except SyntaxError as exc:
            raise DomainError(
                f"{root / rel}: does not parse (line {exc.lineno}: {exc.msg}); fix the syntax"
            ) from exc
        except (UnicodeDecodeError, ValueError) as exc:
            raise DomainError(f"{root / rel}: not readable Python source ({exc})") from exc
    return out


def _is_static(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


def _abstract(get_info: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A base class's get_info that returns nothing (`raise NotImplementedError`, `...`, `pass`):
    the tau-bench `Tool(abc.ABC)` every tool class inherits from, not a tool itself."""
    return not any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(get_info))


def _class_tools(project: Project, module: Module) -> list[Tool]:
    out = []
    for cls, methods in module.classes.items():
        invoke, info = methods.get("invoke"), methods.get("get_info")
        if invoke is None or info is None or _abstract(info):
            continue
        if not (_is_static(invoke) and _is_static(info)):
            raise DomainError(
                f"{module.where}: {cls}.invoke and {cls}.get_info must both be @staticmethod"
            )
        schema = literal_schema(info, module.where, cls)  # type: ignore[arg-type]
        name, description, params = schema_params(schema, module.where, cls)
        named = {a.arg for a in invoke.args.posonlyargs + invoke.args.args + invoke.args.kwonlyargs}
        missing = [p.name for p in params if p.name not in named]
        if missing and invoke.args.kwarg is None:
            raise DomainError(
                f"{module.where}: {cls}.invoke does not take {', '.join(missing)} from its "
                "schema; add them to invoke's signature"
            )
        if not invoke.args.posonlyargs + invoke.args.args:
            raise DomainError(f"{module.where}: {cls}.invoke takes no state argument (data) first")
        out.append(_tool(project, module, invoke, name, "class", cls, description, params, schema))
    return out


def _function_tools(project: Project, module: Module, stem: str) -> list[Tool]:
    if stem.startswith("_"):
        return []
    out = []
    for name, node in module.functions.items():
        if name.startswith("_"):
            continue
        params = function_params(node, module.where)
        description, _ = docstring_parts(ast.get_docstring(node) or "")
        schema = build_schema(name, description, params)
        out.append(
            _tool(project, module, node, name, "function", name, description, params, schema)
        )
    return out


def _uses_state(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Is the first parameter (the state) named anywhere in the body? A certain signal, unlike
    "no table found": a tool reading `data[name]` touches the state through an unknown table."""
    args = node.args.posonlyargs + node.args.args
    if not args:
        return False
    state = args[0].arg
    return any(
        isinstance(n, ast.Name) and n.id == state for stmt in node.body for n in ast.walk(stmt)
    )


def _tool(project, module, node, name, shape, symbol, description, params, schema) -> Tool:
    try:
        facts = analyse(project, module, node)
    except RecursionError as exc:
        raise DomainError(
            f"{module.where}: {symbol} is nested too deeply to analyse; simplify it"
        ) from exc
    return Tool(
        name=name,
        file=module.rel,
        shape=shape,
        symbol=symbol,
        description=description,
        params=params,
        returns=tuple(sorted(facts.returns)),
        reads=tuple(sorted(facts.reads)),
        writes=tuple(sorted(facts.writes)),
        errors=tuple(facts.errors),
        schema=schema,
        state_access=_uses_state(node),
    )


def load_domain(root: Path) -> Domain:
    """Parse and check the domain folder at `root`; tools analysed by AST (never run)."""
    root = Path(root)
    if not root.is_dir():
        raise DomainError(f"{root}: not a folder; point at an executable-domain folder")
    cfg = _read_toml(root)
    meta = cfg.get("domain")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise DomainError(f'{root / "domain.toml"}: no [domain] name; add name = "<domain>"')
    fmt, rel = _check_state(root, cfg)
    fields = table_fields(root, fmt, rel)
    keys = _check_keys(root, cfg, fields)
    project = Project(_modules(root), fields, fmt)
    tools: list[Tool] = []
    for stem, module in project.modules.items():
        tools += _function_tools(project, module, stem) + _class_tools(project, module)
    if not tools:
        raise DomainError(
            f"{root / 'tools'}: no tools found (no public function or class with static "
            "invoke/get_info); see synthesis/domain/model.py for the two shapes"
        )
    seen: dict[str, str] = {}
    for t in tools:
        if t.name in seen:
            raise DomainError(
                f"{root / t.file}: tool {t.name!r} is also defined in {seen[t.name]}; "
                "tool names must be unique"
            )
        seen[t.name] = t.file
    policy = root / "policy.md"
    return Domain(
        root=root,
        name=meta["name"],
        description=str(meta.get("description", "")),
        state_format=fmt,
        state_path=rel,
        keys=keys,
        policy=policy.read_text() if policy.is_file() else "",
        tables=tuple(sorted(fields)),
        tools=tuple(tools),
    )
