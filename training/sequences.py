"""Turn one recorded episode into token sequences with an action mask (what the policy sampled).

Training must see exactly what the policy saw and produced. Each assistant turn t is a pair
(prompt ids P_t, completion ids C_t), and C_t is always what the policy sampled, never a chat
template's re-rendering of the reply:

- **from ids** (vLLM, the local profile's harness/local_server.py): the server returned the prompt and completion token ids; used as they are,
  with the sampler's logprobs when their count matches the completion.
- **from text** (transformers serve, any OpenAI-compatible server without token ids): C_t is the
  tokenisation of the exact sampled text — the turn record's `raw_content` (the reply's content
  before any tool call was parsed out of it), with a reasoning parser's `reasoning_content` put
  back in front — followed by the end-of-turn id when the model stopped (not when it was cut at
  max_tokens). P_t is the recorded prompt (ids, else text) when the record holds one, else the
  chat template's rendering of the history with the episode's real tool schemas and the generation
  prompt: what the server itself rendered and tokenised before sampling.
- **dropped**: a turn whose sampled text is unknown (the server parsed native tool calls out of the
  sample and returned no token ids), or whose prompt the template cannot render. Counted, with the
  reason in the notes, never silently re-rendered.

Consecutive turns are chained into one sequence while the next prompt extends the previous prompt +
completion token for token (the prefix property); where it breaks (a template that rewrites
history, e.g. Qwen3 dropping think blocks; a re-tokenisation that differs from the sampled ids;
context truncation) a new sequence starts.

The prefix holds by construction where the history carries each earlier turn as sampled: the local
server (harness/local_server.py) answers with a `sampled` field on its message (the turn's sampled
ids when token ids were asked for, else its exact text and stop id), the agent keeps it on the
history message, and the server renders every assistant message that has one as exactly those
tokens (`sampled_history_prompt`: the chat template renders the rest, the sampled ids are spliced
in where the template would have put the re-rendered reply). So a Qwen3 template's stripping of
earlier think blocks, a tool call re-serialised from its parsed form or a non-canonical sampled
tokenisation no longer change the next prompt, and an episode is one sequence. On the text path
training renders the prompt the same way from the same `sampled` fields.

So every sequence is a context the policy really had, and `action_mask` is 1 on sampled tokens
only: reasoning, assistant text, tool-call text and the end-of-turn token, never system, user or
tool-observation tokens.

Turns sampled under a grammar (`rollout.tool_choice: required`: vLLM's structured outputs; the
record says `logprobs_constrained`) carry logprobs that are not the model's: vLLM applies the
grammar's token bitmask to the logits before its sampler computes any logprobs (every
`--logprobs-mode`), so each is log p - log Z, Z the mass of the tokens the grammar allowed (0 for
a token it forced). Their `old_logprobs` are NaN here (GRPO takes the rollout policy's own, from
the trainer, as for a server that recorded none) and the tokens the grammar forced (recorded
logprob exactly 0: the only token allowed) are listed in `TokenSample.forced`: the policy made no
choice there, so GRPO leaves them out of its loss (`grpo.grpo_samples`); SFT trains them.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CUT_REASONS = ("length",)  # finish reasons of a reply cut before the model ended its turn

# The agent's tool-call parser, passed in (training does not import harness): text ->
# (calls with `.name` and `.arguments` (a dict or a JSON string), errors, the remaining prose).
ToolCallParser = Callable[[str], tuple[list[Any], list[str], str]]


@dataclass
class Turn:
    """One assistant turn as token ids; `logprobs` are the sampler's, one per completion token."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    source: str  # ids | text
    # sampled under a grammar: `logprobs` renormalised over the allowed tokens (module docstring)
    constrained: bool = False


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
    # [start, end) of each turn's completion in input_ids, as chained (before truncation)
    spans: list[tuple[int, int]] = field(default_factory=list)
    # GRPO with KL: the phase's start model's logprobs (the reference), NaN where unknown; filled
    # once before the first step (grpo.freeze_old_logprobs), empty otherwise.
    ref_logprobs: list[float] = field(default_factory=list)
    # 1 where the server recorded the sampling logprob, 0 where it was computed (frozen) before
    # the first step; set by the pass that fills them, empty before (then: finite = recorded)
    recorded: list[int] = field(default_factory=list)
    # train.tis_cap: the trainer's own logprobs of the rollout policy (NaN off the action
    # tokens), filled once before the first step; the ratio's reference where they exist and,
    # against the recorded ones, the truncated importance weight. Empty when tis_cap is off.
    trainer_logprobs: list[float] = field(default_factory=list)
    # positions (into input_ids) of tokens a grammar forced: the sampler's only allowed token
    forced: list[int] = field(default_factory=list)

    @property
    def n_action_tokens(self) -> int:
        return sum(self.action_mask)


