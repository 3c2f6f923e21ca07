"""The one OpenAI-compatible client every LLM role goes through (policy, generator writer, judge).

`LLMEndpoint` says where a model is served (base URL, model name, the *name* of the environment
variable holding the API key — the key itself is never stored). `chat()` sends one chat completion
and returns a `ChatReply`: the assistant message as plain dicts, and, when the server is vLLM, the
exact prompt/completion token ids and sampling logprobs (asked for with `return_token_ids` and
`logprobs`). Servers that ignore those fields (transformers serve, hosted APIs) simply leave them
empty and the reply says `needs_retokenize`.

Whether to ask for token ids is `token_ids` (`llm.token_ids` in the run config): `auto` asks, and a
server that rejects the extension (HTTP 400 or 422, not a context-length error) is asked once more
plainly; when that succeeds the endpoint is remembered and asked plainly from then on (one warning
per endpoint). `on` asks always and a rejection is an error that says so; `off` never asks.

A server that answers a token-id request without ids (HTTP 200, no `token_ids`) is warned about
once per endpoint under `auto` (the turns train from text) and refused under `on`.

With `api: tokens` (the managed vLLM, `harness/vllm.py`) the request goes token in, token out
(`harness/tokens.py`): the prompt rendered here with the served model's tokenizer, each earlier turn
spliced in as the ids it sampled, sent to `/v1/completions`, so one episode is one exact sequence.
Every request that asks for token ids pins the sampling parameters (`tokens.PINNED_SAMPLING`);
with `seed` (the agent sends one per turn: `agent.turn_seed`) the request carries it, so a server
that honours it (vLLM, the local server) samples the same tokens for the same prompt and seed.

Server faults are raised as `LLMError` with a `kind` (timeout, connection, context_full, http,
bad_response) so callers can record them as data.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import openai

from clawloop.harness.tokens import (
    FORCED_CHOICES,
    PINNED_SAMPLING,
    TOOL_CHOICES,
    RenderError,
    TokenRoute,
    ToolChoice,
    completion_parts,
)

TokenIds = Literal["auto", "on", "off"]
TOKEN_ID_MODES = ("auto", "on", "off")
REJECT_STATUSES = (400, 422)  # what servers answer an unknown request field with

# Base URLs whose server rejected `return_token_ids` (HTTP 400/422) and answered the same request
# asked plainly: asked plainly from then on.
_NO_TOKEN_IDS: set[str] = set()
# Base URL -> the `token_ids` mode its endpoint was configured with (set by `make_client`), so every
# caller of `chat` on that endpoint follows the run config without passing it along.
_TOKEN_ID_MODES: dict[str, TokenIds] = {}
# Base URL -> its token-in route (api: tokens) and its tool choice (either api).
_TOKEN_ROUTES: dict[str, TokenRoute] = {}
_TOOL_CHOICES: dict[str, ToolChoice] = {}
_ROUTE_CACHE: dict[tuple[str, str], TokenRoute] = {}
# Base URLs that answered a token-id request without ids (warned once each).
_NO_IDS_WARNED: set[str] = set()
_LOCK = threading.Lock()
log = logging.getLogger("clawloop.llm")

ErrorKind = Literal["timeout", "connection", "context_full", "http", "bad_response"]


class LLMError(RuntimeError):
    """A chat call that produced no usable reply; `kind` says why."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind

    def __reduce__(self) -> tuple[type[LLMError], tuple[str, str]]:
        return (type(self), (self.kind, str(self)))  # unpickles whole from a Dask/Ray worker


class _TokenFieldsRejected(Exception):
    """The server refused a request that asked for token ids (HTTP 400/422, not context-full)."""

    def __init__(self, error: LLMError) -> None:
        super().__init__(str(error))
        self.error = error  # what the server said, raised if asking plainly does not help


