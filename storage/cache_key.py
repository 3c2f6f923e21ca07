"""Stage cache keys: hash(config slice, upstream manifests' hashes, code version).

A stage is skipped when its committed manifest carries the same key. The code version is the
sha256 of the source of every project module the stage's module imports, transitively, found by
reading the import statements (`ast`, nothing is executed): editing the grader re-runs the stages
whose code reaches the grader, editing the README re-runs nothing. Imports inside functions count
(they run when the stage does); imports under `if TYPE_CHECKING:` do not (they never run).

Programs the code ships as files and reads as data (a shell script, a C source, a Dockerfile
template) count as the code of the module that reads them: such a module reads each through
`data_text(__file__, "templates/test.sh")`, with string literals, and the code version hashes
every file those calls name. A project Python file read as data must be imported instead (as the
task-folder writer imports the grader), so the graph sees it.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from clawloop.storage.manifest import sha256_json

PROJECT = "clawloop"
# The folder holding the project's packages (flows/, tasks/, ... ): the repository in a checkout,
# site-packages/clawloop/ when installed. Module names resolve to files under it, statically.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in `tree` except those under `if TYPE_CHECKING:`."""
    out: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def data_text(module_file: str, rel: str) -> str:
    """The text of the data file `rel` (a path relative to the folder of `module_file`, the
    caller's `__file__`). Call it with string literals: the code version of every module whose
    closure holds the caller hashes the file too (`data_files`)."""
    path = Path(module_file).parent / rel
    try:
        return path.read_text()
    except OSError as exc:
        raise FileNotFoundError(
            f"{path}: a program file clawloop ships is missing ({exc.strerror}); reinstall the "
            "package (pyproject.toml's package-data lists these files)"
        ) from exc


def _data_calls(tree: ast.AST) -> list[str]:
    """The literal paths of every `data_text(__file__, "rel")` call in `tree`."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) != 2:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        rel = node.args[1]
        if name == "data_text" and isinstance(rel, ast.Constant) and isinstance(rel.value, str):
            out.append(rel.value)
    return sorted(set(out))


def data_files(name: str, root: Path = PROJECT_ROOT) -> list[Path]:
    """The data files module `name` reads through `data_text`, sorted."""
    path = module_file(name, root)
    if path is None:
        return []
    stat = path.stat()
    return [path.parent / rel for rel in _data_rels(path, stat.st_mtime_ns, stat.st_size)]


@lru_cache(maxsize=1024)
def _data_rels(path: Path, _mtime_ns: int, _size: int) -> tuple[str, ...]:
    return tuple(_data_calls(ast.parse(path.read_bytes(), filename=str(path))))


def module_file(name: str, root: Path = PROJECT_ROOT) -> Path | None:
    """The source file of project module `name` under `root` (a package: its __init__.py);
    None for anything else (the standard library, third-party packages, a name that is no file)."""
    parts = name.split(".")
    if parts[0] != PROJECT or len(parts) < 2:
        return None
    base = root.joinpath(*parts[1:])
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def direct_imports(name: str, root: Path = PROJECT_ROOT) -> set[str]:
    """Project modules that module `name` imports (a `from pkg import x` counts `pkg.x` when x is a
    module), plus the packages above each of them, whose __init__ runs on import."""
    path = module_file(name, root)
    if path is None:
        return set()
    stat = path.stat()
    return set(_direct_imports(name, path, root, stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=1024)
def _direct_imports(
    name: str, path: Path, root: Path, _mtime_ns: int, _size: int
) -> frozenset[str]:
    """direct_imports, parsed once per version of the file (the stat fields are the cache key)."""
    found: set[str] = set()
    package = _package_of(name, path)
    for node in _import_nodes(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:  # relative: from .x import y
            parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{parent}.{base}" if base else parent
        found.add(base)
        found.update(f"{base}.{alias.name}" for alias in node.names)
    out: set[str] = set()
    for mod in found:
        if module_file(mod, root) is None:
            continue
        parts = mod.split(".")
        out.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    return frozenset({m for m in out if module_file(m, root) is not None} - {name})


def import_closure(name: str, root: Path = PROJECT_ROOT) -> tuple[str, ...]:
    """`name` and every project module it reaches through imports, sorted."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        mod = todo.pop()
        if mod in seen or module_file(mod, root) is None:
            continue
        seen.add(mod)
        todo.extend(direct_imports(mod, root) - seen)
    return tuple(sorted(seen))


def code_version(module: str, root: Path = PROJECT_ROOT) -> str:
    """sha256 over the names and sources of `import_closure(module)` and the data files each
    of those modules reads (`data_files`)."""
    modules = import_closure(module, root)
    if not modules:
        raise ValueError(f"{module!r} is not a {PROJECT} module under {root}")
    h = hashlib.sha256()
    for mod in modules:
        path = module_file(mod, root)
        if path is not None:
            h.update(mod.encode() + b"\0" + path.read_bytes() + b"\0")
            for data in data_files(mod, root):
                rel = data.relative_to(root).as_posix()
                h.update(rel.encode() + b"\0" + data.read_bytes() + b"\0")
    return h.hexdigest()


def inputs_hash(config_slice: dict[str, Any], upstream: dict[str, str], code: str) -> str:
    """The cache key of one stage run."""
    return sha256_json(
        {"config": config_slice, "upstream": dict(sorted(upstream.items())), "code": code}
    )
