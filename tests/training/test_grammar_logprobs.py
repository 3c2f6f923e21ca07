"""Turns sampled under a grammar (rollout.tool_choice: required): vLLM applies the grammar's token
bitmask to the logits before its sampler, so the logprobs it records are log p - log Z (Z: the
mass of the allowed tokens; 0 on a token the grammar forced), not the model's. Taken as GRPO's
ratio reference they start the ratio at Z < 1 (and clip away negative advantages); GRPO takes the
rollout policy's own logprobs there instead, and leaves the forced tokens out of its loss. The
real vLLM measurement: tests/harness/test_vllm_real.py and benchmarks/sampler_mismatch.py."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from doubles.episodes import band_frame
from test_ratio_reference import _id_rows

from clawloop.training.config import TrainConfig
from clawloop.training.grpo import unforced
from clawloop.training.sequences import encode_episode
from clawloop.training.stage import train_stage

LOG_Z = -0.7  # every unforced token: the grammar allowed half the model's mass


def _grammared(rows: list[dict], flag: bool) -> list[dict]:
    """The same episodes as a grammar-constrained sampler records them: every third token forced
    (logprob 0), the rest renormalised by Z = exp(LOG_Z); `flag`: the record says so."""
    out = []
    for row in rows:
        turns = json.loads(row["turns_json"])
        for t in turns:
            t["logprobs"] = [0.0 if k % 3 == 0 else x - LOG_Z for k, x in enumerate(t["logprobs"])]
            t["logprobs_constrained"] = flag
        out.append({**row, "turns_json": json.dumps(turns)})
    return out


def test_constrained_turns_lose_their_logprobs_and_list_the_forced_tokens(
    tiny_model_dir, tiny_tokenizer
):
    row = _grammared(_id_rows(tiny_tokenizer, tiny_model_dir, True)[:1], True)[0]
    turns = json.loads(row["turns_json"])
    (sample,), report = encode_episode(tiny_tokenizer, row, 100_000)
    assert report.logprobs_constrained == len(turns) and report.turns_from_ids == len(turns)
    forced = sum(len(range(0, len(t["completion_token_ids"]), 3)) for t in turns)
    assert report.forced_tokens == forced == len(sample.forced)
    assert all(sample.action_mask[j] for j in sample.forced)
    assert all(math.isnan(x) for x in sample.old_logprobs)  # none taken as the model's
    actions = sample.n_action_tokens
    assert unforced(sample) and sample.n_action_tokens == actions - forced
    # the same record without the flag: the recorded numbers are kept, nothing is forced
    plain = {**row, "turns_json": json.dumps([{**t, "logprobs_constrained": False} for t in turns])}
    (kept,), report = encode_episode(tiny_tokenizer, plain, 100_000)
    assert report.logprobs_constrained == 0 and not kept.forced
    assert sum(math.isfinite(x) for x in kept.old_logprobs) == actions


def test_grpo_ratios_a_grammar_sample_against_the_rollout_policy(
    tiny_model_dir, tiny_tokenizer, tmp_path
):
    rows = _id_rows(tiny_tokenizer, tiny_model_dir, True)
    band = band_frame(["t1"], [True])
    base = {"phases": "grpo", "grpo_max_steps": 1, "per_device_batch_size": 8, "bf16": False}
    actions = sum(
        s.n_action_tokens for r in rows for s in encode_episode(tiny_tokenizer, r, 10**5)[0]
    )
    flagged = train_stage(
        pd.DataFrame(_grammared(rows, True)), band, TrainConfig(**base, tis_cap=2.0),
        tiny_model_dir, tmp_path / "a",
    )  # fmt: skip
    f = flagged.metrics[0]
    # the trainer's own logprobs of the rollout policy are the reference (ratio 1), the forced
    # tokens are out of the loss, and TIS weighs nothing (no recorded logprob is the model's)
    assert f["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert f["action_tokens"] == actions - flagged.counts["grpo_forced_tokens"] < actions
    assert flagged.counts["grpo_logprobs_recorded"] == 0
    # no figure rather than a 0.0 that reads like a measurement (the stage summary says why)
    assert f["tis_tokens"] == 0 and math.isnan(f["tis_mean"]) and math.isnan(f["logp_diff_mean"])
    # unflagged (how they were read before): the ratio starts below 1, at the grammar's kept mass
    blind = train_stage(
        pd.DataFrame(_grammared(rows, False)), band, TrainConfig(**base), tiny_model_dir,
        tmp_path / "b",
    )  # fmt: skip
    b = blind.metrics[0]
    assert b["ratio_mean"] < 0.9 and b["action_tokens"] == actions