@dataclass(frozen=True)
class LLMEndpoint:
    """Where a model is served. `api_key_env` names a variable; its value never enters artifacts."""

    base_url: str  # e.g. http://127.0.0.1:8000/v1
    model: str  # the served model name (also recorded as the policy id)
    api_key_env: str = "OPENAI_API_KEY"  # read at call time; a missing variable means "EMPTY"
    request_timeout_s: float = 120.0  # per HTTP request
    max_retries: int = 1  # transient connection retries inside the openai client
    token_ids: TokenIds = "auto"  # ask for token ids + logprobs: auto (fall back) | on | off
    api: Literal["chat", "tokens"] = "chat"  # tokens: prompt ids to /v1/completions (vLLM)
    tokenizer: str = ""  # the served model's folder (api: tokens renders prompts with it)
    tool_choice: ToolChoice = "auto"  # rollout.tool_choice: auto | required | one

    def __post_init__(self) -> None:
        if self.token_ids not in TOKEN_ID_MODES:
            raise ValueError(f"token_ids={self.token_ids!r}: use one of {TOKEN_ID_MODES}")
        if self.api not in ("chat", "tokens"):
            raise ValueError(f"api={self.api!r}: use chat or tokens")
        if self.api == "tokens" and not self.tokenizer:
            raise ValueError("api='tokens' needs the served model's folder as tokenizer")
        if self.tool_choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice={self.tool_choice!r}: use one of {TOOL_CHOICES}")

    def api_key(self) -> str:
        return os.environ.get(self.api_key_env, "") or "EMPTY"


@dataclass
class ChatReply:
    message: dict[str, Any]  # OpenAI-format assistant message: role, content, tool_calls?
    finish_reason: str
    latency_s: float
    prompt_tokens: int | None = None  # from usage
    completion_tokens: int | None = None
    prompt_token_ids: list[int] | None = None  # vLLM return_token_ids
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None  # one per completion token, the sampled token's logprob
    raw_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # What a reasoning parser split off the sampled text (vLLM `reasoning_content` / `reasoning`,
    # transformers serve `reasoning_content`); None when the server returned none. Training puts
    # it back in front of the content: it is part of what the policy sampled.
    reasoning_content: str | None = None
    # vLLM's `stop_reason`: the stop token id (int) or stop string that ended the reply; None
    # for eos or a cut. Training trains that id as the turn's end when it has no token ids.
    stop_reason: int | str | None = None
    # The request carried a grammar (tool_choice required: vLLM's structured outputs), so the
    # logprobs are renormalised over the tokens it allowed, not the model's (harness/tokens.py).
    constrained: bool = False

    @property
    def needs_retokenize(self) -> bool:
        return self.prompt_token_ids is None or self.completion_token_ids is None


@dataclass(frozen=True)
class PolicyConfig:
    """The policy endpoint. The API key is read from `api_key_env` at call time, never stored."""

    base_url: str  # OpenAI-compatible, e.g. http://127.0.0.1:8000/v1 (vLLM, transformers serve)
    model: str  # served model name
    api_key_env: str = "OPENAI_API_KEY"  # name of the variable holding the key ("" = none)
    policy_id: str = ""  # checkpoint id recorded in trajectories; defaults to `model`
    request_timeout_s: float = 120.0  # per chat request
    max_retries: int = 1  # transient connection retries per request
    tokenizer: str = ""  # local folder of the served model's tokenizer: exact token budget
    token_ids: TokenIds = "auto"  # llm.token_ids: ask for token ids (auto falls back) | on | off
    api: Literal["chat", "tokens"] = "chat"  # tokens: one exact sequence per episode (vLLM)
    tool_choice: ToolChoice = "auto"  # rollout.tool_choice

    def endpoint(self) -> LLMEndpoint:
        return LLMEndpoint(
            self.base_url,
            self.model,
            self.api_key_env,
            self.request_timeout_s,
            self.max_retries,
            self.token_ids,
            self.api,
            self.tokenizer,
            self.tool_choice,
        )

    @property
    def id(self) -> str:
        return self.policy_id or self.model


def make_client(endpoint: LLMEndpoint) -> openai.OpenAI:
    """The endpoint's client; its `token_ids` mode is what `chat` follows for this base URL."""
    client = openai.OpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.api_key(),
        timeout=endpoint.request_timeout_s,
        max_retries=endpoint.max_retries,
    )
    base = str(client.base_url)
    route = None
    if endpoint.api == "tokens":
        key = (endpoint.tokenizer, endpoint.tool_choice)
        with _LOCK:
            route = _ROUTE_CACHE.get(key)
        if route is None:
            try:
                route = TokenRoute(endpoint.tokenizer, endpoint.tool_choice)
            except RenderError as exc:
                raise LLMError("bad_response", str(exc)) from exc
    with _LOCK:
        _TOKEN_ID_MODES[base] = endpoint.token_ids
        _TOOL_CHOICES[base] = endpoint.tool_choice
        if route is not None:
            _ROUTE_CACHE[(endpoint.tokenizer, endpoint.tool_choice)] = route
            _TOKEN_ROUTES[base] = route
        else:
            _TOKEN_ROUTES.pop(base, None)
    return client


