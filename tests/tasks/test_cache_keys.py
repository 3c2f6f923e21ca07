"""Stage code versions follow imports: a one-line edit to a module re-runs exactly the stages whose
module reaches it, and an unchanged re-run writes byte-identical Parquet so later stages skip."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.storage import fs
from clawloop.storage.cache_key import code_version, import_closure
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "flows",
    "tasks",
    "diagnosis",
    "synthesis",
    "generators",
    "harness",
    "training",
    "storage",
)
NAMES = [s.name for s in STAGES]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the project's packages outside the repository, to edit."""
    base = tmp_path_factory.mktemp("tree")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, base / name, ignore=shutil.ignore_patterns("__pycache__"))
    return base


def _versions(tree: Path) -> dict[str, str]:
    return {n: code_version(f"clawloop.tasks.{n}", root=tree) for n in NAMES}


def _rerun_after_editing(tree: Path, module: str) -> set[str]:
    before = _versions(tree)
    path = tree / module
    original = path.read_text()
    path.write_text(original + "\n# one more line\n")
    try:
        after = _versions(tree)
    finally:
        path.write_text(original)
    return {n for n in NAMES if before[n] != after[n]}


@pytest.mark.parametrize(
    ("module", "rerun"),
    [
        # synthesize runs domain-grounded reference plans in the sandbox and checks their
        # predicates with the grader's comparison, so it follows these too
        ("harness/taskfolder/grader.py", {"synthesize", "forge", "verify", "rollout", "diagnose"}),
        ("harness/taskenv.py", {"synthesize", "verify", "rollout", "diagnose"}),
        ("harness/sandbox/bwrap.py", {"synthesize", "forge", "verify", "rollout", "diagnose"}),
        ("synthesis/domain/runtime.py", {"synthesize"}),
        # verify's ablation re-renders built-ins to know the generator is our own code
        ("synthesis/builtin/reconciliation.py", {"synthesize", "verify"}),
        ("training/grpo.py", {"train"}),
        ("diagnosis/summary.py", {"diagnose"}),
        ("tasks/forge.py", {"forge"}),
        ("tasks/engine.py", set()),
    ],
)
def test_editing_one_module_changes_the_code_of_the_stages_that_import_it(tree, module, rerun):
    assert _rerun_after_editing(tree, module) == rerun


def test_the_real_tree_gives_each_stage_its_own_code_version():
    versions = {n: code_version(f"clawloop.tasks.{n}") for n in NAMES}
    assert len(set(versions.values())) == len(NAMES)
    assert _versions(ROOT) == versions


def test_type_only_imports_are_not_code(tree):
    # tasks.stage names RunConfig for type checkers only: editing the run config's module (which
    # imports every stage) must not change every stage's code.
    assert "clawloop.tasks.config" not in import_closure("clawloop.tasks.forge")
    assert _rerun_after_editing(tree, "tasks/config.py") == set()


def _cfg(tmp_path: Path) -> object:
    return parse_config(
        {
            "storage": {"root": str(tmp_path)},
            "iterations": 1,
            "sandbox": {"backend": "bwrap"},
            "synthesize": {"n_train": 2, "n_eval": 1},
        }
    )


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_an_unchanged_forced_rerun_writes_the_same_bytes_and_later_stages_skip(tmp_path):
    stages = [s for s in STAGES if s.name in ("synthesize", "forge", "verify")]
    cfg = _cfg(tmp_path)
    first = runs.run_loop(cfg, "r", stages, thread_mapper(False))
    assert first.ok, [o.error for o in first.outcomes if o.error]

    def parquet() -> dict[str, bytes]:
        run = Path(fs.stage_url(str(tmp_path), "r", 1, "forge")).parent
        return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*.parquet"))}

    before = parquet()
    assert runs.rerun_stage(cfg, "r", 1, "forge", stages, thread_mapper(False)).status == "ran"
    assert parquet() == before
    # forge wrote the same bytes, so verify (whose key holds forge's content hash) is up to date
    again = runs.run_loop(cfg, "r", stages, thread_mapper(False))
    assert {o.stage: o.status for o in again.outcomes} == dict.fromkeys(
        ("synthesize", "forge", "verify"), "skipped"
    )
