"""Failure summaries: scripted policy replies over real HTTP (valid, malformed, dead endpoint)."""

from __future__ import annotations

import json
import socket

import pandas as pd
import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.diagnosis.summary import (
    FailureSummary,
    SummaryConfig,
    SummaryParseError,
    heuristic_summary,
    parse_summary,
    render_transcript,
    summarize_failure,
    summarize_failures,
    trajectory_features,
)
from clawloop.harness.llm import LLMEndpoint, endpoint_chat


class ScriptedChatServer(FakeOpenAI):
    """The project's fake server, answering with scripted text: reply i to a conversation that
    already holds i assistant messages (stateless, as FakeOpenAI's own modes)."""

    def __init__(self, replies: list[str], mode: str = "chatty") -> None:
        super().__init__(mode)  # type: ignore[arg-type]
        self.replies = replies

    def respond(self, body: dict) -> dict:
        step = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
        text = self.replies[min(step, len(self.replies) - 1)]
        resp = super().respond(body)
        resp["choices"][0]["message"] = {"role": "assistant", "content": text}
        resp["choices"][0]["finish_reason"] = "stop"
        return resp


def _traj(
    messages,
    *,
    reward=0.0,
    passed=False,
    end_reason="finished",
    eid="e1",
    tid="t1",
    cap="reconciliation",
):
    n_calls = sum(len(m.get("tool_calls") or []) for m in messages)
    return {
        "episode_id": eid,
        "task_id": tid,
        "capability": cap,
        "split": "eval",
        "messages_json": json.dumps(messages),
        "reward": reward,
        "passed": passed,
        "checks_json": "[]",
        "end_reason": end_reason,
        "n_tool_calls": n_calls,
    }


def _call(name, **args):
    return {
        "id": "c",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


TASK = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Reconcile hives into output/report.csv"},
]
NO_TOOLS = TASK + [{"role": "assistant", "content": "The answer is 42."}]
TOOL_ERRORS = TASK + [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [_call("run_shell", command="jq . data.json")],
    },
    {"role": "tool", "content": "exit_code: 127\nstderr: bash: jq: command not found"},
    {"role": "assistant", "content": "", "tool_calls": [_call("read_fil", path="x")]},
    {"role": "tool", "content": "error: unknown tool 'read_fil'"},
    {"role": "assistant", "content": "I give up."},
]
BAD_EDIT = TASK + [
    {"role": "assistant", "content": "", "tool_calls": [_call("read_file", path="hives.csv")]},
    {"role": "tool", "content": "hive,kg\nA,3\n"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [_call("write_file", path="output/report.csv", content="hive,kg\nA,4\n")],
    },
    {"role": "tool", "content": "wrote 12 bytes"},
    {"role": "assistant", "content": "", "tool_calls": [_call("finish")]},
]
VALID = {
    "failure_step": 1,
    "root_cause": "bad_edit",
    "missing_capability": "unit conversion",
    "evidence": "wrote 4 instead of 3",
}


def test_heuristic_rules_follow_trajectory_features():
    assert heuristic_summary(_traj(NO_TOOLS)).root_cause == "early_stop"
    wt = heuristic_summary(_traj(TOOL_ERRORS))
    assert wt.root_cause == "wrong_tool" and wt.failure_step == 0
    be = heuristic_summary(_traj(BAD_EDIT, reward=0.5))
    assert be.root_cause == "bad_edit" and be.failure_step == 1
    budget = TASK + [
        {"role": "assistant", "content": "", "tool_calls": [_call("list_dir", path=".")]},
        {"role": "tool", "content": "a.csv"},
    ]
    assert heuristic_summary(_traj(budget, end_reason="max_turns")).root_cause == "other"
    f = trajectory_features(_traj(TOOL_ERRORS))
    assert f.tool_error_steps == (0, 1) and f.n_tool_calls == 2 and f.write_steps == ()


def test_heuristic_reads_the_verifier_checks():
    wrong_path = {
        "checks": [
            {"name": "output/report.csv: readable", "passed": False, "detail": "does not exist"}
        ]
    }
    row = _traj(BAD_EDIT)
    row["checks_json"] = json.dumps(wrong_path)
    s = heuristic_summary(row)
    assert s.root_cause == "task_misunderstanding" and "missing or unreadable" in s.evidence
    # a write the regex cannot see (a python script via run_shell) still counts once the verifier read it
    script = TASK + [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [_call("run_shell", command="python3 fix.py")],
        },
        {"role": "tool", "content": "exit_code: 0"},
    ]
    row = _traj(script)
    row["checks_json"] = json.dumps(
        [{"name": "output/report.csv: readable", "passed": True, "detail": "3 rows"}]
    )
    assert (
        trajectory_features(row).outputs_found == 1
        and heuristic_summary(row).root_cause == "bad_edit"
    )