def _is_context_error(exc: openai.APIStatusError) -> bool:
    text = str(exc).lower()
    return exc.status_code == 400 and any(
        s in text for s in ("context length", "maximum context", "context_length", "too long")
    )


def chat(
    client: openai.OpenAI,
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    max_tokens: int = 1024,
    temperature: float = 1.0,
    want_token_ids: bool = True,
    timeout_s: float | None = None,
    seed: int | None = None,
) -> ChatReply:
    """One chat completion, sampled with `seed` when given. Raises `LLMError` on any
    server-side failure."""
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    if seed is not None:
        kwargs["seed"] = int(seed)
    if tools:
        kwargs["tools"] = tools
    options: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
    base = str(client.base_url)
    route = _TOKEN_ROUTES.get(base)
    if route is not None:
        return _chat_tokens(
            client, route, model, messages, tools, max_tokens, temperature, options, seed
        )
    # The chat API has no cap on the calls of a forced reply: "one" asks for "required" there.
    required = bool(tools) and _TOOL_CHOICES.get(base, "auto") in FORCED_CHOICES
    if required:
        kwargs["tool_choice"] = "required"
    mode = _TOKEN_ID_MODES.get(base, "auto")
    ask_tokens = want_token_ids and mode != "off" and (mode == "on" or base not in _NO_TOKEN_IDS)
    start = time.monotonic()
    try:
        data = _create(client, kwargs, options, ask_tokens)
    except _TokenFieldsRejected as rejected:
        if mode == "on":
            raise LLMError(
                rejected.error.kind,
                f"{rejected.error} (llm.token_ids is 'on', so the request asked for token ids: "
                "if this server does not support vLLM's return_token_ids, set llm.token_ids: auto "
                "or off; training then uses the sampled text)",
            ) from rejected
        # Servers with strict request schemas (transformers serve: 422; others: 400) refuse
        # vLLM's extra fields: ask plainly; if that works, remember it for this endpoint. The
        # trajectory will say needs_retokenize.
        data = _create(client, kwargs, options, False)
        with _LOCK:
            first = base not in _NO_TOKEN_IDS
            _NO_TOKEN_IDS.add(base)
        if first:
            log.warning(
                "%s rejected the token-id request fields (%s); asking it without them from now "
                "on (set llm.token_ids: off to skip the first try)",
                base,
                str(rejected.error)[:200],
            )
    latency = time.monotonic() - start
    if not isinstance(data, dict):
        raise LLMError("bad_response", f"{base} answered with non-JSON-object {str(data)[:200]!r}")
    reply = reply_from_response(data, latency)
    reply.constrained = required  # vLLM meets `required` with a JSON-schema grammar
    if ask_tokens and base not in _NO_TOKEN_IDS and reply.needs_retokenize:
        _no_ids(base, mode)
    return reply


def _no_ids(base: str, mode: TokenIds) -> None:
    """A server that answered a token-id request without the ids: refused under `on`, warned
    once per endpoint under `auto` (training then uses the sampled text)."""
    what = (
        f"{base} answered a request that asked for token ids (return_token_ids) without "
        "prompt_token_ids/token_ids"
    )
    if mode == "on":
        raise LLMError(
            "bad_response",
            f"{what}, and llm.token_ids is 'on': serve the policy with vLLM (it returns them), "
            "or set llm.token_ids: auto to train those turns from their text",
        )
    with _LOCK:
        first = base not in _NO_IDS_WARNED
        _NO_IDS_WARNED.add(base)
    if first:
        log.warning(
            "%s; its turns are trained from their text (llm.token_ids: on refuses such a server)",
            what,
        )


