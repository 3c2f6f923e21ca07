"""The OpenAI-compatible client wrapper: reply parsing, vLLM token ids, errors as LLMError kinds."""

from __future__ import annotations

import json

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.harness.llm import LLMEndpoint, LLMError, chat, make_client, reply_from_response

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "do it"}]


def test_reply_from_vllm_shaped_body_keeps_token_ids_and_logprobs():
    body = {
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {
                "message": {"role": "assistant", "content": "hi", "tool_calls": None},
                "finish_reason": "stop",
                "token_ids": [7, 8],
                "logprobs": {
                    "content": [{"token": "h", "logprob": -0.5}, {"token": "i", "logprob": -1.0}]
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    r = reply_from_response(body, 0.1)
    assert r.prompt_token_ids == [1, 2, 3]
    assert r.completion_token_ids == [7, 8]
    assert r.logprobs == [-0.5, -1.0]
    assert not r.needs_retokenize
    assert r.message == {"role": "assistant", "content": "hi"}


def test_reply_without_token_ids_needs_retokenize():
    body = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [{"id": "c1", "function": {"name": "finish", "arguments": "{}"}}],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    r = reply_from_response(body)
    assert r.needs_retokenize and r.logprobs is None
    assert r.raw_tool_calls[0]["function"]["name"] == "finish"
    assert r.message["content"] == ""


def test_the_history_message_keeps_the_reasoning_and_the_sampled_form():
    """What the next prompt needs to hold the turn as sampled: the reasoning (a Qwen3 template
    renders it back after the last user message instead of dropping it) and the local server's
    `sampled` form (rendered as exactly those tokens); neither is invented where absent."""
    body = {
        "choices": [
            {
                "message": {
                    "content": "ok",
                    "reasoning_content": "\nthink\n",
                    "sampled": {"token_ids": [5, 6, 7]},
                },
                "finish_reason": "stop",
            }
        ]
    }
    m = reply_from_response(body).message
    assert m["reasoning_content"] == "\nthink\n" and m["sampled"] == {"token_ids": [5, 6, 7]}
    plain = reply_from_response({"choices": [{"message": {"content": "ok"}}]}).message
    assert plain == {"role": "assistant", "content": "ok"}


def test_reply_without_choices_is_bad_response():
    with pytest.raises(LLMError) as e:
        reply_from_response({"choices": []})
    assert e.value.kind == "bad_response"


def test_chat_over_http_requests_token_ids_and_gets_them():
    with FakeOpenAI("chatty", vllm_tokens=True) as fake:
        client = make_client(
            LLMEndpoint(fake.base_url, "fake-policy", api_key_env="CLAWLOOP_NO_SUCH_KEY")
        )
        r = chat(client, "fake-policy", MESSAGES, max_tokens=64)
    assert fake.requests[0]["return_token_ids"] is True
    assert fake.requests[0]["logprobs"] is True
    assert r.completion_token_ids and len(r.logprobs) == len(r.completion_token_ids)
    assert r.prompt_token_ids and r.prompt_tokens == len(r.prompt_token_ids)


def test_api_key_comes_from_the_named_variable(monkeypatch):
    monkeypatch.setenv("CLAWLOOP_TEST_KEY", "sk-secret")
    assert LLMEndpoint("http://x/v1", "m", api_key_env="CLAWLOOP_TEST_KEY").api_key() == "sk-secret"
    assert LLMEndpoint("http://x/v1", "m", api_key_env="CLAWLOOP_UNSET_KEY").api_key() == "EMPTY"


@pytest.mark.parametrize("mode,kind", [("drop", "connection"), ("stall", "timeout")])
def test_server_faults_become_llm_error_kinds(mode, kind):
    with FakeOpenAI(mode, stall_s=5) as fake:
        client = make_client(LLMEndpoint(fake.base_url, "m", request_timeout_s=0.5, max_retries=0))
        with pytest.raises(LLMError) as e:
            chat(client, "m", MESSAGES)
    assert e.value.kind == kind


def test_unreachable_server_is_connection_error():
    client = make_client(
        LLMEndpoint("http://127.0.0.1:9/v1", "m", request_timeout_s=1, max_retries=0)
    )
    with pytest.raises(LLMError) as e:
        chat(client, "m", MESSAGES)
    assert e.value.kind == "connection"


@pytest.mark.parametrize("status", [422, 400])
def test_server_refusing_token_id_fields_is_asked_plainly_from_then_on(status):
    with FakeOpenAI("chatty", rejects_token_ids=True, rejects_token_ids_status=status) as fake:
        client = make_client(LLMEndpoint(fake.base_url, "m", max_retries=0))
        first = chat(client, "m", MESSAGES)
        second = chat(client, "m", MESSAGES)
    assert first.needs_retokenize and second.needs_retokenize
    assert ["return_token_ids" in r for r in fake.requests] == [True, False, False]


def test_an_llm_error_pickles_whole() -> None:  # it may come back from a Dask or Ray worker
    import pickle

    from clawloop.harness.llm import LLMError

    err = pickle.loads(pickle.dumps(LLMError("timeout", "no answer in 120 s")))
    assert (err.kind, str(err)) == ("timeout", "no answer in 120 s")


def test_token_ids_off_never_asks_and_on_says_what_to_set():
    with FakeOpenAI("chatty", rejects_token_ids=True, rejects_token_ids_status=400) as fake:
        off = make_client(LLMEndpoint(fake.base_url, "m", max_retries=0, token_ids="off"))
        assert chat(off, "m", MESSAGES).needs_retokenize
        assert ["return_token_ids" in r for r in fake.requests] == [False]
        on = make_client(LLMEndpoint(fake.base_url, "m", max_retries=0, token_ids="on"))
        with pytest.raises(LLMError) as e:
            chat(on, "m", MESSAGES)
    assert e.value.kind == "http" and "llm.token_ids: auto or off" in str(e.value)
    with pytest.raises(ValueError):
        LLMEndpoint("http://x/v1", "m", token_ids="sometimes")  # type: ignore[arg-type]


def test_a_context_full_400_is_not_taken_for_a_rejected_extension():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            data = json.dumps({"error": {"message": "maximum context length is 8 tokens"}})
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        client = make_client(LLMEndpoint(url, "m", max_retries=0))
        with pytest.raises(LLMError) as e:
            chat(client, "m", MESSAGES)
    finally:
        server.shutdown()
    assert e.value.kind == "context_full" and len(seen) == 1  # not retried as "no token ids"


def test_llm_token_ids_is_a_run_config_setting():
    from clawloop.tasks.config import ConfigError, parse_config

    assert parse_config({"llm": {"token_ids": "off"}}).llm.token_ids == "off"
    assert parse_config({}).llm.token_ids == "auto"
    with pytest.raises(ConfigError, match="llm.token_ids"):
        parse_config({"llm": {"token_ids": "yes"}})


def test_llm_token_ids_off_unquoted_in_yaml_is_off():
    """YAML reads a bare `off` as false; the setting takes it as written, not as an error."""
    import yaml

    from clawloop.tasks.config import parse_config

    for text, mode in (("off", "off"), ("on", "on")):
        data = yaml.safe_load(f"llm:\n  token_ids: {text}\n")
        assert parse_config(data).llm.token_ids == mode


@pytest.mark.parametrize("tool_choice", ["auto", "required"])
def test_a_reply_sampled_under_required_says_its_logprobs_are_constrained(tool_choice):
    """vLLM meets tool_choice required with a grammar that masks the logits before any logprob
    is taken: the reply (and the turn record) says so, for training to know."""
    from clawloop.harness.tools import TOOLS

    with FakeOpenAI("chatty", vllm_tokens=True) as fake:
        ep = LLMEndpoint(fake.base_url, "m", max_retries=0, tool_choice=tool_choice)
        r = chat(make_client(ep), "m", MESSAGES, tools=TOOLS, max_tokens=64)
        plain = chat(make_client(ep), "m", MESSAGES, max_tokens=64)  # no tools: no grammar
    assert fake.requests[0].get("tool_choice") == (
        "required" if tool_choice == "required" else None
    )
    assert r.constrained == (tool_choice == "required") and not plain.constrained
    assert r.logprobs  # recorded all the same: GRPO reads the flag, not their absence
