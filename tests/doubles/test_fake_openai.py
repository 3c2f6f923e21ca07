"""The scripted fake OpenAI server: real HTTP, stateless scripts per conversation, each mode."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import openai
import pytest

from doubles.fake_openai import SOLUTION_COPY, FakeOpenAI, solution_steps, wrong_steps

TASK = Path(__file__).parents[1] / "fixtures" / "tasks" / "hive_totals"


def _client(fake: FakeOpenAI, timeout: float = 5) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url, api_key="x", timeout=timeout, max_retries=0)


def test_models_endpoint_lists_the_model():
    with FakeOpenAI("chatty", model="pol-1") as fake:
        data = json.load(urllib.request.urlopen(fake.base_url + "/models", timeout=5))
    assert [m["id"] for m in data["data"]] == ["pol-1"]


def test_solution_steps_copy_every_solution_file_and_rewrite_paths():
    steps = solution_steps(TASK)
    written = {s.arguments["path"] for s in steps if s.name == "write_file"}
    assert written == {f"{SOLUTION_COPY}/solve.sh", f"{SOLUTION_COPY}/solve.py"}
    solve = next(s for s in steps if s.arguments.get("path") == f"{SOLUTION_COPY}/solve.sh")
    assert "/tmp/solution/solve.py" in solve.arguments["content"]
    assert steps[-1].name == "run_shell"
    assert wrong_steps(TASK)[-1].arguments["command"].startswith("find /workspace")


def test_oracle_script_advances_with_the_conversation_then_finishes():
    steps = solution_steps(TASK)
    with FakeOpenAI("oracle", TASK) as fake:
        client = _client(fake)
        messages = [{"role": "user", "content": "go"}]
        names = []
        for _ in range(len(steps) + 1):
            msg = client.chat.completions.create(model="m", messages=messages).choices[0].message
            call = msg.tool_calls[0]
            names.append(call.function.name)
            json.loads(call.function.arguments)
            messages.append({"role": "assistant", "content": "", "tool_calls": [call.model_dump()]})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "ok"})
    assert names == [s.name for s in steps] + ["finish"]


def test_text_tool_calls_are_hermes_blocks():
    with FakeOpenAI("oracle", TASK, text_tool_calls=True) as fake:
        msg = _client(fake).chat.completions.create(model="m", messages=[]).choices[0].message
    assert not msg.tool_calls
    assert msg.content.startswith("<tool_call>") and msg.content.rstrip().endswith("</tool_call>")


def test_malformed_mode_alternates_bad_text_and_bad_native_arguments():
    with FakeOpenAI("malformed") as fake:
        first = _client(fake).chat.completions.create(model="m", messages=[]).choices[0].message
        second = (
            _client(fake)
            .chat.completions.create(model="m", messages=[{"role": "assistant", "content": "x"}])
            .choices[0]
            .message
        )
    assert "<tool_call>" in first.content and not first.tool_calls
    with pytest.raises(json.JSONDecodeError):
        json.loads(second.tool_calls[0].function.arguments)


def test_drop_closes_the_connection():
    with FakeOpenAI("drop") as fake, pytest.raises(openai.APIConnectionError):
        _client(fake).chat.completions.create(model="m", messages=[])
    assert len(fake.requests) == 1


def test_stall_outlasts_the_client_timeout():
    with FakeOpenAI("stall", stall_s=10) as fake, pytest.raises(openai.APITimeoutError):
        _client(fake, timeout=0.3).chat.completions.create(model="m", messages=[])


def test_oracle_needs_a_task_folder():
    with pytest.raises(ValueError):
        FakeOpenAI("oracle")
