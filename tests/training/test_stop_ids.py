"""One list of stop ids for server and training: the local server stops at exactly the ids training
counts as a turn's end (generation_config's `<|endoftext|>` included), and the stop id the model
sampled is the one trained, on the ids path and on the text path (`stop_reason`)."""

from __future__ import annotations

import json

from doubles.episodes import episode_row, text_turns, tool_messages

from clawloop.harness.llm import reply_from_response
from clawloop.harness.local_server import LocalPolicy
from clawloop.training.sequences import encode_episode, end_of_turn_ids


def _ids(tok, name: str) -> int:
    return tok.convert_tokens_to_ids(name)


def test_server_and_training_share_the_stop_ids(tiny_model_dir, tiny_tokenizer):
    eot, ends = end_of_turn_ids(tiny_tokenizer)
    im_end, endoftext = _ids(tiny_tokenizer, "<|im_end|>"), _ids(tiny_tokenizer, "<|endoftext|>")
    assert eot == im_end and {im_end, endoftext} <= ends  # generation_config stops at both
    assert LocalPolicy(tiny_model_dir).stop_ids == ends


def test_a_reply_ended_by_endoftext_is_not_eos_missing(tiny_tokenizer):
    tok = tiny_tokenizer
    msgs = tool_messages()
    turns = text_turns(msgs)
    endoftext = _ids(tok, "<|endoftext|>")
    for k, t in enumerate(turns):  # the ids path: the server returned the sampled ids
        prompt = tok.apply_chat_template(
            msgs[: [i for i, m in enumerate(msgs) if m["role"] == "assistant"][k]],
            tools=None,
            add_generation_prompt=True,
            tokenize=False,
        )
        t["prompt_token_ids"] = tok(prompt, add_special_tokens=False)["input_ids"]
        t["completion_token_ids"] = tok(t["raw_content"], add_special_tokens=False)["input_ids"]
        t["completion_token_ids"].append(endoftext)
    row = episode_row("t1", 0, 1.0, turns_json=json.dumps(turns))
    _, rep = encode_episode(tok, row, 100_000)
    assert rep.turns_from_ids == 3 and rep.eos_missing == 0


def test_the_text_path_trains_the_sampled_stop_id(tiny_tokenizer):
    tok = tiny_tokenizer
    endoftext, im_end = _ids(tok, "<|endoftext|>"), _ids(tok, "<|im_end|>")
    msgs = tool_messages()
    row = episode_row("t1", 0, 1.0, turns_json=json.dumps(text_turns(msgs, stop_reason=endoftext)))
    samples, rep = encode_episode(tok, row, 100_000)
    ends = [s.input_ids[b - 1] for s in samples for _, b in s.spans]
    assert ends == [endoftext] * 3 and rep.eos_missing == 0
    # no stop_reason recorded (a server that does not say): the template's end, as before
    plain = episode_row("t1", 0, 1.0)
    samples, _ = encode_episode(tok, plain, 100_000)
    assert [s.input_ids[b - 1] for s in samples for _, b in s.spans] == [im_end] * 3


def test_stop_reason_is_read_from_the_reply():
    body = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop", "stop_reason": 7}]}
    assert reply_from_response(body).stop_reason == 7
    body["choices"][0]["stop_reason"] = None
    assert reply_from_response(body).stop_reason is None
