"""The agent loop: one episode of a policy model working in a sandbox through tools.

`run_episode(sb, instruction, client, model, cfg)` talks to any OpenAI-compatible server. It takes
native tool calls, and falls back to the calls written in the text, in the forms real models emit
(hermes `<tool_call>` tags, JSON in code fences, bare JSON objects: `harness.toolcalls`), which
small models and servers without a tool parser produce. A malformed call becomes an error the
model is shown, with the format to use; a reply with no call at all is answered with that format.

Before every request it checks the episode's wall time and the token budget
(estimated prompt + max_tokens <= context_len). The loop never raises for the model's or the
server's faults: it returns an `Episode` whose `end_reason` is one of
finished | max_turns | timeout | context_full | server_error | sandbox_error, with everything
gathered so far (messages, per-turn token ids / logprobs, timings), so nothing is lost.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from clawloop.harness.llm import ChatReply, LLMError, chat
from clawloop.harness.prompts import initial_messages
from clawloop.harness.sandbox.base import Sandbox, SandboxError
from clawloop.harness.toolcalls import FORMAT_HINT, ParsedCall, native_tool_call, parse_tool_calls
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


@dataclass(frozen=True)
class AgentConfig:
    """The agent loop's settings, made by RolloutConfig.agent_config() (harness/rollout.py),
    whose fields hold the defaults and their meaning: none is written here a second time."""

    max_turns: int  # assistant replies per episode
    episode_timeout_s: float  # wall time for the whole episode (model + tools)
    max_tokens: int  # completion budget per reply
    context_len: int  # the served model's context window
    temperature: float  # sample as in training (GRPO needs on-policy samples)
    want_token_ids: bool  # ask vLLM for token ids + logprobs
    request_timeout_s: float  # per chat request, capped by the remaining episode time
    # The episode's sampling seed (`episode_seed`: run seed, task id, attempt); turn t's request
    # sends `turn_seed(seed, t)`. None: no request sends a seed.
    seed: int | None = None


SEED_BITS = 31  # a seed every OpenAI-compatible server takes (vLLM, the local server: any int)


def _hashed(*parts: object) -> int:
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % (1 << SEED_BITS)


def episode_seed(run_seed: int | None, task_id: str, attempt: int) -> int | None:
    """The seed of one episode: a hash of the run seed, the task id and the attempt (None
    without a run seed). The same task and attempt get the same seed in every stage and
    iteration (a held-out episode of row base and of row k: common random numbers for the paired
    test), different attempts of a task different ones."""
    return None if run_seed is None else _hashed("episode", run_seed, task_id, attempt)


def turn_seed(seed: int | None, turn: int) -> int | None:
    """The seed sent with the episode's `turn`-th request (0-based); None when `seed` is."""
    return None if seed is None else _hashed("turn", seed, turn)


@dataclass
class Episode:
    messages: list[dict[str, Any]]
    turns: list[dict[str, Any]] = field(default_factory=list)
    end_reason: str = ""
    n_tool_calls: int = 0
    duration_s: float = 0.0
    error: str = ""


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
    """The reply's tool calls: native first, else parsed from text. Returns (calls, errors,
    from_text)."""
    if reply.raw_tool_calls:
        calls = [
            ParsedCall(tc["function"]["name"], tc["function"]["arguments"], tc["id"])
            for tc in reply.raw_tool_calls
        ]
        return calls, [], False
    parsed = parse_tool_calls(reply.message.get("content") or "")
    return list(parsed.calls), list(parsed.errors), True


class _EpisodeOver(Exception):
    """Raised by a step of the loop to end the episode: `reason` is one of END_REASONS."""

    def __init__(self, reason: str, error: str = "") -> None:
        super().__init__(reason, error)
        self.reason, self.error = reason, error


def _check_budget(
    messages: list[dict[str, Any]], budget: _Budget, cfg: AgentConfig, remaining: float
) -> None:
    """End the episode before a request that has no wall time left or would overflow the context."""
    if remaining <= 0:
        raise _EpisodeOver("timeout", f"episode wall time {cfg.episode_timeout_s:g}s used up")
    need = budget.prompt_tokens(messages) + cfg.max_tokens
    if need > cfg.context_len:
        raise _EpisodeOver(
            "context_full", f"prompt + max_tokens ~ {need} > context {cfg.context_len}"
        )


def _request(
    client: openai.OpenAI,
    model: str,
    messages: list[dict[str, Any]],
    cfg: AgentConfig,
    remaining: float,
    deadline: float,
    seed: int | None = None,
) -> ChatReply:
    """One chat request within the episode's remaining time, sampled with `seed` (None: the
    server's own randomness); a server fault ends the episode."""
    # A client-side retry (after a timeout) is allowed only while two full request timeouts
    # fit in the episode's remaining wall time; otherwise it would overrun the deadline.
    retry_ok = remaining > 2 * cfg.request_timeout_s
    call_client = client if retry_ok else client.with_options(max_retries=0)
    try:
        return chat(
            call_client,
            model,
            messages,
            tools=TOOLS,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
            want_token_ids=cfg.want_token_ids,
            timeout_s=min(cfg.request_timeout_s, remaining),
            seed=seed,
        )
    except LLMError as exc:
        if exc.kind == "context_full":
            raise _EpisodeOver("context_full", str(exc)) from exc
        if exc.kind == "timeout" and time.monotonic() >= deadline - 0.5:
            raise _EpisodeOver(
                "timeout", f"episode wall time ran out waiting for the model: {exc}"
            ) from exc
        raise _EpisodeOver("server_error", f"{exc.kind}: {exc}") from exc


