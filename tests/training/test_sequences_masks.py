"""Action masks at the token level: exactly the sampled tokens, never system/user/tool tokens."""

from __future__ import annotations

import json
import math

from conftest import TOOLS, episode_row, tool_messages

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
    assert report.turns_recorded == 3 and report.prefix_breaks == 0 and len(samples) == 1
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


def test_rendered_multiturn_tool_trajectory_mask_is_exact(tiny_tokenizer):
    """Text only: each assistant turn re-rendered with the chat template; Qwen3's template drops
    the empty think block from history, so every turn is its own sequence (the exact context)."""
    tok = tiny_tokenizer
    msgs = tool_messages()
    samples, report = encode_episode(tok, episode_row("t1", 0, 1.0), max_len=10_000)
    assert report.turns_rendered == 3 and report.turns_skipped == 0
    assert len(samples) == 3 and report.prefix_breaks == 2
    assistant_idx = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    for s, idx in zip(samples, assistant_idx, strict=True):
        prompt = tok.apply_chat_template(
            msgs[:idx], tools=TOOLS, add_generation_prompt=True, tokenize=False
        )
        full = tok.apply_chat_template(msgs[: idx + 1], tools=TOOLS, tokenize=False)
        completion = full[len(prompt) :].rstrip("\n")
        assert completion.endswith("<|im_end|>")
        spans = _spans(s.action_mask)
        assert spans == [(len(_ids(tok, prompt)), len(s.input_ids))]
        a, b = spans[0]
        assert tok.decode(s.input_ids[:a]) == prompt
        assert tok.decode(s.input_ids[a:b]) == completion
        assert s.input_ids[b - 1] == tok.convert_tokens_to_ids("<|im_end|>")
    # the tool-call JSON is trained on, the tool output never is
    second = tok.decode(
        [t for t, m in zip(samples[1].input_ids, samples[1].action_mask, strict=True) if m]
    )
    assert '"arguments": {"command": "echo' in second and "hive,weight" not in second


def test_turn_count_mismatch_falls_back_to_rendering(tiny_tokenizer):
    row = episode_row(
        "t1",
        0,
        1.0,
        turns_json=json.dumps([{"prompt_token_ids": [1], "completion_token_ids": [2]}]),
    )
    samples, report = encode_episode(tiny_tokenizer, row, max_len=10_000)
    assert report.turns_recorded == 0 and report.turns_rendered == 3 and len(samples) == 3
    assert "re-rendered" in report.notes[0]


def test_truncation_keeps_left_part_and_drops_actionless():
    s = chain_turns([Turn([1, 2, 3, 4], [5, 6], None, "rendered")])[0][0]
    assert truncate(s, 3) is None
    s = chain_turns([Turn([1, 2], [5, 6, 7], None, "rendered")])[0][0]
    t = truncate(s, 4)
    assert t is not None and t.input_ids == [1, 2, 5, 6] and t.action_mask == [0, 0, 1, 1]