@dataclass
class EncodeReport:
    """Which path every turn took, and what was left out or could not be trusted, counted."""

    turns_from_ids: int = 0  # completion = the server's sampled token ids
    turns_from_text: int = 0  # completion = tokenisation of the exact sampled text
    turns_from_template: int = 0  # sampled text unknown: the template's rendering, round-tripped
    turns_dropped: int = 0  # sampled text unknown or prompt not renderable (see notes)
    prompts_from_record: int = 0  # text turns whose prompt came from recorded ids/text
    prompts_without_tools: int = 0  # template prompts that do not show the offered tools
    logprobs_missing: int = 0  # id turns the server gave no logprobs for (frozen by GRPO)
    logprobs_mismatched: int = 0  # id turns whose logprob count differs from the completion's
    # id turns sampled under a grammar (tool_choice required): their logprobs are not the
    # model's, so GRPO freezes the rollout policy's own; and the tokens the grammar forced
    logprobs_constrained: int = 0
    forced_tokens: int = 0
    eos_missing: int = 0  # completions of a stopped reply not ending with the end-of-turn id
    completions_cut: int = 0  # replies cut at max_tokens: trained without an end-of-turn id
    prefix_breaks: int = 0
    truncated: int = 0  # chained sequences longer than max_seq_len (split or cut to fit)
    dropped_empty: int = 0
    # what fitting max_seq_len cost: prompts cut from the left (oldest context dropped, the
    # completion kept), turns whose completion lost every token / some tokens (only one longer
    # than max_seq_len by itself), and the supervised (action) tokens lost out of all the
    # phase's supervised tokens before the cut
    prompts_cut_left: int = 0
    turns_cut_away: int = 0
    turns_cut_partly: int = 0
    action_tokens: int = 0
    action_tokens_lost: int = 0
    longest_sequence: int = 0  # the longest chained sequence before the cut (a max, not a sum)
    longest_completion: int = 0  # the longest single completion (a max): max_seq_len must exceed it
    notes: list[str] = field(default_factory=list)

    def add(self, other: EncodeReport) -> None:
        for f in fields(self):
            if f.name in ("longest_sequence", "longest_completion"):
                setattr(self, f.name, max(getattr(self, f.name), getattr(other, f.name)))
            elif f.name != "notes":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        self.notes.extend(other.notes[: max(0, 20 - len(self.notes))])

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "notes"}


def chain_turns(turns: list[Turn], max_len: int | None = None) -> tuple[list[TokenSample], int]:
    """Chain turns into as few sequences as the prefix property allows; returns (samples, breaks).
    With `max_len`, a turn that would grow the sequence past it starts a new one (from its own
    prompt; not counted as a break)."""
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
        if (
            extends
            and max_len is not None
            and len(turn.prompt_ids) + len(turn.completion_ids) > max_len
        ):
            extends = False  # too long to chain: a new sequence from the turn's own prompt
        if not extends:
            cur = TokenSample(input_ids=[], action_mask=[], old_logprobs=[])
            samples.append(cur)
        new_prompt = turn.prompt_ids[len(cur.input_ids) :]
        start = len(cur.input_ids) + len(new_prompt)
        cur.spans.append((start, start + len(turn.completion_ids)))
        cur.input_ids += new_prompt + turn.completion_ids
        cur.action_mask += [0] * len(new_prompt) + [1] * len(turn.completion_ids)
        lps = turn.logprobs if turn.logprobs is not None else [math.nan] * len(turn.completion_ids)
        if turn.constrained:  # renormalised by the grammar: unknown as the model's logprobs
            cur.forced += [start + k for k, x in enumerate(lps) if x == 0.0]
            lps = [math.nan] * len(turn.completion_ids)
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


