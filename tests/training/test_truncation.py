"""Truncation at max_seq_len is counted per phase (turns cut away or short, supervised tokens lost)
and a stage that loses more than train.max_truncated_share of them says so, with the length that
would keep them; a sequence that fits costs nothing and says nothing."""

from __future__ import annotations

import pandas as pd
from doubles.episodes import band_frame, episode_row

from clawloop.training.config import TrainConfig
from clawloop.training.sequences import encode_episode
from clawloop.training.stage import token_summary, train_stage, truncation_note


def _rows():
    return [episode_row("t1", i, float(i % 2), variant=i) for i in range(2)]


def test_cut_turns_and_lost_tokens_are_counted(tiny_tokenizer):
    row = _rows()[0]
    (whole,), rep = encode_episode(tiny_tokenizer, row, 100_000)
    assert rep.action_tokens_lost == 0 and rep.turns_cut_away == rep.turns_cut_partly == 0
    assert len(whole.spans) == 3 and rep.longest_sequence == len(whole.input_ids)
    second_start, second_end = whole.spans[1]
    cut = second_start + (second_end - second_start) // 2  # inside the second completion
    (short,), rep = encode_episode(tiny_tokenizer, row, cut)
    assert rep.turns_cut_away == 1 and rep.turns_cut_partly == 1 and rep.truncated == 1
    assert rep.action_tokens == sum(whole.action_mask[1:])
    assert rep.action_tokens_lost == sum(whole.action_mask[cut:])
    assert rep.action_tokens_lost == rep.action_tokens - sum(short.action_mask[1:])


def test_a_stage_losing_supervised_tokens_says_so(tiny_model_dir, tiny_tokenizer, tmp_path):
    (whole,), _ = encode_episode(tiny_tokenizer, _rows()[0], 100_000)
    max_len = whole.spans[1][0] + 1  # the first turn fits; later turns are cut
    traj, band = pd.DataFrame(_rows()), band_frame(["t1"], [True])
    cfg = TrainConfig(phases="grpo", max_seq_len=max_len, grpo_max_steps=1)
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained"
    c = result.counts
    assert c["grpo_turns_cut_away"] >= 2 and c["grpo_action_tokens_lost"] > 0
    assert token_summary(c)["turns_cut_away"] == c["grpo_turns_cut_away"]
    assert "grpo: " in result.reason and "of supervised tokens" in result.reason
    assert f"lost to train.max_seq_len={max_len}" in result.reason
    assert f"raise train.max_seq_len to {len(whole.input_ids)}" in result.reason
    # the same cut under a share the user accepts: counted, not in the status
    _, rep = encode_episode(tiny_tokenizer, _rows()[0], max_len)
    lenient = TrainConfig(max_seq_len=max_len, max_truncated_share=1.0)
    assert rep.turns_cut_away and truncation_note("grpo", rep, lenient) == ""
    assert truncation_note("grpo", rep, cfg) != ""
