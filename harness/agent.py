"""The agent loop: one episode of a policy model working in a sandbox through tools.

`run_episode(sb, instruction, client, model, cfg)` talks to any OpenAI-compatible server. It takes
native tool calls, and falls back to hermes-style tool calls written in the text
(`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`), which small models and servers without
a tool parser produce. A malformed call becomes an error observation the model can react to.

Before every request it checks the episode's wall time and the token budget
(estimated prompt + max_tokens <= context_len). The loop never raises for the model's or the
server's faults: it returns an `Episode` whose `end_reason` is one of
finished | max_turns | timeout | context_full | server_error | sandbox_error, with everything
gathered so far (messages, per-turn token ids / logprobs, timings), so nothing is lost.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from clawloop.harness.llm import ChatReply, LLMError, chat
from clawloop.harness.prompts import initial_messages
from clawloop.harness.sandbox.base import Sandbox, SandboxError
from clawloop.harness.tools import TOOLS, call_tool

END_REASONS = (
    "finished",
    "max_turns",
    "timeout",
    "context_full",
    "server_error",
    "sandbox_error",
)
# A rough, deliberately pessimistic chars-per-token ratio for when no tokenizer is given and the
# server has not yet reported usage; over-estimating only ends an episode a little early.
CHARS_PER_TOKEN = 3.0
_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class AgentConfig:
    max_turns: int = 30  # assistant replies per episode
    episode_timeout_s: float = 600.0  # wall time for the whole episode (model + tools)
    max_tokens: int = 1024  # completion budget per reply
    context_len: int = 32768  # the served model's context window
    temperature: float = 1.0  # sample as in training (GRPO needs on-policy samples)
    want_token_ids: bool = True  # ask vLLM for token ids + logprobs
    request_timeout_s: float = 120.0  # per chat request, capped by the remaining episode time


@dataclass
class Episode:
    messages: list[dict[str, Any]]
    turns: list[dict[str, Any]] = field(default_factory=list)
    end_reason: str = ""
    n_tool_calls: int = 0
    duration_s: float = 0.0
    error: str = ""


@dataclass
class ParsedCall:
    name: str
    arguments: str | dict  # JSON string (native) or dict (text)
    id: str


def parse_text_tool_calls(content: str) -> tuple[list[ParsedCall], list[str], str]:
    """Find hermes-style `<tool_call>` blocks in text.

    Returns (calls, errors, remaining text). An unterminated final block (a reply cut at
    max_tokens) is parsed like a closed one, and reported as an error if its JSON is incomplete."""
    calls: list[ParsedCall] = []
    errors: list[str] = []
    for i, m in enumerate(_TOOL_CALL_RE.finditer(content or "")):
        body = m.group(1).strip()
        try:
            obj = json.loads(body, strict=False)
        except json.JSONDecodeError as exc:
            errors.append(f"tool call #{i + 1} is not valid JSON ({exc.msg}): {body[:200]!r}")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            errors.append(f"tool call #{i + 1} needs a string 'name': {body[:200]!r}")
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        if not isinstance(args, dict | str):
            errors.append(f"tool call #{i + 1}: 'arguments' must be an object")
            continue
        calls.append(ParsedCall(obj["name"], args, f"call_text_{i}"))
    remaining = _TOOL_CALL_RE.sub("", content or "").strip()
    return calls, errors, remaining


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    return int(sum(len(json.dumps(m, ensure_ascii=False)) for m in messages) / CHARS_PER_TOKEN)


class _Budget:
    """Tracks the prompt size: exact counts from the server where known, estimates for the rest."""

    def __init__(self, count_tokens: Callable[[list[dict]], int] | None, tools_tokens: int):
        self.count_tokens = count_tokens
        self.known_tokens = tools_tokens
        self.known_upto = 0

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        if self.count_tokens is not None:
            return self.count_tokens(messages)
        return self.known_tokens + estimate_tokens(messages[self.known_upto :])

    def observe(self, reply: ChatReply, n_messages: int) -> None:
        prompt = (
            len(reply.prompt_token_ids)
            if reply.prompt_token_ids is not None
            else reply.prompt_tokens
        )
        completion = (
            len(reply.completion_token_ids)
            if reply.completion_token_ids is not None
            else reply.completion_tokens
        )
        if prompt is not None and completion is not None:
            self.known_tokens, self.known_upto = prompt + completion, n_messages


def _calls_of(reply: ChatReply) -> tuple[list[ParsedCall], list[str], bool]:
    """The reply's tool calls: native first, else parsed from text. Returns (calls, errors, text)."""
    if reply.raw_tool_calls:
        calls = [
            ParsedCall(tc["function"]["name"], tc["function"]["arguments"], tc["id"])
            for tc in reply.raw_tool_calls
        ]
        return calls, [], False
    calls, errors, _ = parse_text_tool_calls(reply.message.get("content") or "")
    return calls, errors, True


