"""Stage code versions follow imports: a one-line edit to a module re-runs exactly the stages whose
module reaches it, and an unchanged re-run writes byte-identical Parquet so later stages skip."""

from __future__ import annotations

import functools
import importlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from doubles.layout import PACKAGES

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.storage import fs
from clawloop.storage.cache_key import code_version, import_closure
from clawloop.storage.manifest import read_manifest
from clawloop.tasks import engine
from clawloop.tasks import synthesize as synth_stage
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import stage_code

ROOT = Path(__file__).resolve().parents[2]
NAMES = [s.name for s in STAGES]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the project's packages outside the repository, to edit."""
    base = tmp_path_factory.mktemp("tree")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, base / name, ignore=shutil.ignore_patterns("__pycache__"))
    return base


# The default config: the library and the domain-grounded synthesis sources on (LLM-written and
# SkillSynth candidates need an endpoint and skill folders).
DEFAULT = parse_config({})
LIBRARY_ONLY = parse_config({"synthesize": {"domain": {"share": 0}}})


def _versions(tree: Path, cfg: Any = DEFAULT) -> dict[str, str]:
    return {s.name: stage_code(s, cfg, root=tree) for s in STAGES}


def _rerun_after_editing(tree: Path, module: str, cfg: Any = DEFAULT) -> set[str]:
    before = _versions(tree, cfg)
    path = tree / module
    original = path.read_text()
    path.write_text(original + "\n# one more line\n")
    try:
        after = _versions(tree, cfg)
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
        # a program read as data (storage.cache_key.data_text) is code of the stages that reach
        # its reader, as the reader's source is
        ("harness/sandbox/reset_dirs.sh", {"synthesize", "forge", "verify", "rollout", "diagnose"}),
        (
            "harness/taskfolder/templates/test.sh",
            {"synthesize", "forge", "verify", "rollout", "diagnose"},
        ),
        ("harness/sandbox/launcher.c", {"synthesize", "forge", "verify", "rollout", "diagnose"}),
        # external ClawGym eval tasks: diagnose, and row 0 in iteration 1's rollout
        ("harness/taskfolder/templates/clawgym_test.sh", {"rollout", "diagnose"}),
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


@pytest.mark.parametrize(
    ("module", "rerun"),
    [
        # only the library on: synthesize runs no sandbox and no grader, so it stays up to date
        ("harness/taskfolder/grader.py", {"forge", "verify", "rollout", "diagnose"}),
        ("harness/sandbox/bwrap.py", {"forge", "verify", "rollout", "diagnose"}),
        ("harness/taskenv.py", {"verify", "rollout", "diagnose"}),
        ("synthesis/domain/runtime.py", set()),
        ("synthesis/skillgraph/construct.py", set()),
        ("synthesis/llm_writer.py", set()),
        ("synthesis/builtin/reconciliation.py", {"synthesize", "verify"}),
        ("tasks/library_source.py", {"synthesize"}),
        ("tasks/domain_source.py", set()),
        ("tasks/synthesize.py", {"synthesize"}),
    ],
)
def test_a_source_that_is_off_keys_no_code(tree, module, rerun):
    assert _rerun_after_editing(tree, module, LIBRARY_ONLY) == rerun


def test_a_source_that_is_off_keys_no_config(tmp_path):
    # domain settings key synthesize only while the domain source is on
    def key(cfg_dict: dict) -> str:
        cfg = parse_config(cfg_dict)
        return json.dumps(synth_stage.config_slice(cfg, 1), sort_keys=True)

    off = {"domain": {"share": 0}}
    five = {"domain": {"share": 0, "max_nodes": 5}}
    assert key({"synthesize": off}) == key({"synthesize": five})
    assert key({"synthesize": {}}) != key({"synthesize": {"domain": {"max_nodes": 5}}})
    assert list(synth_stage.config_slice(LIBRARY_ONLY, 1)) == ["library"]


