"""Issue 11, item 1: the trained tokens of a turn are the tokens the policy sampled, on every
serving path (recorded ids, else the exact sampled text after the template's prompt), never the
template's re-rendering of the reply; what cannot be trained that way is dropped and counted."""

from __future__ import annotations

import copy
import json

import pytest
from doubles.episodes import TOOLS, episode_row, text_turns, tool_messages
from doubles.fake_openai import FakeOpenAI, ToolStep

from clawloop.harness.agent import _assistant_message, _calls_of, _turn_record
from clawloop.harness.llm import reply_from_response
from clawloop.harness.prompts import initial_messages
from clawloop.harness.tools import TOOLS as AGENT_TOOLS
from clawloop.training.sequences import encode_episode

EOT = "<|im_end|>"


def _trained(tok, sample) -> list[str]:
    """The decoded runs of action tokens of one sequence."""
    out, cur = [], []
    for t, m in zip([*sample.input_ids, 0], [*sample.action_mask, 0], strict=True):
        if m:
            cur.append(t)
        elif cur:
            out.append(tok.decode(cur))
            cur = []
    return out


def _row(messages, turns, **extra):
    return episode_row(
        "t1", 0, 1.0, messages_json=json.dumps(messages), turns_json=json.dumps(turns), **extra
    )


def _one_turn(content: str, rec: dict | None = None, tool_calls=None):
    messages = tool_messages()[:2]
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return [*messages, msg], [
        {**text_turns([{"role": "assistant", "content": content}])[0], **(rec or {})}
    ]


def test_trained_span_is_the_sampled_text_not_the_templates_rendering(tiny_tokenizer):
    """The model wrote its call compactly, without the template's newlines; the old code trained
    the template's re-rendering (reformatted call, an empty <think> block injected into the last
    turn). Now every span decodes to exactly what was sampled, plus the end-of-turn token."""
    tok = tiny_tokenizer
    messages = tool_messages()
    raw = [
        'Let me look.<tool_call>{"name":"bash","arguments":{"command":"cat data/hives.csv"}}'
        "</tool_call>",
        '<tool_call> {"name": "bash", "arguments": {"command": "echo hi"}} </tool_call>',
        "Done: total is 42.",
    ]
    turns = text_turns(messages)
    for rec, text in zip(turns, raw, strict=True):
        rec["raw_content"] = text
    samples, report = encode_episode(tok, _row(messages, turns), max_len=10_000)
    spans = [span for s in samples for span in _trained(tok, s)]
    assert spans == [t + EOT for t in raw]
    assert all("<think>" not in s for s in spans)
    assert report.turns_from_text == 3 and report.turns_dropped == 0


def test_reasoning_content_is_trained_in_front_of_the_content(tiny_tokenizer):
    tok = tiny_tokenizer
    # a parser that strips both parts (transformers serve): the template's whitespace
    messages, turns = _one_turn("The total is 42.", {"reasoning_content": "Add 10 and 32."})
    (s,), report = encode_episode(tok, _row(messages, turns), max_len=10_000)
    assert _trained(tok, s) == ["<think>\nAdd 10 and 32.\n</think>\n\nThe total is 42." + EOT]
    # a parser that partitions at the tags (vLLM): the sample exactly as it was
    messages, turns = _one_turn("\n\nThe total is 42.", {"reasoning_content": "\nAdd them.\n"})
    (s,), _ = encode_episode(tok, _row(messages, turns), max_len=10_000)
    assert _trained(tok, s) == ["<think>\nAdd them.\n</think>\n\nThe total is 42." + EOT]


def test_native_tool_calls_without_ids_are_dropped_and_counted(tiny_tokenizer):
    """The server parsed the calls out of the sample and returned no ids: what was sampled is
    unknown, so the turn is not trained (the old code trained the template's rendering)."""
    messages = tool_messages()
    turns = text_turns(messages)
    for rec, msg in zip(turns, [m for m in messages if m["role"] == "assistant"], strict=True):
        rec.update(raw_content=msg["content"], tool_calls_native=bool(msg.get("tool_calls")))
    samples, report = encode_episode(tiny_tokenizer, _row(messages, turns), max_len=10_000)
    assert [span for s in samples for span in _trained(tiny_tokenizer, s)] == [
        "Done: total is 42." + EOT
    ]
    assert (report.turns_from_text, report.turns_dropped) == (1, 2)
    assert any("parsed the tool calls" in n for n in report.notes)


