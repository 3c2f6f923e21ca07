"""The train stage on the tiny model, on CPU: outcomes, loss going down, every parameter moving."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pyarrow as pa
import pytest
import torch
from doubles.episodes import (
    TOOLS,
    band_frame,
    episode_row,
    sampled_texts,
    text_turns,
    tool_messages,
)
from safetensors.torch import load_file

from clawloop.storage.schemas import CHECKPOINT, TRAIN_METRICS
from clawloop.training.batching import SampleCollator, SampleDataset
from clawloop.training.config import TrainConfig
from clawloop.training.grpo import (
    GRPOGroupTrainer,
    group_advantages,
    grpo_loss,
    grpo_samples,
    next_token_logprobs,
)
from clawloop.training.stage import TrainError, token_summary, train_stage
from clawloop.training.trainer_base import PolicyRef, load_policy, training_arguments


def _weights(folder):
    return load_file(str(folder / "model.safetensors"))


def _frames(groups: dict[str, list[float]], kept: dict[str, bool]):
    rows = [
        episode_row(t, i, r, variant=i)
        for t, rewards in groups.items()
        for i, r in enumerate(rewards)
    ]
    return pd.DataFrame(rows), band_frame(list(kept), list(kept.values()))


def _check_artifacts(result):
    pa.Table.from_pandas(result.metrics_frame(), schema=TRAIN_METRICS, preserve_index=False)
    pa.Table.from_pylist([result.checkpoint_row()], schema=CHECKPOINT)


def test_sequences_lost_to_max_seq_len_are_named_with_the_fix(tiny_model_dir, tmp_path):
    traj, band = _frames({"t1": [1.0, 0.0]}, {"t1": True})
    # shorter than any completion: prompts are cut from the left first, then each completion is
    # cut short; the stage still trains on what fits and names the max_seq_len that keeps it all
    cfg = TrainConfig(max_seq_len=4)
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained", result.reason
    assert "lost to train.max_seq_len=4" in result.reason
    assert re.search(r"raise train\.max_seq_len to \d+", result.reason), result.reason
    c = result.counts
    assert c["grpo_prompts_cut_left"] > 0 and c["grpo_turns_cut_partly"] > 0
    assert c["grpo_action_tokens_lost"] > 0 and c["grpo_turns_dropped"] == 0


def test_nothing_to_train_is_an_outcome(tiny_model_dir, tmp_path):
    traj, band = _frames({"t1": [0.0, 0.0], "t2": [1.0, 1.0]}, {"t1": True, "t2": False})
    result = train_stage(traj, band, TrainConfig(), tiny_model_dir, tmp_path)
    assert result.status == "nothing_to_train" and result.kind == "base"
    assert result.checkpoint_dir == tiny_model_dir and result.metrics == []
    assert "sft: no trainable sequence" in result.reason and "1 not kept" in result.reason
    assert "1 with equal rewards" in result.reason
    _check_artifacts(result)
    empty = train_stage(traj.iloc[0:0], band.iloc[0:0], TrainConfig(), tiny_model_dir, tmp_path)
    assert empty.status == "nothing_to_train"


def test_sft_overfits_and_moves_every_parameter(tiny_model_dir, tmp_path):
    traj, band = _frames({"t1": [1.0, 0.0]}, {"t1": True})
    cfg = TrainConfig(
        phases="sft", sft_max_steps=10, sft_learning_rate=1e-2, per_device_batch_size=3
    )
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained", result.reason
    # text-only turns whose prompts extend each other: the episode is one sequence
    assert result.counts["sft_episodes"] == 1 and result.counts["sft_samples"] == 1
    assert result.counts["sft_turns_from_text"] == 3 and result.counts["sft_turns_dropped"] == 0
    losses = [r["loss"] for r in result.metrics]
    assert len(losses) == 10 and losses[-1] < 0.5 * losses[0]
    assert all(r["action_tokens"] > 0 and r["tokens"] > r["action_tokens"] for r in result.metrics)
    before, after = _weights(tiny_model_dir), _weights(result.checkpoint_dir)
    unchanged = [k for k in before if torch.equal(before[k], after[k])]
    assert unchanged == []
    assert (result.checkpoint_dir / "tokenizer.json").is_file()
    _check_artifacts(result)


def test_grpo_only_with_kl_moves_every_parameter(tiny_model_dir, tmp_path):
    traj, band = _frames({"t1": [1.0, 0.0, 0.5], "t2": [1.0, 1.0, 1.0]}, {"t1": True, "t2": True})
    cfg = TrainConfig(
        phases="grpo",
        grpo_max_steps=3,
        grpo_learning_rate=1e-2,
        kl_beta=0.1,
        per_device_batch_size=3,
    )
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained", result.reason
    assert result.counts["kept_groups"] == 1 and result.counts["dropped_zero_variance"] == 1
    assert [r["phase"] for r in result.metrics] == ["grpo"] * 3
    assert all(r["kept_groups"] == 1 for r in result.metrics)
    assert result.metrics[0]["kl"] == 0.0 and result.metrics[-1]["kl"] > 0.0  # drifted from ref
    before, after = _weights(tiny_model_dir), _weights(result.checkpoint_dir)
    assert [k for k in before if torch.equal(before[k], after[k])] == []
    _check_artifacts(result)


def test_without_recorded_logprobs_the_ratio_moves_after_the_first_step(tiny_model_dir, tmp_path):
    """The old policy's logprobs are frozen at the phase start, not re-taken from the current
    policy each step (where the ratio would stay 1 and clipping never engage)."""
    traj, band = _frames({"t1": [1.0, 0.0, 0.0]}, {"t1": True})
    cfg = TrainConfig(
        phases="grpo", grpo_max_steps=3, grpo_learning_rate=5e-2, per_device_batch_size=3
    )
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained", result.reason
    ratios = [r["ratio_mean"] for r in result.metrics]
    assert ratios[0] == pytest.approx(1.0, abs=1e-4)  # step 1: the policy is still the start
    assert any(abs(r - 1.0) > 1e-3 for r in ratios[1:]), ratios
    # no server-recorded logprob: every old logprob was computed, none recorded (was 1.0)
    assert all(r["offpolicy_frac"] == 0.0 for r in result.metrics)
    assert (
        result.counts["grpo_logprobs_recorded"] == 0 and result.counts["grpo_logprobs_frozen"] > 0
    )


def test_grpo_trainer_loss_equals_reference(tiny_model_dir, tiny_tokenizer, tmp_path):
    traj, band = _frames({"t1": [1.0, 0.0, 0.0]}, {"t1": True})
    cfg = TrainConfig(phases="grpo", per_device_batch_size=4)
    samples, report = grpo_samples(traj, band, tiny_tokenizer, cfg)
    # pretend the sampler recorded logprobs on part of the first sequence
    first = samples[0]
    idx = [i for i, m in enumerate(first.action_mask) if m][:5]
    for i in idx:
        first.old_logprobs[i] = -7.0
    batch = SampleCollator(tiny_tokenizer.pad_token_id, with_rl=True)(samples[:4])
    model = load_policy(PolicyRef(tiny_model_dir), cfg)
    trainer = GRPOGroupTrainer(
        model=model,
        args=training_arguments(cfg, "grpo", tmp_path),
        train_dataset=SampleDataset(samples),
        cfg=cfg,
        kept_groups=1,
    )
    ours = trainer.compute_loss(model, dict(batch))
    n = batch["labels"][:, 1:].ne(-100).sum()
    scaled = trainer.compute_loss(model, dict(batch), num_items_in_batch=n)
    logp = next_token_logprobs(model(input_ids=batch["input_ids"]).logits, batch["input_ids"])
    ref = grpo_loss(
        logp,
        batch["old_logprobs"][:, 1:],
        batch["advantages"],
        batch["action_mask"][:, 1:],
        cfg.clip_eps,
    )
    assert ours.item() == pytest.approx(ref.item(), rel=1e-5)
    assert scaled.item() == pytest.approx(ref.item(), rel=1e-5)
    assert not math.isnan(ours.item())


def test_grpo_leaves_out_every_infrastructure_failure(tiny_tokenizer):
    from clawloop.storage.schemas import INFRA_END_REASONS

    assert {"server_error", "sandbox_error", "harness_error"} == INFRA_END_REASONS
    traj, band = _frames({"t1": [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]}, {"t1": True})
    # Three zero-reward episodes failed in the infrastructure, not the policy.
    for i, reason in zip((1, 2, 3), sorted(INFRA_END_REASONS), strict=True):
        traj.loc[i, "end_reason"] = reason
    samples, report = grpo_samples(traj, band, tiny_tokenizer, TrainConfig(phases="grpo"))
    assert report.episodes == 3 and report.kept_groups == 1
    # Advantages over rewards [1, 0, 1]: the infra zeros would have shifted the mean to 1/3.
    by_sign = sorted({round(s.advantage, 4) for s in samples})
    assert len(by_sign) == 2 and by_sign[0] < 0 < by_sign[1] and by_sign[1] < -by_sign[0]


def test_all_failed_group_has_no_outcome_spread_but_a_fraction_one(tiny_tokenizer):
    # rewards 0.5 and 0.9, neither passed: equal outcomes (0, 0), different fractions
    traj, band = _frames({"t1": [0.5, 0.9]}, {"t1": True})
    assert not traj["passed"].any()
    _, report = grpo_samples(traj, band, tiny_tokenizer, TrainConfig(phases="grpo"))
    assert (report.kept_groups, report.dropped_zero_variance, report.episodes) == (0, 1, 0)
    assert report.reward == "outcome"
    cfg = TrainConfig(phases="grpo", reward="fraction")
    samples, report = grpo_samples(traj, band, tiny_tokenizer, cfg)
    assert (report.kept_groups, report.dropped_zero_variance, report.episodes) == (1, 0, 2)
    assert report.reward == "fraction" and {s.reward for s in samples} == {0.5, 0.9}


def test_outcome_advantages_come_from_pass_fail_not_the_fraction(tiny_tokenizer):
    # t1: a pass and a 0.9 fail; t2: a pass, a 0.9 fail and a 0.0 fail
    traj, band = _frames({"t1": [1.0, 0.9], "t2": [1.0, 0.9, 0.0]}, {"t1": True, "t2": True})

    def advantages(cfg):
        samples, report = grpo_samples(traj, band, tiny_tokenizer, cfg)
        assert report.kept_groups == 2
        out: dict[str, float] = {}
        for s in samples:
            assert out.setdefault(s.episode_id, s.advantage) == s.advantage
        return out, samples

    adv, samples = advantages(TrainConfig(phases="grpo"))
    assert adv["t1-0"] > 0 > adv["t1-1"] and adv["t2-0"] > 0 > adv["t2-1"]
    assert [adv["t1-0"], adv["t1-1"]] == pytest.approx(group_advantages([1.0, 0.0]), rel=1e-9)
    t2 = [adv[f"t2-{i}"] for i in range(3)]
    assert t2 == pytest.approx(group_advantages([1.0, 0.0, 0.0]), rel=1e-9)
    assert {s.reward for s in samples} == {1.0, 0.0}
    # the shaped reward ranks the 0.9 fail above its group's mean instead
    frac, _ = advantages(TrainConfig(phases="grpo", reward="fraction"))
    assert frac["t2-1"] > 0
    assert [frac["t1-0"], frac["t1-1"]] == pytest.approx(group_advantages([1.0, 0.9]), rel=1e-9)


@pytest.mark.slow
def test_lora_grpo_then_sft_trains_every_adapter_weight(tiny_model_dir, tmp_path):
    traj, band = _frames({"t1": [1.0, 0.0]}, {"t1": True})
    cfg = TrainConfig(
        lora=True,
        lora_r=4,
        sft_max_steps=2,
        grpo_max_steps=2,
        sft_learning_rate=1e-2,
        grpo_learning_rate=1e-2,
        per_device_batch_size=3,
    )
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained" and result.phases_run == ["grpo", "sft"]
    assert result.kind == "lora" and (result.adapter_dir / "adapter_model.safetensors").is_file()
    adapter = load_file(str(result.adapter_dir / "adapter_model.safetensors"))
    assert adapter and all("lora_" in k for k in adapter)
    assert all(v.abs().sum() > 0 for k, v in adapter.items() if "lora_B" in k)  # B starts at 0
    before, after = _weights(tiny_model_dir), _weights(result.checkpoint_dir)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # merged model differs


def _model_folders(root):
    return sorted(
        f"{d.parent.name}/{d.name}" for d in root.glob("*/*") if d.name in ("model", "adapter")
    )


def test_only_the_served_checkpoint_is_kept_as_full_weights(tiny_model_dir, tmp_path):
    """GRPO then SFT leaves one full-weight folder, the last phase's (what the next rollout
    serves): with LoRA the GRPO phase writes its adapter alone and SFT continues it (merged once,
    at the end); full fine-tuning drops GRPO's weights once SFT has written its own."""
    traj, band = _frames({"t1": [1.0, 0.0]}, {"t1": True})
    common = {
        "sft_max_steps": 1,
        "grpo_max_steps": 1,
        "grpo_learning_rate": 1e-2,
        "sft_learning_rate": 0.0,  # SFT keeps what GRPO left: its adapter is GRPO's, continued
        "per_device_batch_size": 3,
    }
    out = tmp_path / "lora"
    lora = train_stage(traj, band, TrainConfig(lora=True, lora_r=4, **common), tiny_model_dir, out)
    assert lora.status == "trained" and lora.phases_run == ["grpo", "sft"], lora.reason
    assert _model_folders(out) == ["grpo/adapter", "sft/adapter", "sft/model"]
    assert lora.checkpoint_dir == out / "sft" / "model"
    assert lora.adapter_dir == out / "sft" / "adapter"
    grpo = load_file(str(out / "grpo" / "adapter" / "adapter_model.safetensors"))
    sft = load_file(str(lora.adapter_dir / "adapter_model.safetensors"))
    assert any(v.abs().sum() > 0 for k, v in grpo.items() if "lora_B" in k)  # GRPO learned
    assert grpo.keys() == sft.keys() and all(torch.equal(grpo[k], sft[k]) for k in grpo)
    before, after = _weights(tiny_model_dir), _weights(lora.checkpoint_dir)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # GRPO's step is merged in
    # train.merged_dtype bfloat16: the same merge (in float32), rounded once when written
    out = tmp_path / "bf16"
    cfg = TrainConfig(lora=True, lora_r=4, merged_dtype="bfloat16", **common)
    half = train_stage(traj, band, cfg, tiny_model_dir, out)
    assert half.dtype == "bfloat16" and _model_folders(out) == _model_folders(tmp_path / "lora")
    config = json.loads((half.checkpoint_dir / "config.json").read_text())
    assert config["dtype"] == "bfloat16"  # what vLLM's --dtype auto reads
    rounded = _weights(half.checkpoint_dir)
    assert all(torch.equal(rounded[k], after[k].to(torch.bfloat16)) for k in after)
    out = tmp_path / "full"
    full = train_stage(traj, band, TrainConfig(**common), tiny_model_dir, out)
    assert full.phases_run == ["grpo", "sft"] and full.checkpoint_dir == out / "sft" / "model"
    assert _model_folders(out) == ["sft/model"]
    after = _weights(full.checkpoint_dir)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # SFT started from GRPO's


