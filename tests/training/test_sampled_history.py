"""One sequence per episode on the ids and the text path (issue 25 item 8): the agent keeps the
local server's `sampled` form of every reply on the history message, the server renders it as
exactly those tokens, so the next prompt extends the previous prompt + completion token for token,
even with a Qwen3-style template that strips earlier think blocks (the tiny model's: TRL's copy of
Qwen3's) and tool calls it re-serialises from their parsed form."""

from __future__ import annotations

import json
import threading

import pytest

from clawloop.harness.agent import run_episode
from clawloop.harness.llm import LLMEndpoint, make_client
from clawloop.harness.local_server import LocalPolicy, Sample, make_server
from clawloop.harness.rollout import RolloutConfig
from clawloop.harness.sandbox.base import ExecResult, Sandbox
from clawloop.harness.trajectory import trajectory_row
from clawloop.training.sequences import encode_episode

# What the scripted policy samples, turn by turn: reasoning, then a call; a reply without a call
# (the agent answers it with a user message, after which the template drops every earlier think
# block); a call after prose, which the template re-serialises with other whitespace.
REPLIES = [
    '<think>\nList the files first.\n</think>\n\n<tool_call>\n{"name": "run_shell", '
    '"arguments": {"command": "ls data"}}\n</tool_call>',
    "<think>\nThe listing shows one file.\n</think>\n\nI will read it next.",
    '<think>\nRead it now.\n</think>\n\nReading.\n\n<tool_call>\n{"name":"read_file",'
    '"arguments":{"path":"data/a.csv"}}\n</tool_call>',
    '<think>\nDone.\n</think>\n\n<tool_call>\n{"name": "finish", "arguments": '
    '{"summary": "ok"}}\n</tool_call>',
]


class Box(Sandbox):
    """A sandbox that answers every command with the same listing."""

    backend = "scripted"

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def exec(self, cmd, timeout=None, cwd="/workspace", env=None) -> ExecResult:
        return ExecResult(0, "a.csv\nhive,kg\n1,2\n", "", 0.01)

    def upload(self, local, remote) -> None: ...

    def download(self, remote, local) -> None:
        raise FileNotFoundError(remote)

    def kill_strays(self) -> bool:
        return True


def _scripted_ids(tok, text: str) -> list[int]:
    """The text as a policy may sample it: word by word, a tokenisation that is not the
    tokenizer's own (so re-tokenising the decoded text does not give these ids back)."""
    ids: list[int] = []
    for piece in text.replace(" ", " \x00").split("\x00"):
        ids += tok(piece, add_special_tokens=False)["input_ids"]
    return ids


class ScriptedPolicy(LocalPolicy):
    """The tiny model's server with the sampler replaced by the scripted replies."""

    def __init__(self, model_dir):
        super().__init__(model_dir)
        self.replies = iter(REPLIES)
        self.sampled: list[list[int]] = []
        self.prompts: list[list[int]] = []  # the context of each sample, as the server built it

    def sample(self, prompt_ids, max_tokens, temperature, top_p=1.0, seed=None) -> Sample:
        eot = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ids = _scripted_ids(self.tokenizer, next(self.replies)) + [eot]
        self.sampled.append(ids)
        self.prompts.append(list(prompt_ids))
        return Sample(list(prompt_ids), ids, [-0.5] * len(ids), "stop")


@pytest.fixture
def served(tiny_model_dir):
    policy = ScriptedPolicy(tiny_model_dir)
    srv = make_server(policy, "127.0.0.1", 0, "tiny")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    host, port = srv.server_address[:2]
    yield policy, f"http://{host}:{port}/v1"
    srv.shutdown()
    srv.server_close()


def _episode_row(policy, url: str, token_ids: str) -> dict:
    client = make_client(LLMEndpoint(url, "tiny", api_key_env="", token_ids=token_ids))
    ep = run_episode(
        Box(), "Total the hives.", client, "tiny", RolloutConfig(max_turns=6).agent_config()
    )
    assert ep.end_reason == "finished", ep.error
    assert len(ep.turns) == len(REPLIES)
    return trajectory_row(
        task_id="t",
        capability="c",
        split="train",
        attempt=0,
        policy_id="tiny",
        episode=ep,
        reward=1.0,
        passed=True,
        checks={},
    )