def _chat_tokens(
    client: openai.OpenAI,
    route: TokenRoute,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    max_tokens: int,
    temperature: float,
    options: dict[str, Any],
    seed: int | None = None,
) -> ChatReply:
    """One turn token in, token out (`harness.tokens`): the prompt ids rendered here, sent to
    /v1/completions (with `seed` when given); the reply's ids, logprobs and parsed message."""
    base = str(client.base_url)
    try:
        prompt = route.prompt_ids(messages, tools)
    except RenderError as exc:
        raise LLMError("bad_response", f"{exc} (rendering the prompt for {base})") from exc
    body = route.request_body(model, prompt, max_tokens, temperature, tools)
    if seed is not None:
        body["seed"] = int(seed)
    start = time.monotonic()
    data = _post(client, "/completions", body, options, ask_tokens=False)
    latency = time.monotonic() - start
    if not isinstance(data, dict) or not data.get("choices"):
        raise LLMError("bad_response", f"{base} answered {str(data)[:300]!r} to a completion")
    prompt_ids, ids, logprobs, finish, stop = completion_parts(data, route.ends)
    if ids is None:
        _no_ids(base, _TOKEN_ID_MODES.get(base, "auto"))
        text = str(data["choices"][0].get("text") or "")
        ids = list(route.tokenizer(text, add_special_tokens=False)["input_ids"]) or None
        prompt_ids = None  # what the server sampled is not known exactly: the text path trains
    message = (
        route.message(ids, finish, tools)
        if ids
        else {"role": "assistant", "content": str(data["choices"][0].get("text") or "")}
    )
    if prompt_ids is None:
        message.pop("sampled", None)
    if message.get("tool_calls") and finish == "stop":
        finish = "tool_calls"
    usage = data.get("usage") or {}
    return ChatReply(
        message={k: v for k, v in message.items() if k != "tool_calls" or v},
        finish_reason=finish,
        latency_s=latency,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        prompt_token_ids=list(prompt_ids) if prompt_ids is not None else None,
        completion_token_ids=ids if prompt_ids is not None else None,
        logprobs=logprobs if prompt_ids is not None else None,
        raw_tool_calls=list(message.get("tool_calls") or []),
        reasoning_content=message.get("reasoning_content"),
        stop_reason=stop,
        constrained="structured_outputs" in body,
    )


def _create(
    client: openai.OpenAI, body: dict[str, Any], options: dict[str, Any], ask_tokens: bool
) -> Any:
    body = dict(body)
    if ask_tokens:
        # vLLM: token ids of prompt and completion; logprobs of the sampled tokens (GRPO needs them),
        # and every sampling parameter pinned (vLLM fills missing ones from generation_config.json).
        body["logprobs"] = True
        body["return_token_ids"] = True
        body.update({k: v for k, v in PINNED_SAMPLING.items() if k not in body})
    return _post(client, "/chat/completions", body, options, ask_tokens)


def _post(
    client: openai.OpenAI,
    path: str,
    body: dict[str, Any],
    options: dict[str, Any],
    ask_tokens: bool,
) -> Any:
    try:
        # The client's documented low-level `post` keeps its retries, timeouts and error types but
        # skips `chat.completions.create`'s per-message type transform, whose cost grows with the
        # conversation (~0.8 ms per message measured) and dominated long episodes.
        return client.post(path, cast_to=object, body=body, options=options)
    except openai.APITimeoutError as exc:
        raise LLMError("timeout", f"chat request to {client.base_url} timed out: {exc}") from exc
    except openai.APIConnectionError as exc:
        raise LLMError("connection", f"cannot reach {client.base_url}: {exc}") from exc
    except openai.APIStatusError as exc:
        kind: ErrorKind = "context_full" if _is_context_error(exc) else "http"
        body = _response_text(exc)
        error = LLMError(
            kind, f"server {client.base_url} answered {exc.status_code}: {body or exc}"
        )
        if ask_tokens and kind == "http" and exc.status_code in REJECT_STATUSES:
            raise _TokenFieldsRejected(error) from exc
        raise error from exc


def _response_text(exc: openai.APIStatusError, limit: int = 500) -> str:
    """The error body the server sent (what it says went wrong), cut to `limit` characters."""
    try:
        return exc.response.text[:limit]
    except Exception:  # a streamed or closed response has no text to give; the status will do
        return ""