def test_lora_without_merge_continues_the_previous_adapter(tiny_model_dir, tmp_path):
    traj, band = _frames({"t1": [1.0, 0.0]}, {"t1": True})
    first_cfg = TrainConfig(
        phases="sft",
        lora=True,
        lora_r=4,
        merge_lora=False,
        sft_max_steps=2,
        sft_learning_rate=1e-2,
        per_device_batch_size=3,
    )
    first = train_stage(traj, band, first_cfg, tiny_model_dir, tmp_path / "iter-1")
    assert first.status == "trained" and first.kind == "lora", first.reason
    assert first.checkpoint_dir == tiny_model_dir  # not merged: the policy is base + adapter
    learned = load_file(str(first.adapter_dir / "adapter_model.safetensors"))
    assert any(v.abs().sum() > 0 for k, v in learned.items() if "lora_B" in k)
    # Learning rate 0: a continued adapter keeps exactly what iteration 1 learned; a fresh one
    # (the old behaviour) would start with every lora_B at zero.
    still = TrainConfig(**{**first_cfg.__dict__, "sft_learning_rate": 0.0})
    second = train_stage(
        traj, band, still, tiny_model_dir, tmp_path / "iter-2", init_adapter=first.adapter_dir
    )
    assert second.status == "trained" and second.adapter_dir != first.adapter_dir, second.reason
    kept = load_file(str(second.adapter_dir / "adapter_model.safetensors"))
    assert kept.keys() == learned.keys()
    assert all(torch.equal(kept[k], learned[k]) for k in learned)
    fresh = train_stage(traj, band, still, tiny_model_dir, tmp_path / "fresh")
    zeros = load_file(str(fresh.adapter_dir / "adapter_model.safetensors"))
    assert all(v.abs().sum() == 0 for k, v in zeros.items() if "lora_B" in k)


