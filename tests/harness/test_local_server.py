"""The local profile's own server (harness/local_server.py): vLLM's token fields over real HTTP on
the tiny model, so local turns are trained from the sampled ids and GRPO's ratio is against the
sampling policy (issue 11 item 2)."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import openai
import pandas as pd
import pytest
import torch

from clawloop.harness.llm import LLMEndpoint, LLMError, chat, make_client
from clawloop.harness.local_server import LocalPolicy, make_server
from clawloop.harness.prompts import initial_messages
from clawloop.harness.serve import ServeError, local_policy_server
from clawloop.harness.tools import TOOLS
from clawloop.training.tiny_model import ensure_tiny_model

TASK = Path(__file__).parents[1] / "fixtures" / "tasks" / "hive_totals"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return ensure_tiny_model(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def policy(tiny_dir) -> LocalPolicy:
    return LocalPolicy(tiny_dir, seed=0)


@pytest.fixture(scope="module")
def server(policy):
    """The server in this process on a free port: real sockets and JSON, no start-up wait."""
    srv = make_server(policy, "127.0.0.1", 0, "tiny")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    host, port = srv.server_address[:2]
    yield f"http://{host}:{port}/v1"
    srv.shutdown()
    srv.server_close()


def _model_logprobs(model, prompt: list[int], completion: list[int], temperature: float = 1.0):
    """The model's own log-softmax at each completion id, in one full forward pass."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float() / temperature
    logp = torch.log_softmax(logits, -1)
    return [float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(completion)]


def test_token_fields_match_the_template_and_the_models_own_logprobs(server, policy):
    client = make_client(LLMEndpoint(server, "tiny"))
    messages = initial_messages("List the files.")
    reply = chat(client, "tiny", messages, tools=TOOLS, max_tokens=12)
    assert not reply.needs_retokenize
    # the prompt ids are the template's rendering with the real tools, tokenised as training does
    text = policy.tokenizer.apply_chat_template(
        messages, tools=TOOLS, add_generation_prompt=True, tokenize=False
    )
    assert reply.prompt_token_ids == policy.tokenizer(text, add_special_tokens=False)["input_ids"]
    n = len(reply.completion_token_ids)
    assert 1 <= n <= 12 and len(reply.logprobs) == n
    assert (reply.prompt_tokens, reply.completion_tokens) == (len(reply.prompt_token_ids), n)
    assert reply.finish_reason in ("stop", "length", "tool_calls")
    if reply.finish_reason == "length":
        assert n == 12
    own = _model_logprobs(policy.model, reply.prompt_token_ids, reply.completion_token_ids)
    assert max(abs(a - b) for a, b in zip(own, reply.logprobs, strict=True)) < 1e-4
    # at another temperature and top_p the logprobs are still the model's own (untempered ones,
    # what training computes: GRPO's first ratio is 1), not those of the tempered distribution
    hot = chat(client, "tiny", messages, tools=TOOLS, max_tokens=6, temperature=0.5)
    own = _model_logprobs(policy.model, hot.prompt_token_ids, hot.completion_token_ids)
    assert max(abs(a - b) for a, b in zip(own, hot.logprobs, strict=True)) < 1e-4
    tempered = _model_logprobs(policy.model, hot.prompt_token_ids, hot.completion_token_ids, 0.5)
    assert max(abs(a - b) for a, b in zip(tempered, hot.logprobs, strict=True)) > 1e-3
    body = {"model": "tiny", "messages": messages, "max_tokens": 6, "top_p": 0.5, "seed": 3,
            "logprobs": True, "return_token_ids": True}  # fmt: skip
    nucleus = client.post("/chat/completions", cast_to=object, body=body)
    choice = nucleus["choices"][0]
    own = _model_logprobs(policy.model, nucleus["prompt_token_ids"], choice["token_ids"])
    got = [e["logprob"] for e in choice["logprobs"]["content"]]
    assert max(abs(a - b) for a, b in zip(own, got, strict=True)) < 1e-4


def test_fields_only_when_asked_seed_and_greedy_are_reproducible(server):
    client = make_client(LLMEndpoint(server, "tiny"))
    messages = initial_messages("Count the lines.")
    plain = chat(client, "tiny", messages, max_tokens=5, want_token_ids=False)
    assert plain.needs_retokenize and plain.logprobs is None
    seeded = [
        client.post(
            "/chat/completions",
            cast_to=object,
            body={"model": "tiny", "messages": messages, "max_tokens": 8, "seed": 7,
                  "return_token_ids": True},
        )["choices"][0]["token_ids"]
        for _ in range(2)
    ]  # fmt: skip
    assert seeded[0] == seeded[1]
    greedy = [
        chat(client, "tiny", messages, max_tokens=8, temperature=0.0).completion_token_ids
        for _ in range(2)
    ]
    assert greedy[0] == greedy[1]