def end_of_turn_ids(tokenizer) -> tuple[int, set[int]]:
    """(the id the template closes an assistant turn with, every id that ends a turn).

    The one list of stop ids: the local policy server stops sampling at exactly these, and
    training counts a completion as ended by any of them. Found from the template itself (the
    first token after a rendered assistant message), so `<|im_end|>`-style templates and eos-only
    ones both work; the tokenizer's eos and the model folder's generation_config.json
    `eos_token_id` (what vLLM and transformers also stop at, e.g. `<|endoftext|>` beside
    `<|im_end|>`) always count as ends."""
    cached = getattr(tokenizer, "_clawloop_end_ids", None)
    if cached is not None:
        return cached
    ends = {tokenizer.eos_token_id} - {None}
    eot = tokenizer.eos_token_id
    marker = "clawloop-end-marker"
    try:
        text = _render(
            tokenizer,
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": marker}],
            None,
            gen=False,
        )
        after = text[text.rindex(marker) + len(marker) :]
        special = set(getattr(tokenizer, "all_special_ids", []))
        special |= set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        first = _ids(tokenizer, after)[:1]
        if first and first[0] in special:
            eot = first[0]
    except Exception:  # a template that cannot render a plain exchange: eos is the end
        pass
    if eot is not None:
        ends.add(eot)
    ends |= _generation_eos(tokenizer)
    result = (eot, ends)
    with contextlib.suppress(AttributeError):  # a tokenizer that refuses attributes: no cache
        tokenizer._clawloop_end_ids = result
    return result


def _generation_eos(tokenizer) -> set[int]:
    """The eos ids of the generation_config.json beside the tokenizer's files, if there is one."""
    folder = getattr(tokenizer, "name_or_path", "") or ""
    path = Path(folder) / "generation_config.json" if folder else None
    if path is None or not path.is_file():
        return set()
    try:
        eos = json.loads(path.read_text()).get("eos_token_id")
    except (OSError, ValueError):  # an unreadable file: the tokenizer's own ends
        return set()
    eos = eos if isinstance(eos, list) else [eos]
    return {int(e) for e in eos if isinstance(e, int)}


def sampled_stop_id(rec: dict, ends: set[int]) -> int | None:
    """The end-of-turn id the server says it stopped at (vLLM's `stop_reason`, an int when a stop
    id other than the tokenizer's eos ended the reply), when it is one of ours."""
    stop = rec.get("stop_reason")
    if isinstance(stop, bool) or not isinstance(stop, int):
        return None
    return stop if stop in ends else None


def _reasoned(reasoning: str, content: str, prompt_text: str) -> str:
    """The sampled text a reasoning parser split into (reasoning, content), put back together.

    Parsers that partition at the tags (vLLM's) keep the whitespace, so `<think>` + reasoning +
    `</think>` + content is the sample exactly; a parser that stripped both parts gets the
    template convention `<think>\\n...\\n</think>\\n\\n`. A prompt that already opens the think
    block (thinking-only templates) means the model did not sample `<think>` itself."""
    if reasoning[:1] == "\n" or content[:1] == "\n":  # kept as sampled
        body = reasoning + THINK_CLOSE + content
    else:  # both parts stripped: the template's whitespace
        body = "\n" + reasoning.strip("\n") + "\n" + THINK_CLOSE + "\n\n" + content.lstrip("\n")
    if prompt_text.rstrip("\n").endswith(THINK_OPEN):
        return body[1:] if prompt_text.endswith("\n") and body[:1] == "\n" else body
    return THINK_OPEN + body


def sampled_text(rec: dict, message: dict) -> str | None:
    """The exact text the policy sampled for one turn (reasoning not included), or None when it
    is unknown: the server parsed native tool calls out of the sample and kept no raw text."""
    if "tool_calls_native" in rec:  # current records: raw_content is the content as returned
        return None if rec["tool_calls_native"] else str(rec.get("raw_content") or "")
    # older records kept raw_content only when the tool calls were parsed out of the text
    if rec.get("raw_content"):
        return str(rec["raw_content"])
    if message.get("tool_calls"):
        return None  # native calls, or parsed ones whose text was not kept
    return str(message.get("content") or "")


def _logprob_list(rec: dict, n: int, report: EncodeReport) -> list[float] | None:
    lps = rec.get("logprobs")
    if lps is None:
        report.logprobs_missing += 1
        return None
    if len(lps) != n:
        report.logprobs_mismatched += 1
        report.notes.append(
            f"{len(lps)} logprobs for {n} completion tokens: not trusted (GRPO freezes the "
            "phase start model's instead)"
        )
        return None
    return [float(x) if isinstance(x, (int, float)) else float(x.get("logprob")) for x in lps]


