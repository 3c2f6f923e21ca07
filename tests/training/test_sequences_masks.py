"""Action masks at the token level: exactly the sampled tokens, never system/user/tool tokens."""

from __future__ import annotations

import json
import math

from doubles.episodes import TOOLS, episode_row, sampled_texts, tool_messages

from clawloop.training.sequences import Turn, chain_turns, encode_episode, truncate


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def _spans(mask):
    """[(start, end)] of the runs of 1s."""
    out, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        if not m and start is not None:
            out.append((start, i))
            start = None
    return out


def test_chain_turns_marks_completions_and_splits_on_prefix_break():
    turns = [
        Turn([1, 2, 3], [4, 5], [-0.1, -0.2], "recorded"),
        Turn([1, 2, 3, 4, 5, 6, 7], [8, 9], None, "recorded"),
        Turn([1, 2, 3, 4, 99, 6], [10], [-0.3], "recorded"),  # history rewritten: new sequence
    ]
    samples, breaks = chain_turns(turns)
    assert breaks == 1 and len(samples) == 2
    a, b = samples
    assert a.input_ids == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert a.action_mask == [0, 0, 0, 1, 1, 0, 0, 1, 1]
    assert a.old_logprobs[3:5] == [-0.1, -0.2]
    assert all(math.isnan(x) for x in a.old_logprobs[:3] + a.old_logprobs[5:])
    assert b.input_ids == [1, 2, 3, 4, 99, 6, 10] and b.action_mask == [0] * 6 + [1]


def test_recorded_multiturn_tool_trajectory_mask_is_exact(tiny_tokenizer):
    tok = tiny_tokenizer
    msgs = tool_messages()
    # What a vLLM-style server records: each prompt is the previous prompt + completion + the
    # observation text, so the prefix property holds and the episode is one sequence.
    completions = [
        'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "cat data/hives.csv"}}\n</tool_call><|im_end|>',
        '<tool_call>\n{"name": "bash", "arguments": {"command": "echo hi"}}\n</tool_call><|im_end|>',
        "Done: total is 42.<|im_end|>",
    ]
    observations = [
        "\n<|im_start|>user\n<tool_response>\nhive,weight\nA,10\nB,32\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
        "\n<|im_start|>user\n<tool_response>\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    ]
    prompt = _ids(
        tok,
        tok.apply_chat_template(msgs[:2], tools=TOOLS, add_generation_prompt=True, tokenize=False),
    )
    turns, expected_action = [], []
    for k, comp in enumerate(completions):
        c = _ids(tok, comp)
        turns.append(
            {
                "prompt_token_ids": list(prompt),
                "completion_token_ids": c,
                "logprobs": [-0.5 - k] * len(c),
                "needs_retokenize": False,
            }
        )
        expected_action.append((len(prompt), len(prompt) + len(c)))
        prompt = prompt + c + (_ids(tok, observations[k]) if k < len(observations) else [])
    row = episode_row("t1", 0, 1.0, turns_json=json.dumps(turns))
    samples, report = encode_episode(tok, row, max_len=10_000)
    assert report.turns_from_ids == 3 and report.prefix_breaks == 0 and len(samples) == 1
    assert report.eos_missing == 0 and report.logprobs_mismatched == 0
    s = samples[0]
    assert _spans(s.action_mask) == expected_action
    action_text = [tok.decode(s.input_ids[a:b]) for a, b in _spans(s.action_mask)]
    assert action_text == completions
    context = tok.decode([t for t, m in zip(s.input_ids, s.action_mask, strict=True) if not m])
    assert "You are a careful agent." in context and "<tool_response>\nhive,weight" in context
    assert all("tool_response" not in t and "careful" not in t for t in action_text)
    a0, b0 = expected_action[0]
    assert s.old_logprobs[a0:b0] == [-0.5] * (b0 - a0)
    assert all(math.isnan(x) for x in s.old_logprobs[:a0])


def test_text_multiturn_tool_trajectory_mask_is_exact(tiny_tokenizer):
    """Text only (no token ids): each prompt is the template's rendering of the history with the
    real tools, each completion the sampled text + <|im_end|>; the prompts extend each other
    here, so the episode is one sequence whose trained spans are exactly the sampled texts."""
    tok = tiny_tokenizer
    msgs = tool_messages()
    samples, report = encode_episode(tok, episode_row("t1", 0, 1.0), max_len=10_000)
    assert report.turns_from_text == 3 and report.turns_dropped == 0 and report.turns_from_ids == 0
    assert len(samples) == 1 and report.prefix_breaks == 0
    s = samples[0]
    spans = _spans(s.action_mask)
    assert [tok.decode(s.input_ids[a:b]) for a, b in spans] == [
        t + "<|im_end|>" for t in sampled_texts(msgs)
    ]
    assistant_idx = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    for (a, _), idx in zip(spans, assistant_idx, strict=True):
        prompt = tok.apply_chat_template(
            msgs[:idx], tools=TOOLS, add_generation_prompt=True, tokenize=False
        )
        assert tok.decode(s.input_ids[:a]) == prompt  # the context the server rendered
    # the tool-call JSON is trained on, the tool output never is
    trained = tok.decode([t for t, m in zip(s.input_ids, s.action_mask, strict=True) if m])
    assert '"arguments": {"command": "echo' in trained and "hive,weight" not in trained


def test_turn_count_mismatch_uses_only_what_the_messages_hold(tiny_tokenizer):
    """Records that do not line up with the messages are ignored: a message without tool calls
    is its own sampled text, one with tool calls has lost it (counted as dropped)."""
    row = episode_row(
        "t1",
        0,
        1.0,
        turns_json=json.dumps([{"prompt_token_ids": [1], "completion_token_ids": [2]}]),
    )
    samples, report = encode_episode(tiny_tokenizer, row, max_len=10_000)
    assert report.turns_from_ids == 0 and report.turns_from_text == 1
    assert report.turns_dropped == 2 and len(samples) == 1
    assert "records ignored" in report.notes[0]
    assert (
        tiny_tokenizer.decode(
            [t for t, m in zip(samples[0].input_ids, samples[0].action_mask, strict=True) if m]
        )
        == "Done: total is 42.<|im_end|>"
    )


def test_truncate_keeps_the_left_part_and_drops_actionless():
    s = chain_turns([Turn([1, 2, 3, 4], [5, 6], None, "rendered")])[0][0]
    assert truncate(s, 3) is None
    s = chain_turns([Turn([1, 2], [5, 6, 7], None, "rendered")])[0][0]
    t = truncate(s, 4)
    assert t is not None and t.input_ids == [1, 2, 5, 6] and t.action_mask == [0, 0, 1, 1]
