"""A small OpenAI-compatible policy server for the local (CPU) profile that returns what vLLM does:
the prompt's token ids, the sampled token ids and each sampled token's logprob.

    python -m clawloop.harness.local_server MODEL_DIR --port 8000 [--host 127.0.0.1]
        [--served-model-name NAME] [--seed 0] [--max-model-len N]

Why not `transformers serve`: it refuses `logprobs` and `return_token_ids` (HTTP 422), so every
local turn had to be retrained from text and GRPO had no sampling logprobs (checked against
transformers 5.24; llama-cpp-python has no wheel on our registries and needs a long compile).

Routes
- `GET /health`, `GET /v1/models` (one entry: `id` = the served name, `root` = the model folder,
  `max_model_len`).
- `POST /v1/chat/completions`, non-streaming, one choice:
  - the prompt is `messages` (and `tools`, when given) rendered by the model's own chat template
    with the generation prompt, then tokenised without added special tokens: the same text and ids
    training renders (`training/sequences.py`), so a turn's ids are the context it was sampled in;
  - sampling is a plain loop over the model with its KV cache: `temperature` (default 1.0; 0 =
    greedy), optional `top_p`, `max_tokens` / `max_completion_tokens` (default: the room left in
    the context), optional `seed` (else the server's own generator, seeded by `--seed`). Nothing
    else reshapes the distribution (no top-k, no repetition penalty). The loop stops at an end-of-turn
    id (training's one list, `training.sequences.end_of_turn_ids`: the template's, e.g.
    `<|im_end|>`, eos, generation_config's eos: `finish_reason` "stop", the id is part of
    `token_ids` and is the choice's `stop_reason`, as vLLM returns them) or after max_tokens
    (`finish_reason` "length");
  - `return_token_ids: true` adds `prompt_token_ids` (top level) and `token_ids` (per choice);
    `logprobs: true` adds `logprobs.content` (`token`, `logprob`, `bytes`, `top_logprobs: []`),
    one entry per sampled id. The logprobs are the model's own log-softmax at temperature 1 with
    no top_p, whatever the request sampled with (vLLM's default `--logprobs-mode raw_logprobs`):
    what training computes, so GRPO's ratio starts at 1 at any sampling temperature;
  - tool calls (only when the request offers `tools`): hermes-style `<tool_call>{json}</tool_call>`
    blocks in the sampled text are parsed with the agent's own parser (`harness.toolcalls`) into
    native `tool_calls` (arguments as a JSON string), the prose left as `content`, as vLLM's
    hermes parser does. If any block is not valid JSON the whole text stays the content and no
    call is returned, so the agent shows the model its parse error (transformers serve answered
    500 there);
  - reasoning: when the chat template has think blocks (`</think>`), a sampled
    `<think>...</think>` is split off into `reasoning_content` (partitioned at the tags, the
    whitespace kept, as vLLM's qwen3 reasoning parser does), the rest is the content;
  - history as sampled: the reply's message carries `sampled` (the sampled ids, stop id
    included, when the request asked for token ids; else `text`, the exact sampled text with its
    reasoning, tool calls and special tokens, and `stop_id`). The agent keeps it on the history
    message, and an assistant message that carries it is rendered as exactly those tokens
    (`training.sequences.sampled_history_prompt`: the template renders everything else and the
    sampled ids are spliced in where it would have re-rendered the reply), so a template that
    strips earlier think blocks (Qwen3's) or re-serialises parsed tool calls, or a sample that
    is not the tokenizer's own tokenisation, no longer changes the next prompt: each prompt
    extends the previous prompt + completion, and training chains an episode into one sequence.
    A `sampled` field the server cannot render is answered 400;
  - `usage` counts the prompt and completion ids; a prompt that with max_tokens overflows
    `max_model_len` is answered 400 "maximum context length ..." (the client's context_full);
    `stream: true` or `n` > 1 are answered 400; other fields are ignored.

Requests are served one at a time (a lock around the model): on CPU concurrent forward passes only
share the same cores. The server is meant for loopback (`harness.serve.local_policy_server`
starts it on 127.0.0.1 on a free port).
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

log = logging.getLogger("clawloop.local_server")

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class RequestError(ValueError):
    """A request the server cannot answer as asked (HTTP 400, OpenAI error shape)."""


@dataclass
class Sample:
    """One completion: the sampled ids (stop id included) and the logprob of each."""

    prompt_ids: list[int]
    ids: list[int]
    logprobs: list[float]
    finish_reason: str  # stop | length


class LocalPolicy:
    """A model folder loaded for sampling: the tokenizer, the chat template, the stop ids."""

    def __init__(self, model_dir: str | Path, seed: int = 0, max_model_len: int | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from clawloop.training.sequences import end_of_turn_ids

        self.model_dir = Path(model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir), local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(
            str(self.model_dir), local_files_only=True, dtype=torch.float32
        )
        self.model.eval()
        # transformers >= 5.x names the KV cache `cache`; older releases `past_key_values`
        params = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        # training's one list of stop ids (the template's end, eos, generation_config's eos):
        # the server stops where training says a turn ends, so no stop id is ever "missing"
        self.stop_ids = set(end_of_turn_ids(self.tokenizer)[1])
        template = self.tokenizer.chat_template
        self.has_reasoning = isinstance(template, str) and THINK_CLOSE in template
        self.max_model_len = int(
            max_model_len or getattr(self.model.config, "max_position_embeddings", 0) or 4096
        )
        self.generator = torch.Generator().manual_seed(seed)
        self._warned_unspliced = False
        self.lock = threading.Lock()

    # -- prompt ----------------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict] | None) -> list[int]:
        """The chat template's rendering with the generation prompt, tokenised as training does."""
        if not isinstance(messages, list) or not messages:
            raise RequestError("'messages' must be a non-empty list")
        from clawloop.training.sequences import (
            SAMPLED_KEY,
            ChatTemplateError,
            generation_prompt_ids,
            sampled_form_ids,
        )

        forms = [m.get(SAMPLED_KEY) for m in messages if isinstance(m, dict)]
        forms = [f for f in forms if f is not None]
        if any(sampled_form_ids(self.tokenizer, f) is None for f in forms):
            raise RequestError(
                f"an assistant message's '{SAMPLED_KEY}' field is malformed (send it back as "
                "this server returned it: token_ids, or text and stop_id; or leave it out to "
                "have the chat template render the reply)"
            )
        vocab = len(self.tokenizer)
        if any(not 0 <= i < vocab for f in forms for i in f.get("token_ids") or []):
            raise RequestError(f"a '{SAMPLED_KEY}' token id is outside the vocabulary")
        try:
            ids, spliced = generation_prompt_ids(self.tokenizer, messages, tools)
        except ChatTemplateError as exc:
            raise RequestError(str(exc)) from exc
        if forms and not spliced and not self._warned_unspliced:
            # a template whose history header differs from its generation prompt (e.g. one that
            # opens <think> in the prompt): the template renders the history, as training does
            self._warned_unspliced = True
            log.warning(
                "this chat template cannot render earlier replies as sampled; it re-renders "
                "them, so training starts a new sequence where the history changed"
            )
        return ids

    # -- sampling --------------------------------------------------------------------------
    def sample(
        self,
        prompt_ids: list[int],
        max_tokens: int,
        temperature: float,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> Sample:
        """Sample up to `max_tokens` ids after `prompt_ids` (drawn after temperature and top_p);
        each id's logprob under the model's untempered distribution (vLLM's raw_logprobs)."""
        import torch

        gen = self.generator if seed is None else torch.Generator().manual_seed(int(seed))
        ids: list[int] = []
        lps: list[float] = []
        finish = "length"
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
            for _ in range(max_tokens):
                logits = out.logits[0, -1].float()
                # recorded: the model's own distribution (temperature 1, no top_p), what training
                # computes, so GRPO's first ratio is 1 whatever the sampling settings were
                raw = torch.log_softmax(logits, -1)
                if temperature > 0:
                    logp = torch.log_softmax(logits / temperature, -1)
                    if top_p < 1.0:
                        logp = _nucleus(logp, top_p)
                    tok = int(torch.multinomial(logp.exp(), 1, generator=gen))
                else:
                    tok = int(torch.argmax(raw))
                ids.append(tok)
                lps.append(float(raw[tok]))
                if tok in self.stop_ids:
                    finish = "stop"
                    break
                cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
                out = self.model(
                    input_ids=torch.tensor([[tok]]), use_cache=True, **{self._cache_arg: cache}
                )
        return Sample(list(prompt_ids), ids, lps, finish)

    # -- the response ----------------------------------------------------------------------
    def complete(self, body: dict[str, Any], served_name: str) -> dict[str, Any]:
        """A chat-completion request body -> the response body (vLLM's shape)."""
        if body.get("stream"):
            raise RequestError("stream: true is not supported by this server")
        if int(body.get("n") or 1) != 1:
            raise RequestError("only n = 1 is supported by this server")
        tools = body.get("tools") or None
        prompt = self.prompt_ids(body.get("messages"), tools)
        room = self.max_model_len - len(prompt)
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        max_tokens = int(asked) if asked is not None else room
        if max_tokens < 1:
            raise RequestError(f"max_tokens must be at least 1, got {max_tokens}")
        if len(prompt) + max_tokens > self.max_model_len:
            raise RequestError(
                f"This model's maximum context length is {self.max_model_len} tokens. However, "
                f"you requested {len(prompt) + max_tokens} tokens ({len(prompt)} in the messages, "
                f"{max_tokens} in the completion)."
            )
        temperature = float(body["temperature"]) if body.get("temperature") is not None else 1.0
        top_p = float(body["top_p"]) if body.get("top_p") is not None else 1.0
        if temperature < 0 or not 0 < top_p <= 1:
            raise RequestError("temperature must be >= 0 and top_p in (0, 1]")
        with self.lock:
            s = self.sample(prompt, max_tokens, temperature, top_p, body.get("seed"))
        body_ids = s.ids[:-1] if s.finish_reason == "stop" else s.ids
        text = self.tokenizer.decode(body_ids, skip_special_tokens=True)
        message = self.message(text, bool(tools))
        # what the client sends back on this assistant message for the next turns' prompts to
        # hold it exactly as sampled: the ids when the client asked for ids, else the exact text
        # (special tokens kept) and the stop id sampled
        stop = s.ids[-1] if s.finish_reason == "stop" else None
        message["sampled"] = (
            {"token_ids": list(s.ids)}
            if body.get("return_token_ids")
            else {"text": self.tokenizer.decode(body_ids), "stop_id": stop}
        )
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls"
            if message.get("tool_calls") and s.finish_reason == "stop"
            else s.finish_reason,
            "logprobs": None,
            # vLLM's field: the stop id that ended the reply (None when it was cut), so a client
            # without token ids still knows which end-of-turn id was sampled
            "stop_reason": stop,
        }
        response: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served_name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(s.ids),
                "total_tokens": len(prompt) + len(s.ids),
            },
        }
        if body.get("return_token_ids"):
            response["prompt_token_ids"] = s.prompt_ids
            choice["token_ids"] = s.ids
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    self._logprob_entry(t, lp) for t, lp in zip(s.ids, s.logprobs, strict=True)
                ]
            }
        return response

    def _logprob_entry(self, tok: int, logprob: float) -> dict[str, Any]:
        text = self.tokenizer.decode([tok])
        return {"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": []}

    def message(self, text: str, parse_tools: bool) -> dict[str, Any]:
        """The assistant message of a sampled text: reasoning split off, tool calls parsed."""
        return assistant_message(text, self.has_reasoning, parse_tools)