def _ids_turn(tokenizer, rec: dict, report: EncodeReport) -> Turn | None:
    """The server's sampled ids, when the record holds both sides."""
    prompt, completion = rec.get("prompt_token_ids"), rec.get("completion_token_ids")
    if not prompt or not completion:
        return None
    _, ends = end_of_turn_ids(tokenizer)
    if completion[-1] not in ends:
        if rec.get("finish_reason") in CUT_REASONS:
            report.completions_cut += 1
        else:
            report.eos_missing += 1
            report.notes.append(
                f"recorded completion of a {rec.get('finish_reason') or 'stopped'} reply does "
                f"not end with an end-of-turn id (last id {completion[-1]}): trained as sampled"
            )
    lps = _logprob_list(rec, len(completion), report)
    constrained = bool(rec.get("logprobs_constrained")) and lps is not None
    if constrained:
        report.logprobs_constrained += 1
        report.forced_tokens += sum(x == 0.0 for x in lps)
    return Turn(list(prompt), list(completion), lps, "ids", constrained)


def _text_prompt(
    tokenizer, rec: dict, messages: list[dict], index: int, tools, report: EncodeReport
) -> tuple[list[int], str] | str:
    """(prompt ids, prompt text) of a text turn, or why there is none."""
    if rec.get("prompt_token_ids"):
        ids = list(rec["prompt_token_ids"])
        report.prompts_from_record += 1
        return ids, tokenizer.decode(ids)
    if isinstance(rec.get("prompt_text"), str) and rec["prompt_text"]:
        report.prompts_from_record += 1
        return _ids(tokenizer, rec["prompt_text"]), rec["prompt_text"]
    spliced = sampled_history_prompt(tokenizer, messages[:index], tools)
    if spliced is not None:  # the server rendered earlier turns as sampled: so does training
        return spliced, tokenizer.decode(spliced)
    try:
        text = _render(tokenizer, messages[:index], tools, gen=True)
    except Exception as exc:  # jinja errors, templates that refuse a role order
        return f"the chat template cannot render the history ({type(exc).__name__}: {exc})"
    names = [str((t.get("function") or t).get("name", "")) for t in tools or []]
    if any(n and n not in text for n in names):
        report.prompts_without_tools += 1
    return _ids(tokenizer, text), text


SAMPLED_KEY = "sampled"  # an assistant message's sampled form, as the local server returns it


def sampled_form_ids(tokenizer, sampled: Any) -> list[int] | None:
    """The ids an assistant message's `sampled` field stands for, or None when it is malformed:
    `{"token_ids": [...]}` as they are (the stop id included), or `{"text": str, "stop_id":
    int | None}` tokenised as the server tokenises a prompt, with the stop id after it (none when
    the reply was cut at max_tokens)."""
    if not isinstance(sampled, dict):
        return None
    ids = sampled.get("token_ids")
    if ids is not None:
        ok = isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids)
        return [int(i) for i in ids] if ok else None
    text, stop = sampled.get("text"), sampled.get("stop_id")
    if not isinstance(text, str) or not (stop is None or isinstance(stop, int)):
        return None
    out = _ids(tokenizer, text) if text else []
    if stop is not None:
        out.append(int(stop))
    return out or None


class ChatTemplateError(ValueError):
    """The chat template refused to render a conversation (a jinja error, a role order)."""


def generation_prompt_ids(
    tokenizer, messages: list[dict], tools: list[dict] | None
) -> tuple[list[int], bool]:
    """(the prompt ids a policy server samples after, whether the sampled history was spliced):
    sampled_history_prompt where an assistant message carries its sampled ids and the template
    allows the splice, else the chat template's rendering with the generation prompt, tokenised
    as training tokenises it. The one prompt path of the token-in client (harness/tokens.py)
    and the local policy server (harness/local_server.py); ChatTemplateError when the template
    cannot render the messages."""
    if any(isinstance(m, dict) and m.get(SAMPLED_KEY) is not None for m in messages):
        spliced = sampled_history_prompt(tokenizer, messages, tools)
        if spliced is not None:
            return spliced, True
    try:
        text = _render(tokenizer, messages, tools, gen=True)
    except Exception as exc:  # jinja errors, a role order the template refuses
        raise ChatTemplateError(f"the chat template cannot render these messages: {exc}") from exc
    return _ids(tokenizer, text), False


def _marker(i: int) -> str:
    return f"clawloop-sampled-turn-{i}-marker"


