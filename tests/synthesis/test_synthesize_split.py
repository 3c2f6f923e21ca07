"""The synthesize split when only one (capability, domain) group exists: seeds are held out."""

from __future__ import annotations

from pathlib import Path

from clawloop.synthesis.config import SynthesizeConfig
from clawloop.synthesis.synthesize import Family, split_groups, synthesize

GOOD = Path(__file__).resolve().parents[1] / "fixtures" / "generators" / "good.py"
SEEDS_SPLIT = "seeds of the same generators held out: only 1 (capability, domain) group"
GROUPS_SPLIT = "whole (capability, domain) groups held out"
SUMMARY_KEYS = {
    "families",
    "eval_groups",
    "train",
    "eval",
    "guided",
    "skipped_user_files",
    "render_failures",
}


def _one_generator(tmp_path: Path) -> Path:
    path = tmp_path / "honey.py"
    path.write_text(GOOD.read_text())  # a valid generator: domain_calculation over apiculture
    return path


def _seeds(rows, split):
    return {r["seed"] for r in rows if r["split"] == split}


def test_one_user_generator_holds_out_seeds_of_it(tmp_path):
    gen = _one_generator(tmp_path)
    cfg = SynthesizeConfig(builtin=False, generator_paths=[str(gen)], n_train=4, n_eval=2)
    rows, summary = synthesize(cfg, 11, 1)
    assert (rows, summary) == synthesize(cfg, 11, 1)  # deterministic in (run seed, iteration)
    assert {r["origin"] for r in rows} == {f"user:{gen}"}
    train, evals = _seeds(rows, "train"), _seeds(rows, "eval")
    assert train and evals and train.isdisjoint(evals)
    assert len({r["task_id"] for r in rows}) == len(rows) == 6
    # eval_fraction (0.2) of the 6 candidates, rounded, at least one.
    assert (summary["train"], summary["eval"]) == (5, 1)
    assert summary["split"] == SEEDS_SPLIT and summary["eval_groups"] == 0
    assert set(summary) >= SUMMARY_KEYS
    # Another iteration or run seed draws other tasks, still with both splits.
    for other in (synthesize(cfg, 11, 2)[0], synthesize(cfg, 12, 1)[0]):
        assert {r["task_id"] for r in other}.isdisjoint({r["task_id"] for r in rows})
        assert {r["split"] for r in other} == {"train", "eval"}


def test_the_seed_share_follows_eval_fraction_and_keeps_a_train_row(tmp_path):
    gen = str(_one_generator(tmp_path))
    half = SynthesizeConfig(
        builtin=False, generator_paths=[gen], n_train=5, n_eval=3, eval_fraction=0.5
    )
    rows, summary = synthesize(half, 0, 3)
    assert (summary["train"], summary["eval"]) == (4, 4)
    assert _seeds(rows, "train").isdisjoint(_seeds(rows, "eval"))
    pair = SynthesizeConfig(
        builtin=False, generator_paths=[gen], n_train=1, n_eval=1, eval_fraction=0.01
    )
    rows, summary = synthesize(pair, 0, 1)
    assert sorted(r["split"] for r in rows) == ["eval", "train"]


def test_one_builtin_group_also_holds_out_seeds():
    cfg = SynthesizeConfig(
        capabilities=["reconciliation"], domains=["apiculture"], n_train=6, n_eval=2
    )
    rows, summary = synthesize(cfg, 5, 1)
    assert {(r["capability"], r["domain"]) for r in rows} == {("reconciliation", "apiculture")}
    assert summary["split"] == SEEDS_SPLIT and summary["train"] and summary["eval"]
    assert _seeds(rows, "train").isdisjoint(_seeds(rows, "eval"))


def test_no_hold_out_asked_for_keeps_one_group_all_train(tmp_path):
    gen = str(_one_generator(tmp_path))
    cfg = SynthesizeConfig(builtin=False, generator_paths=[gen], n_train=3, n_eval=0)
    rows, summary = synthesize(cfg, 0, 1)
    assert {r["split"] for r in rows} == {"train"} and len(rows) == 3
    assert summary["split"].startswith("nothing held out")