def test_seeds_are_stable_per_task_attempt_and_turn():
    from clawloop.harness.agent import episode_seed, turn_seed

    assert episode_seed(None, "t", 0) is None and turn_seed(None, 3) is None
    seeds = {episode_seed(s, t, a) for s in (0, 1) for t in ("t1", "t2") for a in range(4)}
    assert len(seeds) == 16 and all(0 <= x < 2**31 for x in seeds)
    assert episode_seed(0, "t1", 2) == episode_seed(0, "t1", 2)  # no process salt (not hash())
    ep = episode_seed(0, "t1", 0)
    assert len({turn_seed(ep, k) for k in range(8)}) == 8


@needs_bwrap
def test_the_same_rollout_seed_samples_the_same_episodes(tiny_dir, server):
    """rollout.seed through the real agent loop: each turn's request carries its seed, so two
    runs of the same episodes sample the same ids; the attempts of a task differ."""
    from clawloop.harness.rollout import PolicyConfig, RolloutConfig, rollout_task
    from clawloop.harness.sandbox.base import SandboxConfig

    row = {"task_id": "hive", "capability": "aggregation", "split": "train"}
    policy_cfg = PolicyConfig(server, "tiny", api_key_env="", tokenizer=str(tiny_dir))

    def run(seed):
        cfg = RolloutConfig(max_turns=2, max_tokens=12, context_len=8192, seed=seed)
        rows = rollout_task(TASK, row, policy_cfg, 3, SandboxConfig(backend="bwrap"), 2, cfg)
        return {
            (r["attempt"], k): t["completion_token_ids"]
            for r in rows
            for k, t in enumerate(json.loads(r["turns_json"]))
        }

    first, again = run(5), run(5)
    assert len(first) >= 3 and first == again
    assert len({tuple(ids) for (_, k), ids in first.items() if k == 0}) == 3
    assert run(6) != first


def test_a_stop_id_ends_the_reply_and_is_returned(server, policy):
    client = make_client(LLMEndpoint(server, "tiny"))
    messages = initial_messages("Count the lines.")
    first = chat(client, "tiny", messages, max_tokens=1, temperature=0.0)
    assert first.finish_reason == "length"
    saved = policy.stop_ids
    policy.stop_ids = {first.completion_token_ids[0]}  # the greedy first id now ends the turn
    try:
        stopped = chat(client, "tiny", messages, max_tokens=8, temperature=0.0)
    finally:
        policy.stop_ids = saved
    assert stopped.finish_reason == "stop"
    assert stopped.completion_token_ids == first.completion_token_ids  # the stop id is kept
    assert stopped.stop_reason == first.completion_token_ids[0]  # and named, as vLLM does
    assert first.stop_reason is None
    # the end-of-turn id training appends is among the server's stop ids
    from clawloop.training.sequences import end_of_turn_ids

    assert end_of_turn_ids(policy.tokenizer)[0] in policy.stop_ids


def test_models_route_refusals_and_context_overflow(server, tiny_dir):
    base = server.rstrip("/")
    client = make_client(LLMEndpoint(server, "tiny"))
    [entry] = client.get("/models", cast_to=object)["data"]
    assert entry["id"] == "tiny" and entry["root"] == str(tiny_dir)
    messages = initial_messages("x")
    with pytest.raises(LLMError) as full:
        chat(client, "tiny", messages, max_tokens=entry["max_model_len"])
    assert full.value.kind == "context_full"
    for extra in ({"stream": True}, {"n": 2}, {"messages": []}):
        with pytest.raises(openai.BadRequestError):
            client.post(
                "/chat/completions",
                cast_to=object,
                body={"model": "tiny", "messages": messages, "max_tokens": 2, **extra},
            )
    with pytest.raises(openai.NotFoundError):
        client.post(f"{base}/nowhere", cast_to=object, body={})


def test_tool_calls_and_reasoning_are_parsed_from_the_sampled_text(policy):
    call = '<tool_call>\n{"name": "run_shell", "arguments": {"command": "ls -la"}}\n</tool_call>'
    msg = policy.message("Let me look.\n" + call, parse_tools=True)
    [tc] = msg["tool_calls"]
    assert tc["function"] == {"name": "run_shell", "arguments": '{"command": "ls -la"}'}
    assert msg["content"] == "Let me look."
    assert policy.message(call, parse_tools=True)["content"] is None
    # a malformed block: the text stays the content, no call, so the agent shows the error
    broken = '<tool_call>{"name": "run_shell", "arguments": {"command": </tool_call>'
    assert policy.message(broken, parse_tools=True) == {"role": "assistant", "content": broken}
    # no tools offered: nothing parsed
    assert "tool_calls" not in policy.message(call, parse_tools=False)
    # the tiny model's template has think blocks: partitioned at the tags, whitespace kept
    assert policy.has_reasoning
    msg = policy.message("<think>\nAdd them.\n</think>\n\n" + call, parse_tools=True)
    assert msg["reasoning_content"] == "\nAdd them.\n" and msg["tool_calls"]
    # the agent's reply handling keeps both (reasoning_content, native calls)
    from clawloop.harness.llm import reply_from_response

    reply = reply_from_response({"choices": [{"message": msg, "finish_reason": "tool_calls"}]})
    assert reply.reasoning_content == "\nAdd them.\n" and reply.raw_tool_calls


