"""The tree's rules: dependencies point one way (flows -> tasks -> diagnosis -> synthesis ->
generators -> {harness, training} -> storage), the packages install under `clawloop.*`, and each
stage is one module in tasks/."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from doubles.layout import PACKAGES

from clawloop.flows.pipeline import STAGES

ROOT = Path(__file__).resolve().parents[2]
# A package may import its own modules and those of lower ranks only. Diagnosis reads synthesis's
# capability catalog; synthesis forges and verifies (SkillSynth, domain plans) with generators/;
# generators may use harness (sandboxes, the LLM client); harness and training know nothing of
# each other or of synthesis.
RANK = {
    "flows": 3,
    "tasks": 2,
    "diagnosis": 1.7,
    "synthesis": 1.6,
    "generators": 1.5,
    "harness": 1,
    "training": 1,
    "storage": 0,
}
# The crossings, on purpose. The local policy server stops sampling at the id training treats as
# a turn's end, so both read it from training's one function (a second copy could drift). Verify
# trusts a generator that is exactly the built-in library's rendering, so it asks the library.
# Verify holds a stored domain task to the derivability test synthesis made it with, by asking
# that one function (a copy could drift, and making and verifying a task would disagree).
# The token-in client (harness/tokens.py) renders each prompt with the function training renders
# the same episode with, so the ids sent are the ids trained.
ALLOWED = {
    ("harness/local_server.py", "clawloop.training.sequences"),
    ("harness/tokens.py", "clawloop.training.sequences"),
    ("generators/verify/host_checks.py", "clawloop.synthesis.library"),
    ("generators/verify/derivable.py", "clawloop.synthesis.domain.derivable"),
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append(node.module)
    return out


def _violations(root: Path) -> list[str]:
    bad = []
    for pkg in RANK:
        for path in sorted((root / pkg).rglob("*.py")):
            for mod in _imports(path):
                parts = mod.split(".")
                if parts[0] in RANK:
                    bad.append(f"{path.relative_to(root)}: bare `{mod}` (use clawloop.{mod})")
                    continue
                if parts[0] != "clawloop" or len(parts) < 2 or parts[1] not in RANK:
                    continue
                target = parts[1]
                if (str(path.relative_to(root)), mod) in ALLOWED:
                    continue
                if target != pkg and RANK[target] >= RANK[pkg]:
                    bad.append(f"{path.relative_to(root)} ({pkg}) imports {mod} ({target})")
    return bad


def test_the_ranks_are_the_package_list():
    assert tuple(RANK) == PACKAGES


def test_no_package_imports_a_higher_or_sibling_one():
    assert _violations(ROOT) == []


def test_the_check_catches_an_upward_or_sibling_import(tmp_path):
    for pkg in RANK:
        (tmp_path / pkg).mkdir()
    (tmp_path / "storage" / "bad.py").write_text("from clawloop.flows import pipeline\n")
    (tmp_path / "harness" / "peer.py").write_text("import clawloop.training.grpo\n")
    (tmp_path / "tasks" / "ok.py").write_text("from clawloop.harness import llm\n")
    found = _violations(tmp_path)
    assert len(found) == 2
    assert any("storage/bad.py" in v for v in found) and any("harness/peer.py" in v for v in found)


def test_every_package_folder_is_installed_under_the_clawloop_namespace():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {
        "clawloop." + ".".join(p.parent.relative_to(ROOT).parts)
        for pkg in RANK
        for p in (ROOT / pkg).rglob("__init__.py")
    }
    assert listed == on_disk
    assert config["package-dir"] == {"clawloop": "."}


def test_each_stage_is_one_module_in_tasks():
    assert [s.name for s in STAGES] == [
        "synthesize",
        "forge",
        "verify",
        "rollout",
        "train",
        "diagnose",
    ]
    for spec in STAGES:
        assert spec.module == f"clawloop.tasks.{spec.name}"
        assert (ROOT / "tasks" / f"{spec.name}.py").is_file()


def test_no_test_double_ships_in_the_package():
    shipped = [p.name for pkg in RANK for p in (ROOT / pkg).rglob("*.py")]
    assert "fake_openai.py" not in shipped


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(("clawloop", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _arrows(root: Path) -> dict[str, set[str]]:
    """Every project module -> the project modules it imports, read from every import statement
    (inside functions and under TYPE_CHECKING too: a reader sees those arrows). `from pkg import
    x` points at pkg.x when that is a module, else at pkg (its __init__)."""
    files = {_module_name(root, p): p for pkg in RANK for p in (root / pkg).rglob("*.py")}
    out: dict[str, set[str]] = {}
    for name, path in files.items():
        found: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in files]
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(base)
        out[name] = {m for m in found if m in files and m != name}
    return out


def _circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(arrows.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(arrows):
        if v not in index:
            visit(v)
    return found


def test_no_modules_import_each_other_in_a_circle():
    assert _circles(_arrows(ROOT)) == []


def test_the_circle_check_finds_a_circle_through_a_function_level_import(tmp_path):
    for pkg in RANK:
        (tmp_path / pkg).mkdir()
    (tmp_path / "tasks" / "config.py").write_text("from clawloop.tasks import train\n")
    (tmp_path / "tasks" / "train.py").write_text(
        "def f():\n    from clawloop.tasks.config import RunConfig\n"
    )
    (tmp_path / "tasks" / "alone.py").write_text("from clawloop.tasks import config\n")
    assert _circles(_arrows(tmp_path)) == [["clawloop.tasks.config", "clawloop.tasks.train"]]


def test_every_doc_a_module_cites_is_in_the_repository():
    cited = {
        (str(path.relative_to(ROOT)), doc)
        for pkg in RANK
        for path in (ROOT / pkg).rglob("*.py")
        for doc in re.findall(r"docs/[\w/.-]+\.md", path.read_text())
    }
    assert [c for c in sorted(cited) if not (ROOT / c[1]).is_file()] == []
    assert any(doc == "docs/architecture.md" for _, doc in cited)
