"""LLM-written generators: the synthesis LLM writes generator code; forge and verify judge it.

The writer (any OpenAI-compatible endpoint; by default the policy itself, no teacher) is given the
generator contract, the capability, domain, difficulty and output format wanted, the recurring
failure patterns from the last diagnosis, and a built-in generator as an example. Here its code is
only parsed on the host, never run (`extract_code`, `static_check`: syntax, GENERATOR metadata,
build/solve present, stdlib-only imports); a reply that fails goes back to the writer with the
error, up to `max_attempts` replies per row. The forge and verify stages then build and check the
written generator once, like any other. What they reject comes back the next iteration:
`repair_candidates` sends the writer its code and the stage's error, and the repaired row goes
through forge and verify again. Origins: `llm:<model>` for a first write, `llm:<model>:repair:<n>`
for the n-th repair of that lineage; a lineage is dropped after `max_repairs` repairs. Code whose
normalised form (ast.dump without docstrings) was already written in the batch, or copies the
example, is a duplicate.

    chat = writer_chat(endpoint)  # origins name endpoint.model (or pass model=)
    rows, notes = write_candidates(builtin_rows, chat, guidance)
    # next iteration, from the previous iteration's FORGED / VERDICTS + CHECKS rows:
    failures = [(cand, "forge", forge_failure(forged)), (cand2, "verify", verify_failure(v, checks))]
    repaired, notes = repair_candidates(failures, chat, guidance)
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clawloop.generators.meta import ContractError
from clawloop.harness.llm import ChatFn, LLMEndpoint, LLMError, circuit_breaker, endpoint_chat
from clawloop.synthesis.llm_prompts import WriterSpec, example_for, repair_message, writer_prompt

REPAIR_STAGES = ("forge", "verify")
_REPAIR_RE = re.compile(r":repair:(\d+)$")


class WriterError(ValueError):
    """The writer's code fails a host-side (static) check; the message is fed back for repair."""


@dataclass(frozen=True)
class WriterConfig:
    """How generators are written and repaired."""

    max_attempts: int = 3  # writer replies per write or repair; later ones fix host-check errors
    max_repairs: int = 3  # forge/verify repairs per lineage, across iterations
    max_tokens: int = 6000  # per writer reply (writer_chat)
    temperature: float = 0.7  # some variety between specs; repairs reuse it (writer_chat)
    max_code_chars: int = 60_000  # longer replies are rejected before any parsing
    max_error_chars: int = 2_500  # how much of an error goes back to the LLM


# ---------------------------------------------------------------------------------------------
# pure helpers: extraction, normalised hash, static checks (the prompts: llm_prompts.py)

_FENCE_RE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
# Whatever a generator may import: the standard library, nothing that reaches other processes'
# GUIs or the host's package set. The sandbox is the real boundary; this only gives clear feedback.
_STDLIB = frozenset(sys.stdlib_module_names) - {"tkinter", "turtle", "idlelib", "ensurepip", "venv"}