def assistant_message(text: str, has_reasoning: bool, parse_tools: bool) -> dict[str, Any]:
    """The assistant message of a sampled text (special tokens skipped): a `<think>` block split
    off into `reasoning_content` when the template has them, hermes tool calls parsed into
    native `tool_calls` (the prose left as content), as vLLM's parsers do."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if has_reasoning and THINK_CLOSE in text:
        before, _, content = text.partition(THINK_CLOSE)
        head, opened, after = before.partition(THINK_OPEN)
        message["reasoning_content"] = after if opened and not head.strip() else before
        message["content"] = content
    if parse_tools:
        calls = hermes_tool_calls(message["content"])
        if calls is not None:
            message["tool_calls"], message["content"] = calls
    if not message["content"] and message.get("tool_calls"):
        message["content"] = None
    return message


def hermes_tool_calls(text: str) -> tuple[list[dict[str, Any]], str] | None:
    """(native tool calls, remaining prose) of a text with `<tool_call>` blocks, all valid; None
    when it has none or any is malformed (then the text is the content, as sampled)."""
    from clawloop.harness.toolcalls import native_tool_call, parse_tool_calls

    if "<tool_call>" not in text:  # only the tagged form, as vLLM's hermes parser
        return None
    parsed = parse_tool_calls(text)
    if parsed.errors or not parsed.calls:
        return None
    return [
        native_tool_call(c, f"call_{uuid.uuid4().hex[:12]}") for c in parsed.calls
    ], parsed.content


def _nucleus(logp, top_p: float):
    """Log-probabilities renormalised over the smallest set of ids whose mass reaches top_p."""
    import torch

    sorted_lp, order = torch.sort(logp, descending=True)
    mass = sorted_lp.exp().cumsum(-1)
    drop = mass - sorted_lp.exp() >= top_p  # ids after the nucleus is full
    sorted_lp = sorted_lp.masked_fill(drop, float("-inf"))
    kept = torch.full_like(logp, float("-inf")).scatter(0, order, sorted_lp)
    return torch.log_softmax(kept, -1)


def make_server(policy: LocalPolicy, host: str, port: int, served_name: str) -> ThreadingHTTPServer:
    """An HTTP server answering the routes above for `policy` (call `serve_forever`)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str) -> None:
            self._send(status, {"error": {"message": message, "type": kind, "code": status}})

        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok"})
            elif path in ("/v1/models", "/models"):
                entry = {
                    "id": served_name,
                    "object": "model",
                    "owned_by": "clawloop",
                    "root": str(policy.model_dir),
                    "max_model_len": policy.max_model_len,
                }
                self._send(200, {"object": "list", "data": [entry]})
            else:
                self._error(404, f"no route {self.path}", "not_found")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError as exc:
                self._error(400, f"the body is not JSON: {exc}", "invalid_request_error")
                return
            if self.path.split("?")[0].rstrip("/") not in (
                "/v1/chat/completions",
                "/chat/completions",
            ):
                self._error(404, f"no route {self.path}", "not_found")
                return
            if not isinstance(body, dict):
                self._error(400, "the body must be a JSON object", "invalid_request_error")
                return
            try:
                self._send(200, policy.complete(body, served_name))
            except RequestError as exc:
                self._error(400, str(exc), "invalid_request_error")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up
            except Exception as exc:  # a bug or a model fault: say so, keep serving
                log.exception("chat completion failed")
                self._error(500, f"{type(exc).__name__}: {exc}", "server_error")

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clawloop.harness.local_server", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("model_dir", help="a model folder (config.json, weights, tokenizer)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default="", help="default: the model folder path")
    parser.add_argument("--seed", type=int, default=0, help="seed of the server's sampler")
    parser.add_argument("--max-model-len", type=int, default=0, help="default: the model's")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    policy = LocalPolicy(args.model_dir, args.seed, args.max_model_len or None)
    name = args.served_model_name or str(args.model_dir)
    server = make_server(policy, args.host, args.port, name)
    print(f"serving {args.model_dir} as {name!r} on http://{args.host}:{args.port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