def test_a_reply_cut_at_max_tokens_has_no_end_of_turn_token(tiny_tokenizer):
    messages, turns = _one_turn("I will start by", {"finish_reason": "length"})
    (s,), report = encode_episode(tiny_tokenizer, _row(messages, turns), max_len=10_000)
    assert _trained(tiny_tokenizer, s) == ["I will start by"] and report.completions_cut == 1


def test_mismatched_logprobs_and_missing_end_ids_are_counted(tiny_tokenizer):
    tok = tiny_tokenizer
    prompt = tok(tok.apply_chat_template(tool_messages()[:2], tools=TOOLS, tokenize=False))[
        "input_ids"
    ]
    eot = tok.convert_tokens_to_ids(EOT)
    good = tok("Done.", add_special_tokens=False)["input_ids"] + [eot]
    recs = [
        {"prompt_token_ids": prompt, "completion_token_ids": good, "logprobs": [-0.1] * 9},
        {"prompt_token_ids": prompt, "completion_token_ids": good[:-1], "logprobs": [-0.1] * 9},
        {"prompt_token_ids": prompt, "completion_token_ids": good, "logprobs": None},
    ]
    for rec in recs:
        rec["finish_reason"] = "stop"
    messages = [*tool_messages()[:2]] + [
        m for _ in recs for m in ({"role": "assistant", "content": "Done."}, _user())
    ]
    samples, report = encode_episode(tok, _row(messages[:-1], recs), max_len=10_000)
    assert report.turns_from_ids == 3
    assert report.logprobs_mismatched == 2 and report.logprobs_missing == 1
    assert report.eos_missing == 1
    # the untrusted logprobs are unknown (NaN: GRPO freezes the start model's), not kept
    assert all(x != -0.1 for s in samples for x in s.old_logprobs)


def _user():
    return {"role": "user", "content": "go on"}