def run_episode(
    sb: Sandbox,
    instruction: str,
    client: openai.OpenAI,
    model: str,
    cfg: AgentConfig,
    count_tokens: Callable[[list[dict]], int] | None = None,
) -> Episode:
    """Run one episode in the started sandbox `sb`; returns the record, never raises for faults."""
    start = time.monotonic()
    deadline = start + cfg.episode_timeout_s
    ep = Episode(messages=initial_messages(instruction))
    budget = _Budget(count_tokens, estimate_tokens(TOOLS))

    def end(reason: str, error: str = "") -> Episode:
        ep.end_reason, ep.error = reason, error
        ep.duration_s = time.monotonic() - start
        return ep

    for _ in range(cfg.max_turns):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return end("timeout", f"episode wall time {cfg.episode_timeout_s:g}s used up")
        need = budget.prompt_tokens(ep.messages) + cfg.max_tokens
        if need > cfg.context_len:
            return end("context_full", f"prompt + max_tokens ~ {need} > context {cfg.context_len}")
        # A client-side retry (after a timeout) is allowed only while two full request timeouts
        # fit in the episode's remaining wall time; otherwise it would overrun the deadline.
        retry_ok = remaining > 2 * cfg.request_timeout_s
        call_client = client if retry_ok else client.with_options(max_retries=0)
        try:
            reply = chat(
                call_client,
                model,
                ep.messages,
                tools=TOOLS,
                max_tokens=cfg.max_tokens,
                temperature=cfg.temperature,
                want_token_ids=cfg.want_token_ids,
                timeout_s=min(cfg.request_timeout_s, remaining),
            )
        except LLMError as exc:
            if exc.kind == "context_full":
                return end("context_full", str(exc))
            if exc.kind == "timeout" and time.monotonic() >= deadline - 0.5:
                return end("timeout", f"episode wall time ran out waiting for the model: {exc}")
            return end("server_error", f"{exc.kind}: {exc}")

        calls, parse_errors, from_text = _calls_of(reply)
        message = dict(reply.message)
        raw_content = ""
        if from_text and calls:
            # Store the calls in native shape, and only the prose as content: a chat template
            # renders tool_calls itself, so leaving the blocks in the text would show the model
            # every call twice on the next turn. The exact text stays in the turn record.
            raw_content = message.get("content") or ""
            message["content"] = parse_text_tool_calls(raw_content)[2]
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments
                        if isinstance(c.arguments, str)
                        else json.dumps(c.arguments, ensure_ascii=False),
                    },
                }
                for c in calls
            ]
        ep.messages.append(message)
        budget.observe(reply, len(ep.messages))
        turn: dict[str, Any] = {
            "prompt_token_ids": reply.prompt_token_ids,
            "completion_token_ids": reply.completion_token_ids,
            "logprobs": reply.logprobs,
            "needs_retokenize": reply.needs_retokenize,
            "finish_reason": reply.finish_reason,
            "latency_s": round(reply.latency_s, 4),
            "tool_calls_from_text": bool(from_text and calls),
            "raw_content": raw_content,
            "tools": [],
        }
        ep.turns.append(turn)

        finished = False
        for call in calls:
            try:
                result = call_tool(sb, call.name, call.arguments, deadline - time.monotonic())
            except SandboxError as exc:
                return end("sandbox_error", f"sandbox failed during {call.name}: {exc}")
            ep.n_tool_calls += 1
            turn["tools"].append(
                {
                    "name": call.name,
                    "error": result.error,
                    "duration_s": round(result.duration_s, 4),
                }
            )
            ep.messages.append({"role": "tool", "tool_call_id": call.id, "content": result.output})
            if result.finished:
                finished = True
                break
        if finished:
            return end("finished")
        if parse_errors:
            hint = (
                'Write each tool call as <tool_call>{"name": "...", "arguments": {...}}</tool_call> '
                "or use native tool calls."
            )
            ep.messages.append(
                {"role": "user", "content": "error: " + "; ".join(parse_errors) + "\n" + hint}
            )
        elif not calls:
            cut = " Your reply was cut at max_tokens." if reply.finish_reason == "length" else ""
            ep.messages.append(
                {
                    "role": "user",
                    "content": "No tool call found." + cut + " Use the tools to work on the task, "
                    "and call finish when the outputs are written.",
                }
            )
    return end("max_turns", f"no finish within {cfg.max_turns} turns")
