"""Turns whose sampled text is unknown (a server that parsed the tool calls out of the reply and
returned neither token ids nor the raw text) train on the chat template's rendering of the parsed
reply, only where that rendering round-trips through the agent's tool-call parser; counted as
`turns_from_template`; `train.turn_source: sampled` drops them, as a template that drops tool
calls (SmolLM2's) does."""

from __future__ import annotations

import copy
import json

import pandas as pd
import pytest
from doubles.episodes import band_frame, episode_row, text_turns, tool_messages

from clawloop.tasks.train import agent_tool_call_parser
from clawloop.training.config import TrainConfig
from clawloop.training.sequences import encode_episode
from clawloop.training.stage import token_summary, train_stage

PARSE = agent_tool_call_parser()


def native_row(task_id: str = "t1", attempt: int = 0, reward: float = 1.0, variant: int = 0):
    """An episode as the agent records it against a server with a tool parser and no token ids:
    the calls came back native, the record keeps only the prose."""
    msgs = tool_messages(variant)
    turns = text_turns(msgs)
    for t, m in zip(turns, [m for m in msgs if m["role"] == "assistant"], strict=True):
        t["tool_calls_native"] = bool(m.get("tool_calls"))
        t["raw_content"] = m.get("content") or ""
        t["finish_reason"] = "tool_calls" if m.get("tool_calls") else "stop"
    return episode_row(task_id, attempt, reward, variant, turns_json=json.dumps(turns))


def test_native_tool_call_turns_train_on_the_round_tripped_rendering(tiny_tokenizer):
    tok = tiny_tokenizer
    samples, rep = encode_episode(tok, native_row(), 100_000, parser=PARSE)
    assert (rep.turns_from_template, rep.turns_from_text, rep.turns_dropped) == (2, 1, 0)
    trained = [tok.decode(s.input_ids[a:b]) for s in samples for a, b in s.spans]
    assert trained[0].endswith(
        '<tool_call>\n{"name": "bash", "arguments": {"command": "cat data/hives.csv"}}\n'
        "</tool_call><|im_end|>"
    )
    assert "Let me look." in trained[0]
    # each reply is rendered as the next prompt holds it: the episode is one sequence
    assert len(samples) == 1 and rep.prefix_breaks == 0
    # without the parser (train.turn_source: sampled, or none given): dropped, as before
    _, rep = encode_episode(tok, native_row(), 100_000)
    assert (rep.turns_from_template, rep.turns_dropped) == (0, 2)


def test_a_template_that_drops_tool_calls_fails_the_round_trip(tiny_tokenizer):
    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = (  # ChatML that shows only the content, like SmolLM2's
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] or '' }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    _, rep = encode_episode(tok, native_row(), 100_000, parser=PARSE)
    assert (rep.turns_from_template, rep.turns_dropped) == (0, 2)
    assert any("the chat template drops the tool calls" in n for n in rep.notes), rep.notes


def test_the_stage_counts_and_reports_template_turns(tiny_model_dir, tmp_path):
    traj = pd.DataFrame([native_row("t1", i, float(i % 2), i) for i in range(2)])
    band = band_frame(["t1"], [True])
    cfg = TrainConfig(phases="grpo", grpo_max_steps=1)
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path / "ok", tool_call_parser=PARSE)
    assert result.status == "trained" and result.metrics
    assert token_summary(result.counts)["turns_from_template"] == 4
    assert "turns from the chat template: grpo 4 of 6 (67%)" in result.reason
    strict = TrainConfig(phases="grpo", grpo_max_steps=1, turn_source="sampled")
    result = train_stage(
        traj, band, strict, tiny_model_dir, tmp_path / "no", tool_call_parser=PARSE
    )
    assert result.counts["grpo_turns_from_template"] == 0
    assert result.counts["grpo_turns_dropped"] == 4


def test_turn_source_is_checked():
    from clawloop.tasks.config import ConfigError, parse_config

    assert parse_config({"train": {"turn_source": "sampled"}}).train.turn_source == "sampled"
    with pytest.raises(ConfigError):
        parse_config({"train": {"turn_source": "anything"}})
    with pytest.raises(ValueError):
        TrainConfig(turn_source="anything")  # type: ignore[arg-type]