def sampled_history_prompt(
    tokenizer, messages: list[dict], tools: list[dict] | None
) -> list[int] | None:
    """The prompt ids of `messages` (with the generation prompt), every assistant message that
    carries a `sampled` field rendered as exactly its sampled ids; None when no message carries one
    or the template cannot be spliced (then the plain rendering is the prompt).

    Each such message is rendered by the chat template as a placeholder (its content a marker, no
    reasoning, no tool calls), so the template still writes the roles, the tools, the
    observations and the generation prompt; the text around the markers is tokenised piece by
    piece and the sampled ids take the markers' place. A sampled reply ends with its stop id,
    so the template's end-of-turn right after the marker is the sampled one and is not added
    twice; a reply cut at max_tokens keeps the template's. Refused (None) where the template
    does not open the placeholder with its own generation prompt, or closes it otherwise."""
    known = {
        i: sampled_form_ids(tokenizer, m[SAMPLED_KEY])
        for i, m in enumerate(messages)
        if m.get("role") == "assistant" and m.get(SAMPLED_KEY) is not None
    }
    if not known or any(v is None for v in known.values()):
        return None
    eot, ends = end_of_turn_ids(tokenizer)
    if eot is None:
        return None
    end_text = tokenizer.convert_ids_to_tokens(eot)
    placeheld = [
        {"role": "assistant", "content": _marker(i)} if i in known else m
        for i, m in enumerate(messages)
    ]
    probe = [{"role": "user", "content": "x"}]
    try:
        text = _render(tokenizer, placeheld, tools, gen=True)
        gen_prompt = _render(tokenizer, probe, None, gen=True)[
            len(_render(tokenizer, probe, None, gen=False)) :
        ]
    except Exception:  # a template that refuses the placeholders: the plain rendering
        return None
    ids: list[int] = []
    rest = text
    for i in sorted(known):
        before, found, rest = rest.partition(_marker(i))
        if not found or not gen_prompt or not before.endswith(gen_prompt):
            return None
        sampled = known[i]
        if sampled[-1] in ends:  # the template's end-of-turn is the sampled stop id
            if not rest.startswith(end_text):
                return None
            rest = rest[len(end_text) :]
        ids += _ids(tokenizer, before) + sampled
    return ids + _ids(tokenizer, rest)


UNKNOWN_SAMPLE = (
    "the server parsed the tool calls out of the reply and returned neither token ids "
    "nor the raw text, so what was sampled is unknown (serve with token ids, e.g. vLLM, "
    "or without a tool parser)"
)


def _call_key(name: Any, arguments: Any) -> tuple[str, Any] | None:
    """(name, arguments as an object) of one tool call; None when the arguments are not JSON."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return None
    return str(name), arguments


def template_round_trip(message: dict, rendered: str, parse: ToolCallParser) -> str:
    """ "" when `rendered` (the template's rendering of an assistant message, without its
    end-of-turn) parses back, with the agent's parser, into the message's content and tool calls
    (names and arguments); else what differs."""
    body = rendered
    if THINK_CLOSE in body:  # a template's (empty or kept) think block is not the content
        body = body.split(THINK_CLOSE, 1)[1]
    calls, errors, remaining = parse(body)
    want = [
        _call_key((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
        for c in message.get("tool_calls") or []
    ]
    got = [_call_key(c.name, c.arguments) for c in calls]
    if errors:
        return f"the rendering does not parse ({errors[0]})"
    if got != want:
        if want and not got:
            return (
                f"the chat template drops the tool calls ({len(want)} in the reply, none rendered)"
            )
        return (
            f"the tool calls differ after rendering ({len(want)} in the reply, {len(got)} parsed)"
        )
    if remaining.strip() != str(message.get("content") or "").strip():
        return "the content differs after rendering"
    return ""


def _template_turn(
    tokenizer,
    rec: dict,
    messages: list[dict],
    index: int,
    tools,
    report: EncodeReport,
    parse: ToolCallParser,
) -> Turn | str:
    """A turn whose sampled text is unknown, trained on the chat template's rendering of the
    parsed reply, only if that rendering round-trips through the agent's tool-call parser."""
    eot, _ = end_of_turn_ids(tokenizer)
    end = tokenizer.convert_ids_to_tokens(eot) if eot is not None else None
    # The reply as the template renders it inside the history (followed by the next message):
    # the form the next turn's prompt holds, so the episode chains into one sequence (a template
    # may render the last message differently, e.g. Qwen3's empty think block). The reply's
    # last-message form where it is the last message or the history form does not line up.
    rendered = None
    for upto in sorted({min(index + 2, len(messages)), index + 1}, reverse=True):
        try:
            head = _render(tokenizer, messages[:index], tools, gen=True)
            full = _render(tokenizer, messages[:upto], tools, gen=False)
        except Exception as exc:  # jinja errors, templates that refuse a role order
            return f"the chat template cannot render the reply ({type(exc).__name__}: {exc})"
        if full.startswith(head) and end and end in full[len(head) :]:
            rendered = full[len(head) :].split(end, 1)[0]
            break
    if rendered is None:
        return "the chat template does not render the reply after its own generation prompt"
    differs = template_round_trip(messages[index], rendered, parse)
    if differs:
        return f"no template fallback: {differs}"
    prompt = _text_prompt(tokenizer, rec, messages, index, tools, report)
    if isinstance(prompt, str):
        return prompt
    completion = _ids(tokenizer, rendered)
    if rec.get("finish_reason") in CUT_REASONS:
        report.completions_cut += 1
    else:
        completion.append(eot)
    return Turn(prompt[0], completion, None, "template")