def test_init_adapter_needs_lora_and_an_adapter_folder(tiny_model_dir, tmp_path):
    traj, band = _frames({"t1": [1.0, 0.0]}, {"t1": True})
    with pytest.raises(ValueError, match="cfg.lora is false"):
        train_stage(traj, band, TrainConfig(), tiny_model_dir, tmp_path, init_adapter=tmp_path)
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        train_stage(
            traj, band, TrainConfig(lora=True), tiny_model_dir, tmp_path, init_adapter=tmp_path
        )


def test_a_crashed_phase_raises_train_error(tiny_model_dir, tmp_path, monkeypatch):
    """A crash is never a completed stage: TrainError names the phase, the error and the folder."""

    def crash(phase, *args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr("clawloop.training.stage.run_phase", crash)
    traj, band = _frames({"t1": [1.0, 0.0]}, {"t1": True})
    for phases, name in (("sft", "sft"), ("grpo", "grpo")):
        out = tmp_path / phases
        with pytest.raises(TrainError, match=f"{name} phase crashed") as info:
            train_stage(traj, band, TrainConfig(phases=phases), tiny_model_dir, out)
        message = str(info.value)
        assert "OutOfMemoryError: CUDA out of memory" in message and str(out) in message
        assert "resume" in message
        assert isinstance(info.value.__cause__, torch.cuda.OutOfMemoryError)


def test_train_cli_reports_a_crash_in_one_line_and_exits_1(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    from clawloop.flows.cli.train import main

    def crash(phase, *args, **kwargs):
        raise RuntimeError("loss is NaN\nat step 3")

    monkeypatch.setattr("clawloop.training.stage.run_phase", crash)
    traj, band = _frames({"t1": [1.0, 0.0]}, {"t1": True})
    traj.to_parquet(tmp_path / "trajectories.parquet")
    band.to_parquet(tmp_path / "band.parquet")
    out = tmp_path / "out"
    argv = ["train", "--trajectories", str(tmp_path / "trajectories.parquet")]
    argv += ["--band", str(tmp_path / "band.parquet"), "--base-model", str(tiny_model_dir)]
    argv += ["--out", str(out), "--phases", "sft"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in captured.err
    assert err.startswith("clawloop train: ") and "sft phase crashed" in err
    assert "RuntimeError: loss is NaN" in err and str(out) in err
    assert not (out / "checkpoint.parquet").exists()


def test_logprob_mismatches_are_counted_in_the_stage_summary(
    tiny_model_dir, tiny_tokenizer, tmp_path
):
    """A recorded logprob list that does not line up with its completion is not used (its tokens
    get the phase start model's logprobs) and is counted; the summary says how turns were built."""
    tok = tiny_tokenizer
    rows = []
    for attempt, (reward, n_extra) in enumerate([(1.0, -1), (0.0, 0)]):
        msgs = tool_messages(attempt)
        turns = text_turns(msgs)
        prompt = tok.apply_chat_template(
            msgs[:2], tools=TOOLS, add_generation_prompt=True, tokenize=False
        )
        completion = tok(sampled_texts(msgs)[0], add_special_tokens=False)["input_ids"]
        completion.append(tok.convert_tokens_to_ids("<|im_end|>"))
        turns[0].update(
            prompt_token_ids=tok(prompt, add_special_tokens=False)["input_ids"],
            completion_token_ids=completion,
            logprobs=[-0.3] * (len(completion) + n_extra),  # attempt 0: one short
            needs_retokenize=False,
        )
        rows.append(episode_row("t1", attempt, reward, attempt, turns_json=json.dumps(turns)))
    cfg = TrainConfig(phases="grpo", grpo_max_steps=1, per_device_batch_size=2)
    result = train_stage(
        pd.DataFrame(rows), band_frame(["t1"], [True]), cfg, tiny_model_dir, tmp_path
    )
    assert result.status == "trained", result.reason
    c = result.counts
    assert c["grpo_turns_from_ids"] == 2 and c["grpo_turns_from_text"] == 4
    assert c["grpo_logprobs_mismatched"] == 1 and c["grpo_eos_missing"] == 0
    assert c["grpo_logprobs_recorded"] == len(completion)  # only attempt 1's list was used
    assert token_summary(c) == {
        "turns_from_ids": 2,
        "turns_from_text": 4,
        "turns_from_template": 0,
        "turns_dropped": 0,
        "logprobs_missing": 0,
        "logprobs_mismatched": 1,
        "logprobs_constrained": 0,
        "forced_tokens": 0,
        "eos_missing": 0,
        "completions_cut": 0,
        "turns_cut_away": 0,
        "turns_cut_partly": 0,
        "action_tokens_lost": 0,
        "prompts_cut_left": 0,
    }