def reply_from_response(data: dict[str, Any], latency_s: float = 0.0) -> ChatReply:
    """Turn a chat-completion JSON body (as a dict) into a `ChatReply`; pure, for tests too."""
    choices = data.get("choices") or []
    if not choices:
        raise LLMError("bad_response", f"response has no choices: {json.dumps(data)[:300]}")
    choice = choices[0]
    msg = choice.get("message") or {}
    tool_calls = []
    for tc in msg.get("tool_calls") or []:
        fn = tc.get("function") or {}
        tool_calls.append(
            {
                "id": tc.get("id") or f"call_{len(tool_calls)}",
                "type": "function",
                "function": {"name": fn.get("name") or "", "arguments": fn.get("arguments") or ""},
            }
        )
    message: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or ""}
    if tool_calls:
        message["tool_calls"] = tool_calls
    usage = data.get("usage") or {}
    lp = choice.get("logprobs") or {}
    content_lp = lp.get("content") if isinstance(lp, dict) else None
    logprobs = [float(t["logprob"]) for t in content_lp] if content_lp else None
    reasoning = msg.get("reasoning_content")
    if not isinstance(reasoning, str):
        reasoning = msg.get("reasoning") if isinstance(msg.get("reasoning"), str) else None
    # Kept on the history message, so the next prompts hold the turn as it was sampled: the
    # reasoning (templates that keep it, e.g. Qwen3 after the last user query, render it back
    # rather than dropping it) and the local server's `sampled` form (it renders that message
    # as exactly those tokens; only that server returns it, so only it is sent it back).
    if reasoning:
        message["reasoning_content"] = reasoning
    if isinstance(msg.get("sampled"), dict):
        message["sampled"] = msg["sampled"]
    return ChatReply(
        message=message,
        finish_reason=choice.get("finish_reason") or "",
        latency_s=latency_s,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        prompt_token_ids=data.get("prompt_token_ids") or choice.get("prompt_token_ids"),
        completion_token_ids=choice.get("token_ids"),
        logprobs=logprobs,
        raw_tool_calls=tool_calls,
        reasoning_content=reasoning or None,
        stop_reason=_stop_reason(choice.get("stop_reason")),
    )


def _stop_reason(value: Any) -> int | str | None:
    if isinstance(value, bool):
        return None
    return value if isinstance(value, (int, str)) else None


def chat_token_counter(
    tokenizer_dir: str | Path, tools: list[dict[str, Any]] | None = None
) -> Callable[[list[dict[str, Any]]], int]:
    """An exact prompt-size counter from the served model's own tokenizer and chat template.

    Gives the agent loop's token budget exact numbers instead of a chars-per-token estimate.
    Offline only (`local_files_only`); calls are serialised because a Rust tokenizer shared
    between threads can refuse concurrent use."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise LLMError(
            "bad_response",
            f"cannot load a tokenizer from {tokenizer_dir}: {exc}; pass the served model's folder",
        ) from exc
    lock = threading.Lock()

    def count(messages: list[dict[str, Any]]) -> int:
        with lock:
            out = tok.apply_chat_template(
                messages, tools=tools, add_generation_prompt=True, tokenize=True
            )
        ids = out["input_ids"] if isinstance(out, Mapping) else out
        return len(ids)

    return count


# A chat function takes OpenAI-format messages and returns the assistant's text. It raises
# LLMError when the server gives no usable reply. Core logic depends only on this callable.
ChatFn = Callable[[list[dict[str, Any]]], str]


def endpoint_chat(
    endpoint: LLMEndpoint, *, max_tokens: int = 400, temperature: float = 0.0
) -> ChatFn:
    """A ChatFn over an OpenAI-compatible endpoint (harness.llm), text in, text out."""
    client = make_client(endpoint)

    def _chat(messages: list[dict[str, Any]]) -> str:
        reply = chat(
            client,
            endpoint.model,
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            want_token_ids=False,
        )
        return str(reply.message.get("content") or "")

    return _chat


def circuit_breaker(chat_fn: ChatFn, max_consecutive_errors: int = 3) -> ChatFn:
    """Wrap a ChatFn so that after N endpoint errors in a row every call fails at once.

    A stalled server would otherwise cost one request timeout per failed episode; once the breaker
    opens, the remaining summaries go straight to the heuristic fallback with the reason.
    """
    state = {"errors": 0, "last": ""}
    lock = threading.Lock()

    def _chat(messages: list[dict[str, Any]]) -> str:
        with lock:
            if state["errors"] >= max_consecutive_errors:
                raise LLMError(
                    "connection",
                    f"skipped: {state['errors']} endpoint errors in a row (last: {state['last'][:200]})",
                )
        try:
            reply = chat_fn(messages)
        except LLMError as exc:
            with lock:
                state["errors"] += 1
                state["last"] = str(exc)
            raise
        with lock:
            state["errors"] = 0
        return reply

    return _chat