def test_a_template_that_ignores_tools_still_trains_the_tool_calls(tiny_model_dir):
    """SmolLM2's template drops `tools` and `tool_calls` (the old code's trained spans were just
    '<|im_end|>' for tool-call turns). The sampled text keeps every tool-call token; the prompt
    that hides the tool schemas is counted."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    tok.chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + (m['content'] or '') "
        "+ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\n' }}{% endif %}"
    )
    messages = tool_messages()
    samples, report = encode_episode(tok, episode_row("t1", 0, 1.0), max_len=10_000)
    spans = [span for s in samples for span in _trained(tok, s)]
    assert spans[0] == (
        'Let me look.\n<tool_call>\n{"name": "bash", "arguments": '
        + messages[2]["tool_calls"][0]["function"]["arguments"]
        + "}\n</tool_call>"
        + EOT
    )
    assert report.turns_from_text == 3 and report.prompts_without_tools == 3


def test_a_recorded_prompt_text_is_used_and_a_broken_template_drops_the_turn(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    tok.chat_template = "{{ raise_exception('no tool role here') }}"
    messages, turns = _one_turn("Done.")
    samples, report = encode_episode(tok, _row(messages, turns), max_len=10_000)
    assert samples == [] and report.turns_dropped == 1
    assert any("cannot render the history" in n for n in report.notes)
    turns[0]["prompt_text"] = "<|im_start|>user\nsum it<|im_end|>\n<|im_start|>assistant\n"
    (s,), report = encode_episode(tok, _row(messages, turns), max_len=10_000)
    assert report.prompts_from_record == 1 and _trained(tok, s) == ["Done.<|im_end|>"]
    assert tok.decode(s.input_ids).startswith("<|im_start|>user\nsum it")


# ------------------------------------------------------------------ the client and the agent
def test_reply_records_reasoning_and_the_turn_record_keeps_the_raw_text():
    data = {
        "choices": [
            {
                "message": {"content": "\n\nok", "reasoning_content": "\nthink\n"},
                "finish_reason": "stop",
            }
        ]
    }
    reply = reply_from_response(data)
    assert reply.reasoning_content == "\nthink\n"
    assert (
        reply_from_response(
            {"choices": [{"message": {"content": "x", "reasoning": "r"}}]}
        ).reasoning_content
        == "r"
    )
    calls, _, from_text = _calls_of(reply)
    msg, raw = _assistant_message(reply, calls, from_text)
    rec = _turn_record(reply, bool(from_text and calls), raw)
    # the old record kept raw_content only for text tool calls (here it was "")
    assert rec["raw_content"] == "\n\nok" and rec["reasoning_content"] == "\nthink\n"
    assert rec["tool_calls_native"] is False


def _episode(fake: FakeOpenAI) -> dict:
    """One episode through the agent's own reply handling, against the fake server's answers."""
    messages = initial_messages("List the files, then finish.")
    turns = []
    for _ in range(6):
        reply = reply_from_response(fake.respond({"messages": messages, "tools": AGENT_TOOLS}))
        calls, _, from_text = _calls_of(reply)
        msg, raw = _assistant_message(reply, calls, from_text)
        messages.append(msg)
        turns.append(_turn_record(reply, bool(from_text and calls), raw))
        for c in calls:
            messages.append({"role": "tool", "tool_call_id": c.id, "content": "ok"})
        if not calls or any(c.name == "finish" for c in calls):
            break
    return _row(copy.deepcopy(messages), turns, tools_json=json.dumps(AGENT_TOOLS))


SERVERS = {
    # name: (fake server, expected (from ids, from text, dropped) per 3-turn episode)
    "vllm": (dict(vllm_tokens=True), (3, 0, 0)),
    "text-tool-calls": (dict(text_tool_calls=True), (0, 3, 0)),
    "native-tool-calls-no-ids": (dict(), (0, 0, 3)),
}


@pytest.mark.parametrize("server", list(SERVERS))
def test_share_of_turns_per_serving_path(tiny_tokenizer, server):
    """Per serving path, which turns train from sampled ids, from sampled text, or are dropped."""
    opts, expected = SERVERS[server]
    script = [ToolStep("run_shell", {"command": "ls"}), ToolStep("run_shell", {"command": "pwd"})]
    fake = FakeOpenAI("script", script=script, **opts)
    _, report = encode_episode(tiny_tokenizer, _episode(fake), max_len=100_000)
    got = (report.turns_from_ids, report.turns_from_text, report.turns_dropped)
    print(f"{server}: from ids / from text / dropped = {got}")
    assert got == expected


def test_a_chatty_server_without_ids_trains_its_text(tiny_tokenizer):
    fake = FakeOpenAI("chatty")
    samples, report = encode_episode(tiny_tokenizer, _episode(fake), max_len=100_000)
    assert (report.turns_from_ids, report.turns_from_text, report.turns_dropped) == (0, 1, 0)
    assert _trained(tiny_tokenizer, samples[0]) == ["I think the task is done." + EOT]


def test_native_tool_calls_without_ids_train_from_the_template_where_it_round_trips(
    tiny_tokenizer,
):
    """The agent's real episode against a server with a tool parser and no token ids: with the
    agent's parser every turn round-trips through the tiny model's (Qwen3) template."""
    from clawloop.tasks.train import agent_tool_call_parser

    script = [ToolStep("run_shell", {"command": "ls"}), ToolStep("run_shell", {"command": "pwd"})]
    row = _episode(FakeOpenAI("script", script=script))
    parser = agent_tool_call_parser()
    samples, report = encode_episode(tiny_tokenizer, row, max_len=100_000, parser=parser)
    got = (report.turns_from_ids, report.turns_from_text, report.turns_from_template)
    print(f"native-tool-calls-no-ids + template: from ids / text / template = {got}")
    assert got == (0, 0, 3) and report.turns_dropped == 0 and samples