def _spans(sample) -> list[list[int]]:
    """The runs of action-masked ids, in order."""
    runs, cur = [], []
    for t, m in zip(sample.input_ids, sample.action_mask, strict=True):
        if m:
            cur.append(t)
        elif cur:
            runs, cur = [*runs, cur], []
    return runs + ([cur] if cur else [])


def test_ids_path_one_sequence_per_episode_masking_exactly_the_sampled_ids(served, tiny_tokenizer):
    policy, url = served
    row = _episode_row(policy, url, "on")
    turns = json.loads(row["turns_json"])
    assert [t["completion_token_ids"] for t in turns] == policy.sampled
    # the premise: this template drops earlier think blocks after the agent's user message
    msgs = json.loads(row["messages_json"])
    plain = tiny_tokenizer.apply_chat_template(
        [{k: v for k, v in m.items() if k != "sampled"} for m in msgs], tokenize=False
    )
    assert "List the files first." not in plain and "The listing shows one file." not in plain
    samples, report = encode_episode(tiny_tokenizer, row, 8192)
    assert report.turns_from_ids == len(REPLIES) and report.prefix_breaks == 0
    assert len(samples) == 1
    (s,) = samples
    # the sequence is the last prompt + the last completion: the context the policy really had
    assert s.input_ids == turns[-1]["prompt_token_ids"] + turns[-1]["completion_token_ids"]
    assert [s.input_ids[:a] for a, _ in s.spans] == policy.prompts
    assert _spans(s) == policy.sampled  # the mask covers the sampled ids, nothing else
    assert sum(s.action_mask) == sum(len(c) for c in policy.sampled)
    assert s.old_logprobs[s.spans[0][0]] == -0.5


def test_text_path_one_sequence_per_episode_masking_the_sampled_text(served, tiny_tokenizer):
    policy, url = served
    row = _episode_row(policy, url, "off")
    turns = json.loads(row["turns_json"])
    assert all(t["prompt_token_ids"] is None for t in turns)
    samples, report = encode_episode(tiny_tokenizer, row, 8192)
    assert report.turns_from_text == len(REPLIES) and report.prefix_breaks == 0
    assert len(samples) == 1
    eot = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    want = [tiny_tokenizer(t, add_special_tokens=False)["input_ids"] + [eot] for t in REPLIES]
    assert _spans(samples[0]) == want  # each turn's sampled text and the stop id it sampled
    # every turn is trained in the context the server sampled it in, rebuilt by training
    s = samples[0]
    assert [s.input_ids[:a] for a, _ in s.spans] == policy.prompts


def test_a_malformed_sampled_field_is_refused_with_the_fix(tiny_model_dir):
    from clawloop.harness.local_server import RequestError

    policy = LocalPolicy(tiny_model_dir)
    msgs = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "y", "sampled": {"token_ids": "oops"}},
        {"role": "user", "content": "z"},
    ]
    with pytest.raises(RequestError, match="send it back as this server returned it"):
        policy.prompt_ids(msgs, None)
    msgs[1]["sampled"] = {"token_ids": [10**9]}
    with pytest.raises(RequestError, match="outside the vocabulary"):
        policy.prompt_ids(msgs, None)
    # a template whose generation prompt is not its history's header (it opens <think>): the
    # history cannot be spliced, so the template renders it, as training's text path does
    msgs[1]["sampled"] = {"token_ids": [10, 11]}
    gen = "{{- '<|im_start|>assistant\\n' }}"
    assert gen in policy.tokenizer.chat_template
    policy.tokenizer.chat_template = policy.tokenizer.chat_template.replace(
        gen, "{{- '<|im_start|>assistant\\n<think>\\n' }}"
    )
    plain = policy.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert plain.endswith("<think>\n")
    want = policy.tokenizer(plain, add_special_tokens=False)["input_ids"]
    assert policy.prompt_ids(msgs, None) == want
