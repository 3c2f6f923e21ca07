"""Tools files as the analysis sees them: parsed modules, value origins, and the facts found.

Kept apart from analysis.py (the walk over a function body) so the loader and the analysis share
one parsed view of tools/*.py: what each file defines (functions, classes with their methods,
module-level string constants) and imports (sibling modules of tools/, for following helpers).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Origin:
    kind: str  # "state" (the dict of tables) | "table" | "conn" (connection/cursor) | "rows"
    table: str = ""
    depth: int = 0  # table / rows: 0 the collection, 1 a record, 2+ inside one
    cols: tuple[str, ...] = ()  # rows: the SELECT's output columns
    # A new container built from state values (a comprehension, dict(x), list(x), x.copy()):
    # storing into it or mutating it changes nothing; what it holds is still the state's.
    copy: bool = False


@dataclass
class Facts:
    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    returns: set[str] = field(default_factory=set)
    errors: dict[str, None] = field(default_factory=dict)
    ret_origins: set[Origin] = field(default_factory=set)
    unparsed_sql: dict[str, None] = field(default_factory=dict)

    def merge(self, other: Facts) -> None:
        self.reads |= other.reads
        self.writes |= other.writes
        self.errors.update(other.errors)
        self.unparsed_sql.update(other.unparsed_sql)


@dataclass
class Module:
    """One tools/*.py file, parsed: what its code can call."""

    rel: str
    tree: ast.Module
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    classes: dict[str, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]]
    consts: dict[str, str]
    imports: dict[str, tuple[str, str]]  # local name -> (sibling module, symbol or "")
    where: str = ""  # the file's path, for error messages


@dataclass
class Project:
    modules: dict[str, Module]  # module name (file stem) -> parsed file
    fields: dict[str, tuple[str, ...]]  # table -> field names (state.py)
    state_format: str
    memo: dict[tuple, Facts] = field(default_factory=dict)
    stack: set[tuple] = field(default_factory=set)


def parse_module(path: Path, rel: str) -> Module:
    tree = ast.parse(path.read_text(), filename=rel)
    functions = {
        n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    classes = {
        n.name: {m.name: m for m in n.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
        for n in tree.body
        if isinstance(n, ast.ClassDef)
    }
    consts = {}
    imports: dict[str, tuple[str, str]] = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant):
            if isinstance(n.value.value, str):
                consts.update({t.id: n.value.value for t in n.targets if isinstance(t, ast.Name)})
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            for a in n.names:
                imports[a.asname or a.name] = (n.module, a.name)
        elif isinstance(n, ast.Import):
            for a in n.names:
                imports[a.asname or a.name] = (a.name, "")
    return Module(rel, tree, functions, classes, consts, imports, str(path))
