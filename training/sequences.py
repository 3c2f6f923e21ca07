"""Turn one recorded episode into token sequences with an action mask (what the policy sampled).

Training must see exactly what the policy saw and produced. Each assistant turn t is a pair
(prompt ids P_t, completion ids C_t): taken from the rollout record when the server returned token
ids (vLLM), else rebuilt by rendering the chat with the model's own template (prompt = history with
the generation prompt; completion = the assistant message as the template writes it, through its
end-of-turn token). Consecutive turns are chained into one sequence while the next prompt extends
the previous prompt + completion token for token (the prefix property); where it breaks (a template
that rewrites history, e.g. Qwen3 dropping empty think blocks; a re-tokenisation that differs from
the sampled ids; context truncation) a new sequence starts. So every sequence is a context the
policy really had, and `action_mask` is 1 on sampled tokens only: assistant text, tool-call JSON and
the end-of-turn token, never system, user or tool-observation tokens.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Turn:
    """One assistant turn as token ids; `logprobs` are the sampler's, one per completion token."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    source: str  # recorded | rendered


@dataclass
class TokenSample:
    """One training sequence: ids, 1/0 action mask, sampling logprobs (NaN where unknown)."""

    input_ids: list[int]
    action_mask: list[int]
    old_logprobs: list[float]
    episode_id: str = ""
    task_id: str = ""
    reward: float = 0.0
    advantage: float = 0.0
    sources: list[str] = field(default_factory=list)

    @property
    def n_action_tokens(self) -> int:
        return sum(self.action_mask)


