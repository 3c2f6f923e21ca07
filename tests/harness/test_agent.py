"""The agent loop in a real bwrap sandbox against the scripted fake server over HTTP."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI, solution_steps

from clawloop.harness.agent import estimate_tokens, run_episode
from clawloop.harness.llm import LLMEndpoint, make_client
from clawloop.harness.rollout import RolloutConfig
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskenv import open_task, run_tests
from clawloop.harness.toolcalls import CALL_FORMAT
from clawloop.harness.tools import MAX_OUTPUT_CHARS, call_tool, resolve_path, truncate

TASK = Path(__file__).parents[1] / "fixtures" / "tasks" / "hive_totals"
INSTRUCTION = (TASK / "instruction.md").read_text()
BWRAP = SandboxConfig(backend="bwrap")
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def _client(fake: FakeOpenAI, timeout: float = 10, retries: int = 0):
    return make_client(
        LLMEndpoint(fake.base_url, "fake", request_timeout_s=timeout, max_retries=retries)
    )


DEFAULT_CFG = RolloutConfig(max_turns=20, episode_timeout_s=60).agent_config()


def _episode(fake, cfg=DEFAULT_CFG, **kw):
    with open_task(TASK, BWRAP) as sb:
        ep = run_episode(sb, INSTRUCTION, _client(fake, **kw), "fake", cfg)
        grade = run_tests(sb, TASK)
    return ep, grade


# -- pure parts --------------------------------------------------------------------------------
def test_truncate_marks_the_cut_and_keeps_both_ends():
    text = "A" * 10 + "x" * (MAX_OUTPUT_CHARS * 2) + "Z" * 10
    out = truncate(text)
    assert out.startswith("A" * 10) and out.endswith("Z" * 10)
    assert f"[... {len(text) - MAX_OUTPUT_CHARS} characters truncated ...]" in out
    assert truncate("short") == "short"


@pytest.mark.parametrize(
    "path,want",
    [
        ("out.csv", "/workspace/out.csv"),
        ("/workspace/a/../b", "/workspace/b"),
        ("/tmp/x", "/tmp/x"),
    ],
)
def test_resolve_path_keeps_workspace_semantics(path, want):
    assert resolve_path(path) == want


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "/workspace/../root", ""])
def test_resolve_path_refuses_escapes(path):
    from clawloop.harness.tools import ToolError

    with pytest.raises(ToolError):
        resolve_path(path)


# -- tools in a real sandbox -------------------------------------------------------------------
def test_tools_in_bwrap_sandbox():
    with open_task(TASK, BWRAP) as sb:
        assert "harvest.csv" in call_tool(sb, "list_dir", {}).output
        w = call_tool(sb, "write_file", {"path": "out/a.txt", "content": "one\ntwo\n"})
        assert not w.error, w.output
        e = call_tool(
            sb,
            "edit_file",
            json.dumps({"path": "out/a.txt", "old_string": "two", "new_string": "2"}),
        )
        assert not e.error, e.output
        assert call_tool(sb, "read_file", {"path": "/workspace/out/a.txt"}).output == "one\n2\n"
        dup = call_tool(
            sb, "edit_file", {"path": "harvest.csv", "old_string": "H1", "new_string": "Z"}
        )
        assert dup.error and "occurs 2 times" in dup.output
        big = call_tool(sb, "write_file", {"path": "big.txt", "content": "y" * 200_000})
        assert not big.error and "200000 bytes" in big.output
        shell = call_tool(sb, "run_shell", {"command": "wc -c < big.txt; exit 3"})
        assert shell.error and "exit_code: 3" in shell.output and "200000" in shell.output
        slow = call_tool(sb, "run_shell", {"command": "sleep 20", "timeout": 1})
        assert slow.error and "timed out" in slow.output
        long = call_tool(sb, "run_shell", {"command": "seq 1 50000"})
        assert "characters truncated" in long.output and long.output.rstrip().endswith("50000")
        assert call_tool(sb, "nope", {}).error
        assert call_tool(sb, "read_file", "{not json").output.startswith(
            "error: arguments are not valid JSON"
        )
        assert call_tool(sb, "finish", {"summary": "done"}).finished


# -- whole episodes ------------------------------------------------------------------------------
def test_oracle_episode_finishes_and_passes_the_real_verifier():
    with FakeOpenAI("oracle", TASK, vllm_tokens=True) as fake:
        ep, grade = _episode(fake)
    assert ep.end_reason == "finished", ep.error
    assert grade.passed and grade.reward == 1.0
    assert ep.messages[-1]["role"] == "tool" and ep.messages[-1]["content"].startswith("finished")
    t = ep.turns[0]
    assert not t["needs_retokenize"] and len(t["logprobs"]) == len(t["completion_token_ids"]) > 0
    assert ep.n_tool_calls == len(ep.turns)


def test_text_tool_calls_drive_the_episode_too():
    with FakeOpenAI("oracle", TASK, text_tool_calls=True) as fake:
        ep, grade = _episode(fake)
    assert ep.end_reason == "finished" and grade.passed
    assert all(t["tool_calls_from_text"] for t in ep.turns)
    assert all(t["needs_retokenize"] for t in ep.turns)  # this server returns no token ids
    assistant = [m for m in ep.messages if m["role"] == "assistant"]
    assert all(m["tool_calls"] and "<tool_call>" not in m["content"] for m in assistant)
    assert all(t["raw_content"].startswith("<tool_call>") for t in ep.turns)


def test_wrong_agent_fails_the_verifier():
    with FakeOpenAI("wrong", TASK) as fake:
        ep, grade = _episode(fake)
    assert ep.end_reason == "finished"
    assert not grade.passed and grade.reward == 0.0


def test_malformed_calls_become_observations_until_max_turns():
    with FakeOpenAI("malformed") as fake:
        ep, grade = _episode(fake, RolloutConfig(max_turns=4, episode_timeout_s=60).agent_config())
    assert ep.end_reason == "max_turns" and len(ep.turns) == 4
    errors = [m["content"] for m in ep.messages if m["role"] in ("tool", "user")][1:]
    assert len(errors) == 4 and all(e.startswith("error:") for e in errors)
    assert not grade.passed


def test_chatty_model_is_nudged_with_the_call_format_and_ends_at_max_turns():
    with FakeOpenAI("chatty") as fake:
        ep, _ = _episode(fake, RolloutConfig(max_turns=3, episode_timeout_s=60).agent_config())
    assert ep.end_reason == "max_turns"
    nudges = [m["content"] for m in ep.messages if "No tool call found" in (m.get("content") or "")]
    # the nudge shows the format: a model that wrote no call may not know the one expected
    assert len(nudges) == 3 and all(CALL_FORMAT in n for n in nudges)


def _fenced_oracle(messages):
    """Qwen2.5-Coder's way: every call as JSON in a markdown fence, in plain content."""
    steps = solution_steps(TASK)
    step = sum(1 for m in messages if m.get("role") == "assistant")
    name, args = (steps[step].name, steps[step].arguments) if step < len(steps) else ("finish", {})
    return (
        f"I will call {name}.\n```json\n" + json.dumps({"name": name, "arguments": args}) + "\n```"
    )