def extract_code(reply: str) -> str:
    """The Python code in a reply: the longest fenced block, else the whole reply."""
    text = re.sub(r"<think>.*?</think>", "", reply or "", flags=re.DOTALL)
    blocks = _FENCE_RE.findall(text)
    code = max(blocks, key=len) if blocks else text
    return code.strip() + "\n"


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
            ) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def normalized_hash(code: str) -> str:
    """sha256 of the code's AST without docstrings: comments, layout and docs do not count.

    Raises WriterError for code that does not parse.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise WriterError(f"SyntaxError: {exc.msg} (line {exc.lineno})") from exc
    dumped = ast.dump(_strip_docstrings(tree), annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dumped.encode()).hexdigest()


def static_check(code: str, spec: WriterSpec, max_chars: int = 60_000) -> None:
    """Host-side checks with `ast` only (the code is never run here); raise WriterError saying what."""
    from clawloop.generators.candidates import parse_meta

    if len(code) > max_chars:
        raise WriterError(f"the generator is {len(code)} characters; keep it under {max_chars}")
    try:
        parsed = parse_meta(code)
    except ContractError as exc:
        raise WriterError(str(exc)) from exc
    meta = parsed.meta
    want = {
        "capability": spec.capability,
        "domain": spec.domain,
        "multihop": spec.multihop,
        "dirtiness": spec.dirtiness,
        "output_format": spec.output_format,
    }
    got = {k: getattr(meta, k) for k in want}
    wrong = [f"{k}={got[k]!r} (asked for {v!r})" for k, v in want.items() if got[k] != v]
    if wrong:
        raise WriterError("GENERATOR metadata does not match the request: " + ", ".join(wrong))
    tree = ast.parse(code)
    bad: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad |= {a.name.split(".")[0] for a in node.names if a.name.split(".")[0] not in _STDLIB}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            bad |= {node.module.split(".")[0]} - _STDLIB
    if bad:
        raise WriterError(
            f"only the Python standard library may be imported; found: {', '.join(sorted(bad))}"
        )


# ---------------------------------------------------------------------------------------------
# the write -> host check -> repair-the-reply loop (nothing here runs the code)


def _check_one(
    code: str, spec: WriterSpec, cfg: WriterConfig, seen: set[str], failed: Mapping[str, str]
) -> tuple[str, str]:
    """(stage, error) of the host-side checks; ("", "") when the code may go to forge and verify."""
    if not code.strip() or "def build" not in code:
        return (
            "reply",
            "no generator code (expected one ```python block defining GENERATOR, build, solve)",
        )
    try:
        static_check(code, spec, cfg.max_code_chars)
        h = normalized_hash(code)
    except WriterError as exc:
        return "static", str(exc)
    if h in seen:
        return "duplicate", "normalised code hash equals a generator already written or the example"
    if h in failed:
        return (
            "static",
            "this is the same code as a previous attempt, which failed with:\n" + failed[h],
        )
    return "", ""


def _ask(
    messages: list[dict[str, Any]],
    spec: WriterSpec,
    chat_fn: ChatFn,
    cfg: WriterConfig,
    seen: set[str],
    failed: dict[str, str],
) -> tuple[str, str]:
    """(code, "") once a reply passes the host checks, else ("", why); never raises for LLM faults.

    A failing reply goes back with `repair_message` for up to cfg.max_attempts replies; a
    duplicate ends at once (the spec is already covered). The accepted code's hash joins `seen`.
    """
    reason = "no attempt made (max_attempts < 1)"
    for attempt in range(1, cfg.max_attempts + 1):
        try:
            reply = chat_fn(messages)
        except LLMError as exc:
            return "", f"writer endpoint error ({exc.kind}) on reply {attempt}: {str(exc)[:300]}"
        code = extract_code(reply)
        stage, error = _check_one(code, spec, cfg, seen, failed)
        if not error:
            seen.add(normalized_hash(code))
            return code, ""
        if stage == "duplicate":
            return "", f"duplicate: {error}"
        if stage == "static":
            with contextlib.suppress(WriterError):
                failed[normalized_hash(code)] = error
        reason = f"{stage} check failed on {attempt} repl(ies): {error[:500]}"
        messages = [
            *messages,
            {"role": "assistant", "content": reply[: cfg.max_code_chars]},
            repair_message(stage, error, cfg.max_error_chars),
        ]
    return "", reason


def repair_count(origin: str) -> int:
    """How many forge/verify repairs an origin's lineage has had: `llm:<model>:repair:<n>` -> n."""
    m = _REPAIR_RE.search(origin or "")
    return int(m.group(1)) if m and origin.startswith("llm:") else 0


def _written_row(row: Mapping[str, Any], code: str, origin: str) -> dict[str, Any]:
    """`row` with the written code: its sha256, metadata, origin, and the task id forge computes."""
    from clawloop.generators.candidates import candidate_row

    split = str(row.get("split", "train"))
    return {**row, **candidate_row(code, int(row["seed"]), origin=origin, split=split)}


def _label(row: Mapping[str, Any]) -> str:
    return (
        f"{row.get('capability', '?')}/{row.get('domain', '?')} seed {row.get('seed', '?')} "
        f"({str(row.get('task_id', ''))[:16]})"
    )


# ---------------------------------------------------------------------------------------------
# rows in, rows out: synthesize's first write, and the repair of last iteration's rejects


def spec_from_candidate(row: Mapping[str, Any]) -> WriterSpec:
    """The writer spec for a CANDIDATES row (same capability, domain, difficulty, format, split, seed)."""
    return WriterSpec(
        capability=str(row["capability"]),
        domain=str(row["domain"]),
        multihop=int(row["multihop"]),
        dirtiness=int(row["dirtiness"]),
        output_format=str(row["output_format"]),
        split=str(row.get("split", "train")),
        seed=int(row["seed"]),
    )


def writer_chat(endpoint: LLMEndpoint, cfg: WriterConfig = WriterConfig()) -> ChatFn:
    """The writer's ChatFn for an endpoint (cfg's max_tokens, temperature; origins name its
    model). After 3 endpoint errors in a row the remaining calls fail at once, not each after a
    timeout."""
    chat = circuit_breaker(
        endpoint_chat(endpoint, max_tokens=cfg.max_tokens, temperature=cfg.temperature)
    )
    chat.model = endpoint.model  # type: ignore[attr-defined]  # the origin's <model> (_model_of)
    return chat


def _model_of(chat_fn: ChatFn, model: str | None) -> str:
    """The <model> of `llm:<model>`: the given name, else the one `writer_chat` noted, else writer."""
    return model or str(getattr(chat_fn, "model", "") or "") or "writer"


def forge_failure(forged: Mapping[str, Any]) -> str:
    """The error text of a failed FORGED row, for `repair_candidates` (stage "forge")."""
    return f"[{forged.get('error_kind', '')}] {forged.get('error', '')}".strip()


def verify_failure(verdict: Mapping[str, Any], checks: Iterable[Mapping[str, Any]] = ()) -> str:
    """The error text of a dropped VERDICTS row and its failed CHECKS rows (stage "verify")."""
    failed = [f"- {c['check']}: {c['reason']}" for c in checks if not c.get("passed")]
    return "\n".join([str(verdict.get("reason", "")), *failed]).strip()