def _text_turn(
    tokenizer, rec: dict, messages: list[dict], index: int, tools, report: EncodeReport
) -> Turn | str:
    sampled = messages[index].get(SAMPLED_KEY)
    # the local server's own statement of the sampled text (reasoning, tool calls and special
    # tokens included) and stop id: what it splices into later prompts, so the turn chains
    stated = isinstance(sampled, dict) and "text" in sampled
    text = "" if stated else sampled_text(rec, messages[index])
    if text is None:
        return UNKNOWN_SAMPLE
    prompt = _text_prompt(tokenizer, rec, messages, index, tools, report)
    if isinstance(prompt, str):
        return prompt
    prompt_ids, prompt_text = prompt
    if stated:
        completion = sampled_form_ids(tokenizer, sampled)
        if completion is None:
            return "the reply's `sampled` field is malformed (text and stop_id expected)"
        if rec.get("finish_reason") in CUT_REASONS:
            report.completions_cut += 1
        return Turn(prompt_ids, completion, None, "text")
    reasoning = rec.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        text = _reasoned(reasoning, text, prompt_text)
    # Tokenised apart, as the server did: it tokenised the prompt, then sampled the completion.
    completion = _ids(tokenizer, text) if text else []
    if rec.get("finish_reason") in CUT_REASONS:
        report.completions_cut += 1  # the model never sampled its end-of-turn token
    else:
        eot, ends = end_of_turn_ids(tokenizer)
        # the id the model sampled to end its turn, when the server said which (else the
        # template's end, what a server stopping at eos sampled)
        stop = sampled_stop_id(rec, ends)
        if stop is None:
            stop = eot
        if stop is None:
            report.eos_missing += 1
        else:
            completion.append(stop)
    if not completion:
        return "the reply is empty and was cut: nothing was sampled"
    return Turn(prompt_ids, completion, None, "text")


def episode_turns(
    tokenizer,
    messages: list[dict],
    tools: list[dict] | None,
    turns: list[dict],
    use_ids: bool,
    parser: ToolCallParser | None = None,
) -> tuple[list[Turn], EncodeReport]:
    """Every assistant turn of an episode as token ids: sampled ids, else sampled text, else
    (with `parser`, train.turn_source: template_ok) the template's round-tripped rendering."""
    report = EncodeReport()
    assistant_idx = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if turns and len(turns) != len(assistant_idx):
        report.notes.append(
            f"{len(turns)} turn records for {len(assistant_idx)} assistant messages: records "
            "ignored, each message's own text used where it is the whole sample"
        )
        turns = []
    out: list[Turn] = []
    for k, idx in enumerate(assistant_idx):
        rec = turns[k] if turns else {}
        turn = _ids_turn(tokenizer, rec, report) if use_ids else None
        if turn is not None:
            report.turns_from_ids += 1
            out.append(turn)
            continue
        made = _text_turn(tokenizer, rec, messages, idx, tools, report)
        if made is UNKNOWN_SAMPLE and parser is not None:
            made = _template_turn(tokenizer, rec, messages, idx, tools, report, parser)
            if isinstance(made, Turn):
                report.turns_from_template += 1
                out.append(made)
                continue
            made = f"{UNKNOWN_SAMPLE}; {made}"
        if isinstance(made, str):
            report.turns_dropped += 1
            report.notes.append(f"assistant turn {k}: dropped: {made}")
            continue
        report.turns_from_text += 1
        out.append(made)
    return out, report