def test_fenced_json_calls_drive_the_episode_and_pass_the_real_verifier():
    with FakeOpenAI("routed", router=_fenced_oracle) as fake:
        ep, grade = _episode(fake)
    assert ep.end_reason == "finished" and grade.passed, ep.error
    assert all(t["tool_calls_from_text"] and t["tool_call_forms"] == ["fenced"] for t in ep.turns)
    assistant = [m for m in ep.messages if m["role"] == "assistant"]
    assert all(len(m["tool_calls"]) == 1 and "```" not in m["content"] for m in assistant)
    assert all(t["raw_content"].startswith("I will call") for t in ep.turns)  # the sample as is
    assert not any("No tool call found" in (m.get("content") or "") for m in ep.messages)


def test_python_quoted_content_writes_the_file_the_model_meant():
    reply = (
        "```json\n"
        '{"name": "write_file", "arguments": {"path": "output/answer.json", '
        '"content": \'{"word": "violet"}\'}}\n```'
    )

    def router(messages):
        done = any(m.get("role") == "tool" for m in messages)
        return '```json\n{"name": "finish", "arguments": {}}\n```' if done else reply

    with FakeOpenAI("routed", router=router) as fake, open_task(TASK, BWRAP) as sb:
        ep = run_episode(sb, INSTRUCTION, _client(fake), "fake", DEFAULT_CFG)
        written = sb.exec(["cat", "/workspace/output/answer.json"]).stdout
    assert ep.end_reason == "finished" and json.loads(written) == {"word": "violet"}
    assert ep.turns[0]["tool_calls_repaired"] == 1


def test_stalling_server_ends_with_timeout_and_keeps_the_conversation():
    with FakeOpenAI("stall", stall_s=30) as fake:
        ep, _ = _episode(
            fake, RolloutConfig(max_turns=5, episode_timeout_s=1.5).agent_config(), retries=2
        )
    assert ep.end_reason == "timeout"
    assert len(fake.requests) == 1  # no client retry past the episode's deadline
    assert [m["role"] for m in ep.messages] == ["system", "user"]


def test_stall_past_request_timeout_is_a_server_error():
    with FakeOpenAI("stall", stall_s=30) as fake:
        ep, _ = _episode(
            fake,
            RolloutConfig(max_turns=5, episode_timeout_s=60).agent_config(request_timeout_s=0.5),
        )
    assert ep.end_reason == "server_error" and "timeout" in ep.error


def test_dropping_server_ends_with_server_error_after_retries():
    with FakeOpenAI("drop") as fake:
        ep, _ = _episode(
            fake, RolloutConfig(episode_timeout_s=60).agent_config(request_timeout_s=5), retries=1
        )
    assert ep.end_reason == "server_error" and "connection" in ep.error
    assert len(fake.requests) == 2  # one try + one retry, then recorded as data


def test_token_budget_is_checked_before_every_call():
    with FakeOpenAI("oracle", TASK) as fake:
        need = estimate_tokens([{"role": "user", "content": INSTRUCTION}])
        ep, _ = _episode(fake, RolloutConfig(max_tokens=100, context_len=need).agent_config())
    assert ep.end_reason == "context_full" and not fake.requests and ep.turns == []