@dataclass
class EncodeReport:
    """Why turns or sequences were left out, counted, so the stage can record it."""

    turns_recorded: int = 0
    turns_rendered: int = 0
    turns_skipped: int = 0
    prefix_breaks: int = 0
    truncated: int = 0
    dropped_empty: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, other: EncodeReport) -> None:
        for name in ("turns_recorded", "turns_rendered", "turns_skipped", "prefix_breaks"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.truncated += other.truncated
        self.dropped_empty += other.dropped_empty
        self.notes.extend(other.notes[: max(0, 20 - len(self.notes))])


def chain_turns(turns: list[Turn]) -> tuple[list[TokenSample], int]:
    """Chain turns into as few sequences as the prefix property allows; returns (samples, breaks)."""
    samples: list[TokenSample] = []
    breaks = 0
    cur: TokenSample | None = None
    for turn in turns:
        extends = (
            cur is not None
            and len(turn.prompt_ids) >= len(cur.input_ids)
            and turn.prompt_ids[: len(cur.input_ids)] == cur.input_ids
        )
        if cur is not None and not extends:
            breaks += 1
        if not extends:
            cur = TokenSample(input_ids=[], action_mask=[], old_logprobs=[])
            samples.append(cur)
        new_prompt = turn.prompt_ids[len(cur.input_ids) :]
        cur.input_ids += new_prompt + turn.completion_ids
        cur.action_mask += [0] * len(new_prompt) + [1] * len(turn.completion_ids)
        lps = turn.logprobs if turn.logprobs is not None else [math.nan] * len(turn.completion_ids)
        cur.old_logprobs += [math.nan] * len(new_prompt) + [float(x) for x in lps]
        cur.sources.append(turn.source)
    return samples, breaks


def _loads(text: Any, default: Any) -> Any:
    if text is None or (isinstance(text, float) and math.isnan(text)) or text == "":
        return default
    if isinstance(text, str):
        return json.loads(text)
    return text


def _render(tokenizer, messages: list[dict], tools: list[dict] | None, gen: bool) -> str:
    return tokenizer.apply_chat_template(
        messages, tools=tools or None, add_generation_prompt=gen, tokenize=False
    )


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def render_turn(
    tokenizer, messages: list[dict], index: int, tools: list[dict] | None
) -> Turn | str:
    """Rebuild assistant message `index` as (prompt, completion) ids; a string says why it can't."""
    prompt_text = _render(tokenizer, messages[:index], tools, gen=True)
    full_text = _render(tokenizer, messages[: index + 1], tools, gen=False)
    if not full_text.startswith(prompt_text):
        return f"turn {index}: the template does not render the history as a prefix of the turn"
    completion = full_text[len(prompt_text) :]
    # The template closes a turn with eos plus a newline; the policy stopped at eos.
    eos = tokenizer.eos_token
    if eos and eos in completion:
        completion = completion[: completion.rindex(eos) + len(eos)]
    if not completion:
        return f"turn {index}: the assistant message renders to no text"
    # Tokenised apart, as the server did: it tokenised the prompt, then sampled the completion.
    return Turn(_ids(tokenizer, prompt_text), _ids(tokenizer, completion), None, "rendered")


def _recorded_turn(rec: dict) -> Turn | None:
    prompt, completion = rec.get("prompt_token_ids"), rec.get("completion_token_ids")
    if rec.get("needs_retokenize") or not prompt or not completion:
        return None
    lps = rec.get("logprobs")
    if lps is not None and len(lps) != len(completion):
        lps = None  # a logprob list that does not line up with the tokens cannot be trusted
    if lps is not None:
        lps = [float(x) if isinstance(x, (int, float)) else float(x.get("logprob")) for x in lps]
    return Turn(list(prompt), list(completion), lps, "recorded")


def episode_turns(
    tokenizer, messages: list[dict], tools: list[dict] | None, turns: list[dict], use_recorded: bool
) -> tuple[list[Turn], EncodeReport]:
    """Every assistant turn of an episode as token ids: recorded where possible, else rendered."""
    report = EncodeReport()
    assistant_idx = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if use_recorded and turns and len(turns) != len(assistant_idx):
        report.notes.append(
            f"{len(turns)} recorded turns for {len(assistant_idx)} assistant messages: re-rendered"
        )
        turns = []
    out: list[Turn] = []
    for k, idx in enumerate(assistant_idx):
        turn = _recorded_turn(turns[k]) if use_recorded and turns else None
        if turn is not None:
            report.turns_recorded += 1
            out.append(turn)
            continue
        rendered = render_turn(tokenizer, messages, idx, tools)
        if isinstance(rendered, str):
            report.turns_skipped += 1
            report.notes.append(rendered)
            continue
        report.turns_rendered += 1
        out.append(rendered)
    return out, report


def truncate(sample: TokenSample, max_len: int) -> TokenSample | None:
    """Cut at the right end to `max_len`; None when no action token survives."""
    if len(sample.input_ids) > max_len:
        sample.input_ids = sample.input_ids[:max_len]
        sample.action_mask = sample.action_mask[:max_len]
        sample.old_logprobs = sample.old_logprobs[:max_len]
    # Position 0 has no prediction, so an action token there cannot be trained.
    if sum(sample.action_mask[1:]) == 0:
        return None
    return sample


def encode_episode(
    tokenizer, row: dict, max_len: int, use_recorded: bool = True
) -> tuple[list[TokenSample], EncodeReport]:
    """One trajectory row (TRAJECTORIES schema) -> training sequences + what was left out."""
    messages = _loads(row.get("messages_json"), [])
    tools = _loads(row.get("tools_json"), None)
    turns_meta = _loads(row.get("turns_json"), [])
    turns, report = episode_turns(tokenizer, messages, tools, turns_meta, use_recorded)
    chained, breaks = chain_turns(turns)
    report.prefix_breaks += breaks
    samples: list[TokenSample] = []
    for s in chained:
        was_long = len(s.input_ids) > max_len
        kept = truncate(s, max_len)
        report.truncated += int(was_long)
        if kept is None:
            report.dropped_empty += 1
            continue
        kept.episode_id = str(row.get("episode_id", ""))
        kept.task_id = str(row.get("task_id", ""))
        kept.reward = float(row.get("reward") or 0.0)
        samples.append(kept)
    return samples, report