def fit_turn(turn: Turn, max_len: int, report: EncodeReport) -> Turn:
    """One turn cut to `max_len` tokens, keeping its completion: the prompt loses its oldest
    tokens (cut from the left, the context nearest the reply stays; counted as
    `prompts_cut_left`). Only a completion that alone cannot fit beside one context token is cut
    itself, at its right end: counted as `turns_cut_partly` and `action_tokens_lost`, never
    silent (the stage warns and names the `max_seq_len` that keeps it)."""
    prompt, completion, lps = turn.prompt_ids, turn.completion_ids, turn.logprobs
    if len(prompt) + len(completion) <= max_len:
        return turn
    room = max(1, max_len - len(completion))  # position 0 is never trained: keep one of context
    if room < len(prompt):
        report.prompts_cut_left += 1
    prompt = prompt[-room:]
    keep = max_len - len(prompt)
    if keep < len(completion):
        if keep == 0:
            report.turns_cut_away += 1
        else:
            report.turns_cut_partly += 1
        report.action_tokens_lost += len(completion) - keep
        completion = completion[:keep]
        lps = lps[:keep] if lps is not None else None
    return Turn(prompt, completion, lps, turn.source, turn.constrained)


def fit_to_length(turns: list[Turn], max_len: int, report: EncodeReport) -> list[Turn]:
    """The episode's turns, each cut to fit `max_len` (`fit_turn`): what `chain_turns` then
    chains, starting a new sequence where a chained one would grow past `max_len` (each turn's
    prompt holds its whole history, so the new sequence's context is the one the policy had, its
    oldest part cut away if it must be). Every completion is kept whole unless it alone is
    longer than `max_len`. Counts the supervised tokens before any cut and the longest chain."""
    for t in turns:
        report.action_tokens += len(t.completion_ids)
        report.longest_completion = max(report.longest_completion, len(t.completion_ids))
    chained, _ = chain_turns(turns)
    report.longest_sequence = max([report.longest_sequence, *(len(s.input_ids) for s in chained)])
    report.truncated += sum(len(s.input_ids) > max_len for s in chained)
    return [fit_turn(t, max_len, report) for t in turns]


def truncate(sample: TokenSample, max_len: int) -> TokenSample | None:
    """`sample` cut at its right end to `max_len` (None when no action token survives): a
    sequence of given length for tests and benchmarks; the train stage fits turns with
    `fit_to_length` instead, which keeps every completion."""
    if len(sample.input_ids) > max_len:
        sample.input_ids = sample.input_ids[:max_len]
        sample.action_mask = sample.action_mask[:max_len]
        sample.old_logprobs = sample.old_logprobs[:max_len]
        sample.forced = [j for j in sample.forced if j < max_len]
    if sum(sample.action_mask[1:]) == 0:
        return None
    return sample


def encode_episode(
    tokenizer,
    row: dict,
    max_len: int,
    use_recorded: bool = True,
    parser: ToolCallParser | None = None,
) -> tuple[list[TokenSample], EncodeReport]:
    """One trajectory row (TRAJECTORIES schema) -> training sequences + what was left out.

    `use_recorded=False` ignores recorded completion ids and trains every turn from its text;
    `parser` (the agent's tool-call parser) enables the template fallback for turns whose sampled
    text is unknown."""
    messages = _loads(row.get("messages_json"), [])
    tools = _loads(row.get("tools_json"), None)
    turns_meta = _loads(row.get("turns_json"), [])
    turns, report = episode_turns(tokenizer, messages, tools, turns_meta, use_recorded, parser)
    _, breaks = chain_turns(turns)  # breaks of the prefix property, whatever the length
    report.prefix_breaks += breaks
    chained, _ = chain_turns(fit_to_length(turns, max_len, report), max_len)
    samples: list[TokenSample] = []
    for kept in chained:
        if sum(kept.action_mask[1:]) == 0:  # position 0 has no prediction: nothing to train
            report.dropped_empty += 1
            continue
        kept.episode_id = str(row.get("episode_id", ""))
        kept.task_id = str(row.get("task_id", ""))
        kept.reward = float(row.get("reward") or 0.0)
        samples.append(kept)
    return samples, report
