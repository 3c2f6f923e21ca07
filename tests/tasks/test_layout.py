"""The tree's rules: dependencies point one way (flows -> tasks -> diagnosis -> synthesis ->
generators -> {harness, training} -> storage), the packages install under `clawloop.*`, and each
stage is one module in tasks/."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

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
