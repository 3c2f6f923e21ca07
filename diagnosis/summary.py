"""Failure summaries: the policy itself explains why it failed a held-out task (no teacher).

For each failed eval trajectory the policy endpoint is shown its own transcript and asked for one
JSON object: `failure_step`, `root_cause` (task_misunderstanding | wrong_tool | bad_edit |
early_stop | other), `missing_capability`, `evidence`. The answer is validated with pydantic; a
malformed answer is retried with the validation error fed back (up to `max_attempts` calls). When
no answer validates, or the endpoint is dead, a heuristic summary built from trajectory features
(no tool calls -> early_stop, tool errors -> wrong_tool, outputs written but wrong -> bad_edit, ...)
takes its place, marked `fallback=True` with the reason. Summaries are evidence for clustering, not
rewards. Usage:

    chat = endpoint_chat(LLMEndpoint(base_url, model))
    rows = summarize_failures(eval_trajectories_df, chat, SummaryConfig(), iteration=1, summarizer=model)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clawloop.harness.llm import ChatFn, LLMError

RootCause = Literal["task_misunderstanding", "wrong_tool", "bad_edit", "early_stop", "other"]
ROOT_CAUSES: tuple[str, ...] = (
    "task_misunderstanding",
    "wrong_tool",
    "bad_edit",
    "early_stop",
    "other",
)


class FailureSummary(BaseModel):
    """The structured answer the policy must give about one failed trajectory."""

    model_config = ConfigDict(extra="forbid")

    failure_step: int = Field(
        ge=0, description="0-based index of the assistant turn that went wrong"
    )
    root_cause: RootCause
    missing_capability: str = Field(min_length=3, max_length=300)
    evidence: str = Field(min_length=3, max_length=1200)


@dataclass(frozen=True)
class SummaryConfig:
    """How failure summaries are asked for."""

    max_attempts: int = 3  # LLM calls per trajectory before the heuristic fallback
    max_transcript_chars: int = 12_000  # the transcript is cut (middle first) to fit the context
    max_tool_output_chars: int = 600  # each tool output is cut to this in the transcript
    max_tokens: int = 400  # per summary reply
    temperature: float = 0.0  # summaries are evidence: no sampling noise


class SummaryParseError(ValueError):
    """The model's reply is not one valid FailureSummary JSON object; the message says why."""


# ---------------------------------------------------------------------------------------------
# trajectory features and the heuristic fallback (pure)

_ERROR_RE = re.compile(
    r"(traceback \(most recent call last\)|command not found|no such file or directory|"
    r"permission denied|syntaxerror|\berror\b|exit[_ ]code[\"']?[:=]\s*[1-9]|unknown tool|"
    r"invalid arguments?)",
    re.IGNORECASE,
)
_WRITE_RE = re.compile(r"(>\s*\S|\btee\b|write_file|\.to_csv|json\.dump|open\([^)]*[\"'][wa])")


@dataclass(frozen=True)
class TrajectoryFeatures:
    """What the heuristic fallback looks at, extracted from one trajectory row."""

    n_assistant_turns: int
    n_tool_calls: int
    tool_error_steps: tuple[int, ...]  # assistant turns whose tool output looked like an error
    write_steps: tuple[int, ...]  # assistant turns that wrote files (as far as we can tell)
    end_reason: str
    reward: float
    outputs_found: int  # contracted outputs the verifier could read
    outputs_missing: int  # contracted outputs the verifier could not read (absent, unparsable)


def _messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = row.get("messages_json") or "[]"
    try:
        msgs = json.loads(raw) if isinstance(raw, str) else list(raw)
    except json.JSONDecodeError:
        return []
    return [m for m in msgs if isinstance(m, dict)]