def _assistant_message(
    reply: ChatReply, calls: list[ParsedCall], from_text: bool
) -> tuple[dict[str, Any], str]:
    """The reply as the assistant message to keep, and its raw text when calls came from text."""
    message = dict(reply.message)
    if not (from_text and calls):
        return message, ""
    # Store the calls in native shape, and only the prose as content: a chat template
    # renders tool_calls itself, so leaving the calls in the text would show the model
    # every call twice on the next turn. The exact text stays in the turn record.
    raw_content = message.get("content") or ""
    message["content"] = parse_tool_calls(raw_content).content
    message["tool_calls"] = [native_tool_call(c, c.id) for c in calls]
    return message, raw_content


def _turn_record(
    reply: ChatReply, from_text: bool, raw_content: str, calls: list[ParsedCall] = ()
) -> dict[str, Any]:
    """What the episode keeps of one reply for training: token ids, logprobs, timing, and the
    sampled text as the server returned it (`raw_content`: the reply's content before any tool
    call is parsed out of it; `reasoning_content`: what a reasoning parser split off;
    `tool_calls_native`: the server parsed tool calls out of the sample itself, so without token
    ids the exact sampled text is unknown; `tool_call_forms`: how the text wrote its calls,
    hermes | fenced | bare; `tool_calls_repaired`: calls read as Python literals, not JSON)."""
    return {
        "prompt_token_ids": reply.prompt_token_ids,
        "completion_token_ids": reply.completion_token_ids,
        "logprobs": reply.logprobs,
        # sampled under a grammar (tool_choice required): the logprobs are renormalised over the
        # tokens it allowed, so GRPO does not take them as the model's (training/sequences.py)
        "logprobs_constrained": reply.constrained,
        "needs_retokenize": reply.needs_retokenize,
        "finish_reason": reply.finish_reason,
        "latency_s": round(reply.latency_s, 4),
        "tool_calls_from_text": from_text,
        "raw_content": raw_content or str(reply.message.get("content") or ""),
        "reasoning_content": reply.reasoning_content,
        "tool_calls_native": bool(reply.raw_tool_calls),
        "stop_reason": reply.stop_reason,  # the stop id sampled, trained on the text path
        "tool_call_forms": list(dict.fromkeys(c.form for c in calls)) if from_text else [],
        "tool_calls_repaired": sum(c.repaired for c in calls),
        "tools": [],
    }


def _run_tools(
    sb: Sandbox, ep: Episode, calls: list[ParsedCall], turn: dict[str, Any], deadline: float
) -> bool:
    """Run the reply's tool calls in order, each observation a tool message; True once one
    finishes the episode (later calls are not run). A sandbox fault ends the episode."""
    for call in calls:
        try:
            result = call_tool(sb, call.name, call.arguments, deadline - time.monotonic())
        except SandboxError as exc:
            raise _EpisodeOver(
                "sandbox_error", f"sandbox failed during {call.name}: {exc}"
            ) from exc
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
            return True
    return False


def _nudge(
    parse_errors: list[str], calls: list[ParsedCall], finish_reason: str
) -> dict[str, Any] | None:
    """The user message that follows a reply with malformed tool calls or none at all: both
    show the format, since a model that wrote none may not know the one expected."""
    if parse_errors:
        return {"role": "user", "content": "error: " + "; ".join(parse_errors) + "\n" + FORMAT_HINT}
    if not calls:
        cut = " Your reply was cut at max_tokens." if finish_reason == "length" else ""
        return {
            "role": "user",
            "content": "No tool call found." + cut + " Use the tools to work on the task, "
            "and call finish when the outputs are written. " + FORMAT_HINT,
        }
    return None


def _take_turn(
    sb: Sandbox, ep: Episode, reply: ChatReply, budget: _Budget, deadline: float
) -> bool:
    """Record one reply and run its tool calls; True when the episode is finished."""
    calls, parse_errors, from_text = _calls_of(reply)
    message, raw_content = _assistant_message(reply, calls, from_text)
    ep.messages.append(message)
    budget.observe(reply, len(ep.messages))
    turn = _turn_record(reply, bool(from_text and calls), raw_content, calls)
    ep.turns.append(turn)
    if _run_tools(sb, ep, calls, turn, deadline):
        return True
    nudge = _nudge(parse_errors, calls, reply.finish_reason)
    if nudge is not None:
        ep.messages.append(nudge)
    return False


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

    try:
        for turn in range(cfg.max_turns):
            remaining = deadline - time.monotonic()
            _check_budget(ep.messages, budget, cfg, remaining)
            seed = turn_seed(cfg.seed, turn)
            reply = _request(client, model, ep.messages, cfg, remaining, deadline, seed)
            if _take_turn(sb, ep, reply, budget, deadline):
                return end("finished")
    except _EpisodeOver as over:
        return end(over.reason, over.error)
    return end("max_turns", f"no finish within {cfg.max_turns} turns")
