"""Fitting max_seq_len keeps the trained tokens: a chained episode too long for it is split where
a turn would not fit (each turn's prompt holds its history), a turn's prompt is cut from the left
(its oldest context), and only a completion longer than max_seq_len by itself is cut, counted
and said in the stage's status with the length that would keep it."""

from __future__ import annotations

import pandas as pd
from doubles.episodes import band_frame, episode_row

from clawloop.training.config import TrainConfig
from clawloop.training.sequences import EncodeReport, Turn, encode_episode, fit_turn
from clawloop.training.stage import token_summary, train_stage, truncation_note


def _rows():
    return [episode_row("t1", i, float(i % 2), variant=i) for i in range(2)]


def _trained(samples) -> list[list[int]]:
    """Each sample's trained spans as token lists."""
    out = []
    for s in samples:
        run: list[int] = []
        for t, m in zip(s.input_ids, s.action_mask, strict=True):
            if m:
                run.append(t)
            elif run:
                out.append(run)
                run = []
        if run:
            out.append(run)
    return out


def test_a_long_episode_is_split_not_cut(tiny_tokenizer):
    row = _rows()[0]
    (whole,), rep = encode_episode(tiny_tokenizer, row, 100_000)
    assert rep.action_tokens_lost == 0 and rep.turns_cut_away == rep.turns_cut_partly == 0
    assert len(whole.spans) == 3 and rep.longest_sequence == len(whole.input_ids)
    second_start, second_end = whole.spans[1]
    max_len = second_end  # the second turn fits alone; the whole chain does not
    samples, rep = encode_episode(tiny_tokenizer, row, max_len)
    assert len(samples) >= 2 and all(len(s.input_ids) <= max_len for s in samples)
    # every completion trained, whole: the same trained spans as the uncut sequence
    assert _trained(samples) == _trained([whole])
    assert rep.action_tokens == sum(whole.action_mask[1:]) and rep.action_tokens_lost == 0
    assert rep.turns_cut_away == rep.turns_cut_partly == 0 and rep.truncated == 1
    # the last completion sits at the end of its sequence, after the latest context
    last = samples[-1]
    a, b = whole.spans[2]
    assert last.input_ids[-(b - a) :] == whole.input_ids[a:b]
    assert last.input_ids == whole.input_ids[b - len(last.input_ids) : b]


def test_a_prompt_is_cut_from_the_left():
    rep = EncodeReport()
    turn = Turn(list(range(10)), [100, 101, 102], [-0.1, -0.2, -0.3], "ids")
    fitted = fit_turn(turn, 8, rep)
    assert fitted.prompt_ids == [5, 6, 7, 8, 9] and fitted.completion_ids == [100, 101, 102]
    assert fitted.logprobs == [-0.1, -0.2, -0.3]
    assert rep.prompts_cut_left == 1 and rep.action_tokens_lost == 0
    # a completion longer than the limit keeps one token of context, and the cut is counted
    fitted = fit_turn(turn, 2, rep)
    assert fitted.prompt_ids == [9] and fitted.completion_ids == [100]
    assert fitted.logprobs == [-0.1]
    assert rep.turns_cut_partly == 1 and rep.action_tokens_lost == 2


def test_a_stage_losing_supervised_tokens_says_so(tiny_model_dir, tiny_tokenizer, tmp_path):
    (whole,), _ = encode_episode(tiny_tokenizer, _rows()[0], 100_000)
    longest = max(b - a for a, b in whole.spans)
    max_len = longest - 2  # the longest completion cannot fit: cut, counted, said
    traj, band = pd.DataFrame(_rows()), band_frame(["t1"], [True])
    cfg = TrainConfig(
        phases="grpo", max_seq_len=max_len, grpo_max_steps=1, max_truncated_share=0.01
    )
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained"
    c = result.counts
    assert c["grpo_turns_cut_partly"] >= 1 and c["grpo_action_tokens_lost"] > 0
    assert c["grpo_prompts_cut_left"] >= 1
    assert token_summary(c)["turns_cut_partly"] == c["grpo_turns_cut_partly"]
    assert "grpo: " in result.reason and "of supervised tokens" in result.reason
    assert f"lost to train.max_seq_len={max_len}" in result.reason
    # the same cut under a share the user accepts: counted, not in the status
    _, rep = encode_episode(tiny_tokenizer, _rows()[0], max_len)
    lenient = TrainConfig(max_seq_len=max_len, max_truncated_share=1.0)
    assert rep.turns_cut_partly and truncation_note("grpo", rep, lenient) == ""
    assert truncation_note("grpo", rep, cfg) != ""