def _verifier_checks(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The grader's per-check list ({"name", "passed", "detail"}), bare or under "checks"."""
    raw = row.get("checks_json") or "[]"
    try:
        obj = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return []
    if isinstance(obj, dict):
        obj = obj.get("checks") or []
    return [c for c in obj if isinstance(c, dict)] if isinstance(obj, list) else []


def _tool_call_text(tc: Mapping[str, Any]) -> str:
    fn = tc.get("function") or {}
    return f"{fn.get('name', '')}({fn.get('arguments', '')})"


def trajectory_features(row: Mapping[str, Any]) -> TrajectoryFeatures:
    """Turn a TRAJECTORIES row into the few facts the heuristic needs."""
    step = -1
    n_calls = 0
    errors: list[int] = []
    writes: list[int] = []
    for m in _messages(row):
        role = m.get("role")
        if role == "assistant":
            step += 1
            calls = m.get("tool_calls") or []
            n_calls += len(calls)
            if any(_WRITE_RE.search(_tool_call_text(tc)) for tc in calls):
                writes.append(step)
        elif (
            role == "tool"
            and step >= 0
            and (not errors or errors[-1] != step)
            and _ERROR_RE.search(str(m.get("content") or "")[:2000])
        ):
            errors.append(step)
    # The grader names one check per output "<path>: readable" (or ": report written").
    found = missing = 0
    for c in _verifier_checks(row):
        name = str(c.get("name", ""))
        if name.endswith(": readable") or name.endswith(": report written"):
            found += bool(c.get("passed"))
            missing += not c.get("passed")
    reward = row.get("reward")
    return TrajectoryFeatures(
        n_assistant_turns=step + 1,
        n_tool_calls=max(n_calls, int(row.get("n_tool_calls") or 0)),
        tool_error_steps=tuple(errors),
        write_steps=tuple(writes),
        end_reason=str(row.get("end_reason") or ""),
        reward=float(reward) if reward is not None else 0.0,
        outputs_found=found,
        outputs_missing=missing,
    )


def heuristic_summary(row: Mapping[str, Any]) -> FailureSummary:
    """A summary from trajectory features alone, for when the policy's own answer is unusable."""
    f = trajectory_features(row)
    cap = str(row.get("capability") or "the task")
    last = max(f.n_assistant_turns - 1, 0)
    write_at = f.write_steps[-1] if f.write_steps else last
    if f.end_reason == "server_error":
        return FailureSummary(
            failure_step=last,
            root_cause="other",
            missing_capability=f"{cap}: none identified (the policy server failed mid-episode)",
            evidence=f"episode ended with end_reason={f.end_reason}",
        )
    if f.n_tool_calls == 0:
        return FailureSummary(
            failure_step=0,
            root_cause="early_stop",
            missing_capability=f"{cap}: acting in the workspace with tools instead of answering in prose",
            evidence=f"no tool calls in {f.n_assistant_turns} assistant turn(s); reward {f.reward:.2f}",
        )
    if f.outputs_found or (f.write_steps and f.reward > 0.0):
        # The outputs exist (the verifier read them) but their values or shape are wrong.
        return FailureSummary(
            failure_step=write_at,
            root_cause="bad_edit",
            missing_capability=f"{cap}: computing the contracted output values correctly",
            evidence=f"outputs written (last write at turn {write_at}; {f.outputs_found} readable) but reward was {f.reward:.2f} < 1",
        )
    if f.tool_error_steps and len(f.tool_error_steps) * 2 >= max(f.n_assistant_turns, 1):
        return FailureSummary(
            failure_step=f.tool_error_steps[0],
            root_cause="wrong_tool",
            missing_capability=f"{cap}: using the shell and file tools without errors",
            evidence=f"tool errors in {len(f.tool_error_steps)} of {f.n_assistant_turns} turns, first at turn {f.tool_error_steps[0]}",
        )
    if f.write_steps and f.outputs_missing:
        return FailureSummary(
            failure_step=write_at,
            root_cause="task_misunderstanding",
            missing_capability=f"{cap}: writing the outputs the contract names, at the contracted paths",
            evidence=f"wrote files (turn {write_at}) but the verifier found {f.outputs_missing} contracted output(s) missing or unreadable",
        )
    if f.write_steps:
        return FailureSummary(
            failure_step=write_at,
            root_cause="bad_edit",
            missing_capability=f"{cap}: writing outputs in the contracted format and values",
            evidence=f"wrote outputs (turn {write_at}) but reward was {f.reward:.2f}",
        )
    if f.tool_error_steps:
        return FailureSummary(
            failure_step=f.tool_error_steps[0],
            root_cause="wrong_tool",
            missing_capability=f"{cap}: choosing tools and arguments that work in this workspace",
            evidence=f"tool error at turn {f.tool_error_steps[0]} and no output file written afterwards",
        )
    if f.end_reason in ("max_turns", "timeout", "context_full"):
        return FailureSummary(
            failure_step=last,
            root_cause="other",
            missing_capability=f"{cap}: finishing within the turn and time budget",
            evidence=f"ran out of budget (end_reason={f.end_reason}) after {f.n_tool_calls} tool calls without writing outputs",
        )
    return FailureSummary(
        failure_step=last,
        root_cause="early_stop",
        missing_capability=f"{cap}: producing the contracted output files before stopping",
        evidence=f"stopped after {f.n_tool_calls} tool calls without writing any output file",
    )


# ---------------------------------------------------------------------------------------------
# the prompt and the parser (pure)

_SYSTEM = (
    "You are reviewing one of your own attempts at a shell-and-files task that FAILED the hidden "
    "verifier. Find where and why it went wrong. Reply with ONLY one JSON object, no prose, with "
    'exactly these keys: "failure_step" (integer, 0-based index of the assistant turn that went '
    'wrong), "root_cause" (one of: task_misunderstanding, wrong_tool, bad_edit, early_stop, other), '
    '"missing_capability" (short phrase: the skill you lacked), "evidence" (one or two sentences '
    "quoting what in the transcript shows it)."
)


def render_transcript(row: Mapping[str, Any], cfg: SummaryConfig) -> str:
    """The trajectory as numbered plain text, assistant turns indexed as failure_step counts them."""
    lines: list[str] = []
    step = -1
    for m in _messages(row):
        role = m.get("role")
        content = str(m.get("content") or "")
        if role == "assistant":
            step += 1
            calls = "; ".join(_tool_call_text(tc) for tc in m.get("tool_calls") or [])
            lines.append(
                f"[assistant turn {step}] {content}" + (f"\n  tool calls: {calls}" if calls else "")
            )
        elif role == "tool":
            cut = cfg.max_tool_output_chars
            lines.append(
                f"[tool output] {content[:cut]}" + (" ...(cut)" if len(content) > cut else "")
            )
        elif role in ("user", "system"):
            lines.append(f"[{role}] {content}")
    text = "\n".join(lines)
    if len(text) > cfg.max_transcript_chars:
        # Keep the task statement (start) and the ending (where failures show); drop the middle.
        half = cfg.max_transcript_chars // 2
        text = text[:half] + "\n...(middle of transcript cut)...\n" + text[-half:]
    return text


def summary_prompt(row: Mapping[str, Any], cfg: SummaryConfig) -> list[dict[str, Any]]:
    """The request to the policy: capability, outcome, verifier checks and the numbered transcript."""
    verdict = (
        f"reward {float(row.get('reward') or 0.0):.2f}, end_reason {row.get('end_reason') or '?'}"
    )
    checks = str(row.get("checks_json") or "")[:1500]
    user = (
        f"Capability under test: {row.get('capability') or '?'}\n"
        f"Outcome: FAILED ({verdict})\n"
        + (f"Verifier checks: {checks}\n" if checks else "")
        + f"\nTranscript:\n{render_transcript(row, cfg)}\n\nReply with the JSON object only."
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def parse_summary(text: str, n_turns: int | None = None) -> FailureSummary:
    """Extract and validate the JSON object in a reply; raise SummaryParseError saying what is wrong.

    With `n_turns`, a failure_step past the last assistant turn is rejected too.
    """
    cleaned = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL).strip()
    start = cleaned.find("{")
    if start < 0:
        raise SummaryParseError("no JSON object found in the reply")
    try:
        obj, _ = json.JSONDecoder().raw_decode(cleaned[start:])
    except json.JSONDecodeError as exc:
        raise SummaryParseError(f"invalid JSON: {exc.msg} at char {exc.pos}") from exc
    if not isinstance(obj, dict):
        raise SummaryParseError("the JSON value is not an object")
    try:
        summary = FailureSummary.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'object'}: {e['msg']}" for e in exc.errors()
        )
        raise SummaryParseError(f"schema violation: {problems}") from exc
    if n_turns is not None and n_turns > 0 and summary.failure_step >= n_turns:
        raise SummaryParseError(
            f"failure_step {summary.failure_step} is past the last assistant turn ({n_turns - 1})"
        )
    return summary