def test_every_synthesize_setting_keys_some_source():
    # Each source's key holds its own section whole (a new setting keys it with no list to
    # keep), the library's the sample's own settings; the writer and the cache folder key the
    # sources that use them.
    from clawloop.synthesis.config import SynthesizeConfig

    s = SynthesizeConfig(fixed_eval=True)
    cfg = DEFAULT.model_copy(update={"synthesize": s})
    slices = {
        m.rsplit(".", 1)[1]: importlib.import_module(m).config_slice(cfg, 1)
        for m in synth_stage.SOURCES
    }
    assert slices["library_source"]["synthesize"] == s.sample_dump()
    for section, module in [
        ("llm", "llm"),
        ("domain", "domain"),
        ("skills", "skill"),
        ("external", "external"),
    ]:
        assert slices[f"{module}_source"][section] == getattr(s, section).model_dump(mode="json")
    assert slices["llm_source"]["writer_workers"] == slices["skill_source"]["writer_workers"]
    assert (
        slices["domain_source"]["cache_dir"] == slices["skill_source"]["cache_dir"] == s.cache_dir
    )
    keyed = set(s.sample_dump()) | set(SynthesizeConfig.SECTIONS) | {"cache_dir"}
    assert keyed == set(SynthesizeConfig.model_fields)


def test_the_real_tree_gives_each_stage_its_own_code_version():
    versions = {s.name: stage_code(s, DEFAULT) for s in STAGES}
    assert len(set(versions.values())) == len(NAMES)
    assert _versions(ROOT) == versions
    assert versions["forge"] == code_version("clawloop.tasks.forge")


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


def _statuses(outcomes) -> dict[str, str]:
    return {o.stage: o.status for o in outcomes}


def _tables(root: Path, stage: str) -> dict[str, bytes]:
    folder = Path(fs.stage_url(str(root), "r", 1, stage))
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_grader_edit_with_only_the_library_on_skips_synthesize_and_reruns_forge_and_verify(
    tree, tmp_path, monkeypatch
):
    # The engine keys stages by the copied tree's code: the one-line grader edit happens there.
    monkeypatch.setattr(engine, "stage_code", functools.partial(stage_code, root=tree))
    stages = [s for s in STAGES if s.name in ("synthesize", "forge", "verify")]
    cfg = parse_config(
        {
            "storage": {"root": str(tmp_path)},
            "iterations": 1,
            "sandbox": {"backend": "bwrap"},
            "synthesize": {"n_train": 2, "n_eval": 1, "domain": {"share": 0}},
        }
    )
    first = runs.run_loop(cfg, "r", stages, thread_mapper(False))
    assert _statuses(first.outcomes) == dict.fromkeys(("synthesize", "forge", "verify"), "ran")
    grader = tree / "harness/taskfolder/grader.py"
    original = grader.read_text()
    grader.write_text(original + "\n# one more line\n")
    try:
        again = runs.run_loop(cfg, "r", stages, thread_mapper(False))
    finally:
        grader.write_text(original)
    assert _statuses(again.outcomes) == {"synthesize": "skipped", "forge": "ran", "verify": "ran"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_domain_setting_reruns_the_domain_step_only_and_writes_what_a_fresh_run_does(tmp_path):
    stages = [s for s in STAGES if s.name == "synthesize"]

    def cfg(root: Path, **synth: Any) -> Any:
        return parse_config(
            {
                "storage": {"root": str(root)},
                "iterations": 1,
                "sandbox": {"backend": "bwrap"},
                "synthesize": {"n_train": 2, "n_eval": 1, **synth},
            }
        )

    assert runs.run_loop(cfg(tmp_path / "a"), "r", stages, thread_mapper(False)).ok
    changed = cfg(tmp_path / "a", domain={"max_nodes": 5})
    assert _statuses(runs.run_loop(changed, "r", stages, thread_mapper(False)).outcomes) == {
        "synthesize": "ran"
    }
    steps = read_manifest(fs.stage_url(str(tmp_path / "a"), "r", 1, "synthesize")).summary
    assert steps["synthesis_steps"] == {
        "library": "cached",
        "llm": "off",
        "domain": "ran",
        "skills": "off",
        "external": "off",
    }
    fresh = cfg(tmp_path / "b", domain={"max_nodes": 5})
    assert runs.run_loop(fresh, "r", stages, thread_mapper(False)).ok
    assert _tables(tmp_path / "a", "synthesize") == _tables(tmp_path / "b", "synthesize")
    # a forced run runs every enabled step again
    forced = runs.rerun_stage(changed, "r", 1, "synthesize", stages, thread_mapper(False))
    assert forced.status == "ran"
    assert forced.manifest.summary["synthesis_steps"]["library"] == "ran"