def test_several_groups_still_hold_out_whole_groups(tmp_path):
    source = GOOD.read_text()
    domains = ["apiculture", "orchards", "fisheries", "vineyards"]
    for dom in domains:
        (tmp_path / f"{dom}.py").write_text(
            source.replace('"domain": "apiculture"', f'"domain": "{dom}"')
        )
    cfg = SynthesizeConfig(
        builtin=False, generator_paths=[str(tmp_path)], n_train=8, n_eval=4, eval_fraction=0.5
    )
    rows, summary = synthesize(cfg, 9, 1)
    assert rows == synthesize(cfg, 9, 1)[0]
    families = [Family("domain_calculation", d, f"user:{d}") for d in domains]
    held_out = split_groups(families, 9, 0.5)
    assert len(held_out) == 2
    assert {(r["capability"], r["domain"]) for r in rows if r["split"] == "eval"} <= held_out
    assert {(r["capability"], r["domain"]) for r in rows if r["split"] == "train"}.isdisjoint(
        held_out
    )
    assert (summary["train"], summary["eval"], summary["eval_groups"]) == (8, 4, 2)
    assert summary["split"] == GROUPS_SPLIT
    assert set(summary) >= SUMMARY_KEYS


def _ids(rows, split):
    return [r["task_id"] for r in rows if r["split"] == split]


def _harder(rows):
    """Guidance that raises the difficulty of every capability in rows."""
    return {"difficulty": {r["capability"]: {"multihop": 3, "dirtiness": 3} for r in rows}}


def test_fixed_eval_grades_iteration_1s_eval_tasks_in_every_iteration():
    cfg = SynthesizeConfig(n_train=6, n_eval=3, fixed_eval=True)
    first, _ = synthesize(cfg, 3, 1)
    # guidance that would raise every capability's difficulty, and a later iteration's seeds
    later, summary = synthesize(cfg, 3, 3, _harder(first))
    assert _ids(later, "eval") == _ids(first, "eval") and len(_ids(first, "eval")) == 3
    assert [r["generator_code"] for r in later if r["split"] == "eval"] == [
        r["generator_code"] for r in first if r["split"] == "eval"
    ]
    assert set(_ids(later, "train")).isdisjoint(_ids(first, "train") + _ids(first, "eval"))
    assert "iteration 1's (synthesize.fixed_eval)" in summary["split"]
    # off (the default), a later iteration draws fresh eval seeds
    moving = SynthesizeConfig(n_train=6, n_eval=3)
    assert set(_ids(synthesize(moving, 3, 3, _harder(first))[0], "eval")).isdisjoint(
        _ids(first, "eval")
    )
    # iteration 1 itself is the same with or without it
    assert synthesize(moving, 3, 1)[0] == first


def test_fixed_eval_with_one_group_never_trains_on_an_eval_seed(tmp_path):
    gen = str(_one_generator(tmp_path))
    cfg = SynthesizeConfig(
        builtin=False, generator_paths=[gen], n_train=4, n_eval=2, fixed_eval=True
    )
    first, _ = synthesize(cfg, 0, 1)
    for k in (2, 3):
        rows, _ = synthesize(cfg, 0, k)
        assert _seeds(rows, "eval") == _seeds(first, "eval")
        assert _seeds(rows, "train").isdisjoint(_seeds(rows, "eval")) and _seeds(rows, "train")


def test_with_fixed_eval_drops_a_train_row_that_is_an_eval_task():
    from clawloop.synthesis.synthesize import with_fixed_eval

    first = [
        {"task_id": "e1", "origin": "builtin", "seed": 1, "split": "eval"},
        {"task_id": "t0", "origin": "builtin", "seed": 0, "split": "train"},
    ]
    rows = [
        {"task_id": "e1", "origin": "builtin", "seed": 1, "split": "train"},  # the same task
        {"task_id": "x", "origin": "builtin", "seed": 1, "split": "train"},  # same generator seed
        {"task_id": "t2", "origin": "builtin", "seed": 2, "split": "train"},
        {"task_id": "e9", "origin": "builtin", "seed": 9, "split": "eval"},  # this draw's eval
    ]
    assert [r["task_id"] for r in with_fixed_eval(rows, first)] == ["t2", "e1"]