# ---------------------------------------------------------------------------------------------
# the loop: ask, validate, retry with the error, fall back (failures are data)


def summarize_failure(
    row: Mapping[str, Any],
    chat_fn: ChatFn | None,
    cfg: SummaryConfig,
    *,
    iteration: int,
    summarizer: str = "",
) -> dict[str, Any]:
    """One FAILURE_SUMMARIES row for one failed trajectory row. Never raises for model faults."""
    attempts = 0
    reason = "no endpoint configured: heuristic summary"
    summary: FailureSummary | None = None
    if chat_fn is not None:
        n_turns = trajectory_features(row).n_assistant_turns
        messages = summary_prompt(row, cfg)
        for _ in range(max(cfg.max_attempts, 1)):
            attempts += 1
            try:
                reply = chat_fn(messages)
            except LLMError as exc:
                # A dead or failing server will not heal within this episode's budget: stop asking.
                reason = f"endpoint error ({exc.kind}): {str(exc)[:300]}"
                break
            try:
                summary = parse_summary(reply, n_turns)
                break
            except SummaryParseError as exc:
                reason = f"malformed after {attempts} attempt(s): {exc}"
                messages = [
                    *messages,
                    {"role": "assistant", "content": reply[:2000]},
                    {
                        "role": "user",
                        "content": f"That reply was not valid: {exc}. Reply again with ONLY the JSON object "
                        f"with keys failure_step, root_cause, missing_capability, evidence.",
                    },
                ]
    fallback = summary is None
    if summary is None:
        summary = heuristic_summary(row)
    return {
        "episode_id": str(row.get("episode_id") or ""),
        "task_id": str(row.get("task_id") or ""),
        "capability": str(row.get("capability") or ""),
        "iteration": int(iteration),
        "failure_step": int(summary.failure_step),
        "root_cause": summary.root_cause,
        "missing_capability": summary.missing_capability,
        "evidence": summary.evidence,
        "fallback": fallback,
        "fallback_reason": reason if fallback else "",
        "attempts": attempts,
        "summarizer": "heuristic" if fallback else (summarizer or "policy"),
        "cluster_id": "",
    }


def summarize_failures(
    trajectories: Any,
    chat_fn: ChatFn | None,
    cfg: SummaryConfig,
    *,
    iteration: int,
    summarizer: str = "",
) -> list[dict[str, Any]]:
    """Summaries for every failed episode of a TRAJECTORIES DataFrame (passed ones are skipped)."""
    rows: list[dict[str, Any]] = []
    for rec in trajectories.to_dict("records"):
        if bool(rec.get("passed")):
            continue
        rows.append(
            summarize_failure(rec, chat_fn, cfg, iteration=iteration, summarizer=summarizer)
        )
    return rows
