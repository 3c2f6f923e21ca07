"""The synthesize stage: deterministic sampling, family-level eval split, formats, guidance."""

from __future__ import annotations

import sys
import types
from collections import Counter

import pytest

from clawloop.generators.meta import OUTPUT_FORMATS
from clawloop.synthesis.synthesize import (
    SynthesisError,
    SynthesizeConfig,
    read_generator_meta,
    split_groups,
    synthesize,
)

TEMPLATE = '''"""{title}."""
GENERATOR = {meta!r}

def build(seed):
    return {{}}

def solve(workspace):
    pass
'''
CAPS = ["reconciliation", "audit", "merge"]
DOMS = ["apiary", "trails", "radio", "ferns", "canals"]


@pytest.fixture
def fake_library(monkeypatch):
    """A stand-in for synthesis/library.py: every (capability, domain) pair, rendered from a template."""
    lib = types.ModuleType("clawloop.synthesis.library")
    lib.list_builtin = lambda: [(c, d) for c in CAPS for d in DOMS]

    def render(capability, domain, multihop=0, dirtiness=0, output_format="json"):
        meta = {
            "capability": capability,
            "domain": domain,
            "multihop": multihop,
            "dirtiness": dirtiness,
            "output_format": output_format,
        }
        return TEMPLATE.format(title=f"{capability} over {domain}", meta=meta)

    lib.render_generator = render
    monkeypatch.setitem(sys.modules, "clawloop.synthesis.library", lib)
    return lib


def test_deterministic_in_seed_and_iteration(fake_library):
    cfg = SynthesizeConfig(n_train=10, n_eval=4)
    a, _ = synthesize(cfg, 7, 1)
    assert a == synthesize(cfg, 7, 1)[0]
    assert {r["task_id"] for r in a}.isdisjoint({r["task_id"] for r in synthesize(cfg, 7, 2)[0]})
    assert a != synthesize(cfg, 8, 1)[0]


def test_eval_holds_out_whole_capability_domain_groups(fake_library):
    cfg = SynthesizeConfig(n_train=30, n_eval=12, eval_fraction=0.2)
    rows = synthesize(cfg, 3, 1)[0] + synthesize(cfg, 3, 2)[0]
    train = {(r["capability"], r["domain"]) for r in rows if r["split"] == "train"}
    evals = {(r["capability"], r["domain"]) for r in rows if r["split"] == "eval"}
    assert evals and train and train.isdisjoint(evals)
    assert sum(r["split"] == "eval" for r in rows) == 24
    assert len(split_groups([], 3, 0.2)) == 0


def test_output_formats_rotate_round_robin(fake_library):
    rows, _ = synthesize(SynthesizeConfig(n_train=8, n_eval=0), 0, 1)
    assert [r["output_format"] for r in rows] == list(OUTPUT_FORMATS) * 2


def test_guidance_steers_capabilities_and_difficulty_rises_one_level_per_iteration(fake_library):
    guidance = {
        "capability_weights": {"audit": 1.0, "merge": 0.0, "reconciliation": 0.0},
        "difficulty": {"audit": {"multihop": 3, "dirtiness": 2}},
    }
    cfg = SynthesizeConfig(n_train=12, n_eval=0)
    rows, summary = synthesize(cfg, 0, 2, guidance)
    assert Counter(r["capability"] for r in rows) == Counter({"audit": 12}) and summary["guided"]
    assert {(r["multihop"], r["dirtiness"]) for r in rows} == {(1, 1)}  # capped at start + 1
    unguided, _ = synthesize(cfg, 0, 2)
    assert len({r["capability"] for r in unguided}) > 1
    assert {(r["multihop"], r["dirtiness"]) for r in unguided} == {(0, 0)}


def test_user_generators_are_read_without_being_imported(tmp_path):
    folder = tmp_path / "gens"
    folder.mkdir()
    meta = {
        "capability": "tally",
        "domain": "orchids",
        "multihop": 1,
        "dirtiness": 0,
        "output_format": "csv",
    }
    (folder / "orchids.py").write_text(
        TEMPLATE.format(title="Tally orchids", meta=meta)
        + "\nraise SystemExit('never import me')\n"
    )
    (folder / "broken.py").write_text("GENERATOR = dict(capability='x')\n")
    meta2 = {**meta, "domain": "mosses"}
    (folder / "mosses.py").write_text(TEMPLATE.format(title="Tally mosses", meta=meta2))
    rows, summary = synthesize(
        SynthesizeConfig(
            builtin=False, generator_paths=[str(folder)], n_train=4, n_eval=2, eval_fraction=0.5
        ),
        0,
        1,
    )
    assert summary["skipped_user_files"] == 1
    assert {r["origin"] for r in rows} <= {
        f"user:{folder / 'orchids.py'}",
        f"user:{folder / 'mosses.py'}",
    }
    assert {r["output_format"] for r in rows} == {"csv"} and {r["split"] for r in rows} == {
        "train",
        "eval",
    }
    assert read_generator_meta((folder / "orchids.py").read_text(), "x").title == "Tally orchids."


def test_nothing_to_sample_is_a_clear_error():
    with pytest.raises(SynthesisError, match="turn synthesize.builtin on"):
        synthesize(SynthesizeConfig(builtin=False), 0, 1)


def test_difficulty_never_drops_below_the_configured_start(fake_library):
    # Guidance from a diagnose that started at level 0 must not pull a run configured at 2 back down.
    cfg = SynthesizeConfig(n_train=6, n_eval=0, multihop=2, dirtiness=1)
    low = {
        "capability_weights": {c: 1.0 for c in CAPS},
        "difficulty": {c: {"multihop": 0, "dirtiness": 0} for c in CAPS},
    }
    rows, _ = synthesize(cfg, 0, 2, low)
    assert {(r["multihop"], r["dirtiness"]) for r in rows} == {(2, 1)}
    high = {
        "capability_weights": {c: 1.0 for c in CAPS},
        "difficulty": {c: {"multihop": 3, "dirtiness": 3} for c in CAPS},
    }
    assert {(r["multihop"], r["dirtiness"]) for r in synthesize(cfg, 0, 2, high)[0]} == {(3, 2)}
    assert {(r["multihop"], r["dirtiness"]) for r in synthesize(cfg, 0, 9, high)[0]} == {(3, 3)}


def test_capabilities_the_guidance_does_not_know_keep_being_sampled(fake_library, tmp_path):
    meta = {
        "capability": "tally",
        "domain": "orchids",
        "multihop": 0,
        "dirtiness": 0,
        "output_format": "csv",
    }
    (tmp_path / "orchids.py").write_text(TEMPLATE.format(title="Tally orchids", meta=meta))
    cfg = SynthesizeConfig(generator_paths=[str(tmp_path)], n_train=40, n_eval=0, eval_fraction=0.0)
    # The guidance knows only the catalog's capabilities, as diagnose's default would.
    guidance = {"capability_weights": {"audit": 0.5, "merge": 0.25, "reconciliation": 0.25}}
    counts = Counter(r["capability"] for r in synthesize(cfg, 0, 2, guidance)[0])
    # tally gets the mean guided weight (1/3 of the total 4/3), so about a quarter of 40 draws.
    assert counts["tally"] >= 4 and set(counts) == {"tally", *CAPS}
