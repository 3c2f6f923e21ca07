"""How train and diagnose are wired into the loop, with their core functions replaced by recorders:
a LoRA policy that is an unmerged adapter keeps training that adapter in the next iteration, and
diagnose starts its difficulty at synthesize's levels and weighs every synthesized capability."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from clawloop.flows import runs
from clawloop.storage import schemas
from clawloop.storage.artifacts import empty_row
from clawloop.tasks import diagnose, train
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageResult, StageSpec
from clawloop.training.stage import TrainResult


def _tables(name: str, tables: dict, upstream: tuple[str, ...] = ()) -> StageSpec:
    return StageSpec(name, lambda ctx: StageResult(tables), lambda c, k: {}, upstream=upstream)


def _cfg(tmp_path: Path, **sections) -> object:
    return parse_config({"iterations": 2, "storage": {"root": str(tmp_path / "runs")}, **sections})


@pytest.mark.parametrize("merge", [False, True])
def test_train_continues_an_unmerged_adapter_from_the_previous_iteration(
    tmp_path, monkeypatch, merge
):
    base = str(tmp_path / "base-model")
    seen: list[Path | None] = []

    def fake_train(traj, band, cfg, base_model, out_dir, init_adapter=None, **_):
        seen.append(init_adapter)
        adapter = Path(out_dir) / "sft" / "adapter"
        adapter.mkdir(parents=True)
        (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}))
        checkpoint = Path(base)
        if cfg.merge_lora:
            checkpoint = Path(out_dir) / "sft" / "model"
            checkpoint.mkdir()
            (checkpoint / "config.json").write_text("{}")
        return TrainResult("trained", "trained sft", checkpoint, adapter, base, "lora", ["sft"])

    monkeypatch.setattr("clawloop.tasks.train.train_stage", fake_train)
    cfg = _cfg(
        tmp_path,
        llm={"base_url": "http://127.0.0.1:9/v1"},  # an unmerged adapter needs a LoRA server
        train={"base_model": base, "lora": True, "merge_lora": merge},
    )
    rollout = _tables(
        "rollout", {"trajectories": (schemas.TRAJECTORIES, []), "band": (schemas.BAND, [])}
    )
    out = runs.run_loop(cfg, "r", [rollout, train.STAGE], thread_mapper(False))
    assert out.ok, [o.error for o in out.outcomes if o.error]
    first_adapter = tmp_path / "runs/r/iter-1/train/model/sft/adapter"
    # merged: the next adapter trains on top of the merged weights; unmerged: it continues.
    assert seen == [None, None if merge else first_adapter]
    summary = out.outcomes[-1].manifest.summary
    assert summary["continued_adapter"] == ("" if merge else str(first_adapter))


def test_diagnose_starts_at_synthesize_levels_and_weighs_synthesized_capabilities(
    tmp_path, monkeypatch
):
    calls: list[dict] = []

    def fake_diagnose(
        evals,
        history,
        cfg,
        llm,
        out_dir,
        iteration,
        *,
        prev_guidance=None,
        capabilities=None,
        map_rows=None,
        start_levels=(0, 0),
    ):
        calls.append({"cfg": cfg, "capabilities": capabilities, "start_levels": start_levels})
        return SimpleNamespace(tables=lambda: {"pass_rates": (schemas.PASS_RATES, [])}, summary={})

    monkeypatch.setattr("clawloop.tasks.diagnose.diagnose_stage", fake_diagnose)
    cfg = _cfg(
        tmp_path,
        llm={"base_url": "http://127.0.0.1:9/v1"},  # never called: nothing to roll out
        synthesize={"multihop": 2, "dirtiness": 1},
        diagnose={"embedder": "hashed"},
    )
    candidates = [
        empty_row(schemas.CANDIDATES, task_id=f"t{i}", capability=cap)
        for i, cap in enumerate(["tally", "audit", "tally"])
    ]
    stages = [
        _tables("synthesize", {"candidates": (schemas.CANDIDATES, candidates)}),
        _tables("forge", {"tasks": (schemas.FORGED, [])}),
        _tables("verify", {"verdicts": (schemas.VERDICTS, [])}),
        _tables(  # nothing trained: the policy stays the endpoint's base model
            "train",
            {"checkpoint": (schemas.CHECKPOINT, [empty_row(schemas.CHECKPOINT, kind="base")])},
        ),
        diagnose.STAGE,
    ]
    out = runs.run_loop(cfg, "r", stages, thread_mapper(False))
    assert out.ok, [o.error for o in out.outcomes if o.error]
    assert len(calls) == 2
    for call in calls:
        assert call["start_levels"] == (2, 1)
        assert call["cfg"].embedder == "hashed"
        assert call["capabilities"] == ["audit", "tally"]