def _prompt(
    spec: WriterSpec, patterns_by_cap: Mapping[str, Any], seen: set[str]
) -> list[dict[str, Any]]:
    """The first request for `spec`; the example's hash joins `seen`."""
    example = example_for(spec)
    if example:
        with contextlib.suppress(WriterError):
            seen.add(normalized_hash(example))  # a verbatim copy of the example is a duplicate
    return writer_prompt(spec, example, str(patterns_by_cap.get(spec.capability, "")))


def write_candidates(
    rows: Sequence[Mapping[str, Any]],
    chat_fn: ChatFn,
    guidance: Mapping[str, Any] | None = None,
    cfg: WriterConfig = WriterConfig(),
    *,
    model: str | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Ask the writer for a generator of each CANDIDATES row's spec; returns (rows, notes).

    Host checks only (nothing is run): a reply whose code fails extraction, `static_check` or the
    metadata parse goes back with the error, up to cfg.max_attempts replies. A written row is the
    input row with the new generator_code, generator_sha256, task_id (forge's `task_id_for`:
    generator sha256 + the row's seed) and origin `llm:<model>`; seed and split are kept. A row the
    writer could not write (bad replies, endpoint error, duplicate within this batch) comes back
    unchanged, and a note says why, so the output matches the input row for row. `guidance`
    carries {"patterns": {capability: text}} for the prompt. `model` names the writer in the
    origin; by default the endpoint's model when chat_fn comes from `writer_chat`.
    """
    model = _model_of(chat_fn, model)
    seen: set[str] = set()
    patterns: Mapping[str, Any] = (guidance or {}).get("patterns") or {}
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for row in rows:
        spec = spec_from_candidate(row)
        code, why = _ask(_prompt(spec, patterns, seen), spec, chat_fn, cfg, seen, {})
        if code:
            out.append(_written_row(row, code, f"llm:{model}"))
        else:
            out.append(dict(row))
            notes.append(f"{_label(row)}: kept its built-in generator: {why}")
    n = sum(str(r.get("origin", "")).startswith("llm:") for r in out)
    head = (
        f"LLM writer ({model}): {n}/{len(out)} generator(s) written and host-checked; "
        "forge and verify judge them"
    )
    return out, [head, *notes]


def repair_candidates(
    failures: Sequence[tuple[Mapping[str, Any], str, str]],
    chat_fn: ChatFn,
    guidance: Mapping[str, Any] | None = None,
    cfg: WriterConfig = WriterConfig(),
    *,
    model: str | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Repair LLM-written generators that forge or verify rejected; returns (repaired rows, notes).

    `failures` holds (candidate_row, stage, error): the previous iteration's LLM-written
    CANDIDATES row, "forge" or "verify", and that stage's error (`forge_failure`,
    `verify_failure`). The writer gets the original request, its previous code and
    `repair_message(stage, error)`; the reply is host-checked as in `write_candidates`. A repaired
    row keeps the failed row's seed and split, gets the new code's sha256 and task id, and origin
    `llm:<model>:repair:<n>`, n = the failed row's `repair_count` + 1. A row is dropped with a note
    (no row out) when its lineage already had cfg.max_repairs repairs (no LLM call), when it is not
    LLM-written, or when the writer's replies still fail the host checks. Leave out forge faults of
    the sandbox itself (error_kind "sandbox"): they are not the generator's bug.
    """
    bad = sorted({s for _, s, _ in failures if s not in REPAIR_STAGES})
    if bad:
        raise ValueError(f"repair stage must be one of {REPAIR_STAGES}, got {bad}")
    model = _model_of(chat_fn, model)
    seen: set[str] = set()
    patterns: Mapping[str, Any] = (guidance or {}).get("patterns") or {}
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for row, stage, error in failures:
        origin = str(row.get("origin", ""))
        n = repair_count(origin)
        if not origin.startswith("llm:"):
            notes.append(f"{_label(row)}: not repaired: origin {origin!r} is not LLM-written")
            continue
        if n >= cfg.max_repairs:
            notes.append(
                f"{_label(row)}: dropped: {stage} failed again after {n} repair(s) "
                f"(max_repairs={cfg.max_repairs})"
            )
            continue
        spec = spec_from_candidate(row)
        prev = str(row.get("generator_code") or "")
        failed: dict[str, str] = {}
        with contextlib.suppress(WriterError):  # resubmitting it unchanged is refused on the host
            failed[normalized_hash(prev)] = error
        messages = [
            *_prompt(spec, patterns, seen),
            {"role": "assistant", "content": f"```python\n{prev}```"},
            repair_message(stage, error, cfg.max_error_chars),
        ]
        code, why = _ask(messages, spec, chat_fn, cfg, seen, failed)
        if code:
            out.append(_written_row(row, code, f"llm:{model}:repair:{n + 1}"))
        else:
            notes.append(f"{_label(row)}: dropped: repair {n + 1} failed: {why}")
    head = (
        f"LLM writer ({model}): {len(out)}/{len(failures)} rejected generator(s) repaired and "
        "host-checked; forge and verify judge them again"
    )
    return out, [head, *notes]