def test_parse_summary_accepts_fenced_json_and_rejects_bad_schema():
    s = parse_summary("<think>hmm</think>Here:\n```json\n" + json.dumps(VALID) + "\n```")
    assert s == FailureSummary(**VALID)
    with pytest.raises(SummaryParseError, match="root_cause"):
        parse_summary(json.dumps({**VALID, "root_cause": "bad_luck"}))
    with pytest.raises(SummaryParseError, match="no JSON"):
        parse_summary("I failed because of reasons")
    with pytest.raises(SummaryParseError, match="extra|failure_step"):
        parse_summary(json.dumps({**VALID, "failure_step": -1}))
    with pytest.raises(SummaryParseError, match="past the last assistant turn \\(2\\)"):
        parse_summary(json.dumps({**VALID, "failure_step": 7}), n_turns=3)
    assert parse_summary(json.dumps(VALID), n_turns=3).failure_step == 1


def test_transcript_numbers_assistant_turns_and_cuts_the_middle():
    text = render_transcript(_traj(BAD_EDIT), SummaryConfig())
    assert "[assistant turn 2]" in text and "write_file" in text
    long = TASK + [{"role": "tool", "content": "x" * 50}] * 400
    cut = render_transcript(_traj(long), SummaryConfig(max_transcript_chars=2000))
    assert len(cut) < 2100 and "middle of transcript cut" in cut and "Reconcile hives" in cut


def test_policy_summary_over_http_valid_first_try():
    with ScriptedChatServer([json.dumps(VALID)]) as srv:
        chat = endpoint_chat(LLMEndpoint(srv.base_url, "tiny-policy", max_retries=0))
        row = summarize_failure(
            _traj(BAD_EDIT), chat, SummaryConfig(), iteration=2, summarizer="tiny-policy"
        )
    assert row["fallback"] is False and row["root_cause"] == "bad_edit" and row["attempts"] == 1
    assert row["summarizer"] == "tiny-policy" and row["iteration"] == 2
    assert "Reconcile hives" in srv.requests[0]["messages"][1]["content"]


def test_malformed_replies_are_retried_with_the_error_fed_back():
    script = [
        "not json at all",
        json.dumps({**VALID, "root_cause": "cosmic_rays"}),
        json.dumps(VALID),
    ]
    with ScriptedChatServer(script) as srv:
        chat = endpoint_chat(LLMEndpoint(srv.base_url, "p", max_retries=0))
        row = summarize_failure(_traj(BAD_EDIT), chat, SummaryConfig(max_attempts=3), iteration=1)
    assert (
        row["fallback"] is False and row["attempts"] == 3 and row["evidence"] == VALID["evidence"]
    )
    second = srv.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "not json at all"}
    assert "no JSON object" in second[-1]["content"]
    assert "root_cause" in srv.requests[2]["messages"][-1]["content"]


def test_always_malformed_falls_back_to_heuristic_with_reason():
    with ScriptedChatServer(["nope"] * 5) as srv:
        chat = endpoint_chat(LLMEndpoint(srv.base_url, "p", max_retries=0))
        row = summarize_failure(_traj(NO_TOOLS), chat, SummaryConfig(max_attempts=2), iteration=1)
    assert len(srv.requests) == 2
    assert (
        row["fallback"] is True
        and row["root_cause"] == "early_stop"
        and row["summarizer"] == "heuristic"
    )
    assert "malformed after 2" in row["fallback_reason"]


def test_dead_endpoint_falls_back_without_crashing():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    chat = endpoint_chat(
        LLMEndpoint(f"http://127.0.0.1:{port}/v1", "p", max_retries=0, request_timeout_s=2)
    )
    row = summarize_failure(_traj(TOOL_ERRORS), chat, SummaryConfig(), iteration=1)
    assert row["fallback"] is True and row["root_cause"] == "wrong_tool" and row["attempts"] == 1
    assert "endpoint error (connection)" in row["fallback_reason"]


def test_dropped_connection_and_no_endpoint_fall_back():
    with ScriptedChatServer(["unused"], mode="drop") as srv:
        chat = endpoint_chat(LLMEndpoint(srv.base_url, "p", max_retries=0))
        row = summarize_failure(_traj(NO_TOOLS), chat, SummaryConfig(), iteration=1)
    assert row["fallback"] and "endpoint error" in row["fallback_reason"] and len(srv.requests) == 1
    row = summarize_failure(_traj(NO_TOOLS), None, SummaryConfig(), iteration=1)
    assert row["fallback"] and row["attempts"] == 0 and "no endpoint" in row["fallback_reason"]


def test_summarize_failures_skips_passed_episodes():
    df = pd.DataFrame([_traj(NO_TOOLS, eid="a"), _traj(BAD_EDIT, eid="b", passed=True, reward=1.0)])
    rows = summarize_failures(df, None, SummaryConfig(), iteration=3)
    assert [r["episode_id"] for r in rows] == ["a"]


def test_circuit_breaker_stops_calling_a_dead_endpoint():
    from clawloop.harness.llm import circuit_breaker

    with ScriptedChatServer(["unused"], mode="drop") as srv:
        chat = circuit_breaker(endpoint_chat(LLMEndpoint(srv.base_url, "p", max_retries=0)), 2)
        rows = [
            summarize_failure(_traj(NO_TOOLS, eid=str(i)), chat, SummaryConfig(), iteration=1)
            for i in range(5)
        ]
    assert len(srv.requests) == 2 and all(r["fallback"] for r in rows)
    assert "2 endpoint errors in a row" in rows[-1]["fallback_reason"]