def test_an_unknown_local_server_is_refused(tiny_dir):
    with (
        pytest.raises(ServeError, match="unknown local server"),
        local_policy_server(tiny_dir, server="nope"),
    ):
        pass


@needs_bwrap
def test_episodes_on_the_local_server_train_every_turn_from_ids_and_grpo_ratio_moves(
    tmp_path, tiny_dir, policy
):
    """The real server (a subprocess, as the local profile starts it), the real agent loop in
    bubblewrap sandboxes, the real train stage: every turn is trained from the server's ids, the
    recorded logprobs are the model's own, GRPO's first ratio is 1 and moves after an update."""
    from clawloop.harness.rollout import PolicyConfig, RolloutConfig, rollout_task
    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.training.config import TrainConfig
    from clawloop.training.stage import token_summary, train_stage

    cfg = RolloutConfig(n=3, max_turns=2, max_tokens=16, context_len=8192, episode_timeout_s=120)
    row = {"task_id": "hive", "capability": "aggregation", "split": "train"}
    with local_policy_server(tiny_dir) as url:
        policy_cfg = PolicyConfig(url, str(tiny_dir), api_key_env="", tokenizer=str(tiny_dir))
        rows = rollout_task(TASK, row, policy_cfg, 3, SandboxConfig(backend="bwrap"), 1, cfg)
    assert [r["end_reason"] for r in rows].count("server_error") == 0, rows[0]["error"]
    turns = [t for r in rows for t in json.loads(r["turns_json"])]
    assert len(turns) >= 3
    for t in turns:
        assert not t["needs_retokenize"]
        assert len(t["logprobs"]) == len(t["completion_token_ids"]) > 0
        own = _model_logprobs(policy.model, t["prompt_token_ids"], t["completion_token_ids"])
        assert max(abs(a - b) for a, b in zip(own, t["logprobs"], strict=True)) < 1e-4

    # The tiny model solves nothing: give the group a reward spread so GRPO trains on it.
    traj = pd.DataFrame(rows)
    traj["reward"] = [1.0, 0.0, 0.0]
    traj["passed"] = [True, False, False]
    band = pd.DataFrame(
        [{"task_id": "hive", "capability": "aggregation", "n": 3, "passes": 1, "kept": True,
          "reason": "in band"}]
    )  # fmt: skip
    tc = TrainConfig(
        phases="grpo+sft",
        sft_max_steps=1,
        sft_learning_rate=1e-2,
        grpo_max_steps=3,
        grpo_learning_rate=5e-2,
        per_device_batch_size=8,
    )
    result = train_stage(traj, band, tc, tiny_dir, tmp_path / "train")
    assert result.status == "trained", result.reason
    c = result.counts
    n = len(turns)
    print(
        f"local server: {n} turns, grpo from ids / from text / dropped = "
        f"{c['grpo_turns_from_ids']} / {c['grpo_turns_from_text']} / {c['grpo_turns_dropped']}"
    )
    assert (c["grpo_turns_from_ids"], c["grpo_turns_from_text"], c["grpo_turns_dropped"]) == (
        n, 0, 0
    )  # fmt: skip
    assert c["sft_turns_from_ids"] == len(json.loads(rows[0]["turns_json"]))
    assert c["grpo_logprobs_frozen"] == 0 and c["grpo_logprobs_recorded"] > 0
    assert c["grpo_logprobs_mismatched"] == 0 and c["grpo_logprobs_missing"] == 0
    assert token_summary(c)["turns_from_ids"] == n
    grpo = [r for r in result.metrics if r["phase"] == "grpo"]
    assert len(grpo) == 3
    assert all(r["offpolicy_frac"] == 1.0 for r in grpo)  # every ratio against recorded logprobs
    # GRPO runs first, from the sampler itself: its first step's ratio is 1, then it moves; SFT
    # trains GRPO's result after it.
    assert result.phases_run == ["grpo", "sft"], result.reason
    ratios = [r["ratio_mean"] for r in grpo]
    assert abs(ratios[0] - 1.0) < 1e-4, ratios
    assert abs(ratios[-1] - 1.0) > 1e-3, ratios
