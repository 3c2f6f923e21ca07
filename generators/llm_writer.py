"""LLM-written generators: the synthesis LLM writes generator code, the sandbox judges it.

The writer (any OpenAI-compatible endpoint; by default the policy itself, no teacher) is given the
generator contract, the capability, domain, difficulty and output format wanted, the recurring
failure patterns from the last diagnosis, and a built-in generator as an example. Its code is
checked on the host with `ast` only (syntax, GENERATOR metadata, build/solve present, stdlib-only
imports) and never executed here; then it is forged and verified in a sandbox exactly like any
generator (generators/forge.py `forge_candidate`, generators/verify.py `verify_task`). Whatever
fails (a syntax error, an infinite loop killed by the sandbox's timeout, a fork bomb stopped by its
process limit, a read of a host file that is not there, a verify check) goes back to the LLM as the
error text for up to `max_repairs` repairs; then the spec is dropped with its reason. Code whose
normalised form (ast.dump without docstrings: comments and layout do not count) was already
accepted, or copies the example, is dropped as a duplicate.

Without an endpoint nothing is written: `write_generators` returns no results and a note that
synthesis uses the built-in library (generators/synthesize.py samples it anyway).

    results, notes = write_generators(specs, endpoint, SandboxConfig(), guidance=guidance)
    rows = [r.candidate for r in results if r.status == "ok"]   # CANDIDATES rows, origin llm:<model>
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from clawloop.generators.contract import ContractError
from clawloop.harness.llm import ChatFn, LLMEndpoint, LLMError, endpoint_chat
from clawloop.harness.sandbox.base import SandboxConfig

Status = Literal["ok", "dropped", "duplicate"]
ForgeFn = Callable[
    ..., dict[str, Any]
]  # (candidate_row, sandbox_cfg, retries=, timeout=) -> FORGED row
VerifyFn = Callable[[dict[str, Any], SandboxConfig], tuple[list[dict[str, Any]], dict[str, Any]]]


class WriterError(ValueError):
    """The writer's code fails a host-side (static) check; the message is fed back for repair."""


@dataclass(frozen=True)
class WriterSpec:
    """One generator to write."""

    capability: str
    domain: str
    multihop: int = 0
    dirtiness: int = 0
    output_format: str = "json"
    split: str = "train"
    seed: int = 0  # the seed the candidate is forged and verified with


@dataclass(frozen=True)
class WriterConfig:
    """How generators are written and repaired."""

    max_repairs: int = 3  # repair rounds after the first attempt
    max_tokens: int = 6000  # per writer reply
    temperature: float = 0.7  # some variety between specs; repairs reuse it
    forge_retries: int = 3  # transient sandbox faults only (forge_candidate)
    build_timeout_s: float = 30.0  # per build() inside the sandbox
    max_code_chars: int = 60_000  # longer replies are rejected before any parsing
    max_error_chars: int = 2_500  # how much of an error goes back to the LLM


@dataclass(frozen=True)
class WriteAttempt:
    attempt: int  # 0 = first write, 1.. = repairs
    stage: str  # reply | static | duplicate | forge | verify | ok
    error: str
    code_sha256: str


@dataclass
class WriterResult:
    spec: WriterSpec
    status: Status
    reason: str
    code: str = ""
    normalized_hash: str = ""
    candidate: dict[str, Any] | None = None  # CANDIDATES row (origin llm:<model>), when ok
    forged: dict[str, Any] | None = None  # the last FORGED row
    checks: list[dict[str, Any]] = field(default_factory=list)  # the last CHECKS rows
    verdict: dict[str, Any] | None = None
    attempts: list[WriteAttempt] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# pure helpers: extraction, normalised hash, static checks, prompts

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
    from clawloop.generators.runner import parse_meta

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


CONTRACT_TEXT = '''A generator is ONE Python file, standard library only, that runs in an isolated sandbox
(no network, no host files, a few seconds of CPU). It must define:

"""<one-line title>"""
GENERATOR = {"capability": ..., "domain": ..., "multihop": int 0-3, "dirtiness": int 0-3,
             "output_format": "json" | "csv" | "multi" | "report"}   # a literal dict

def build(seed: int) -> dict:
    # Deterministic in seed (use random.Random(seed); never time, os.urandom or set order).
    return {"instruction": str,            # what the agent is told
            "files": {relpath: str},       # the starting workspace (several sources)
            "answer": {output_relpath: value},   # the answer key, COMPUTED BY CODE from the data
            "contract": {"outputs": [{"path": "output/x.csv", "format": "csv",
                                      "columns": [...], "key": [...]}   # or "format": "json",
                                                                         # "schema": {...}
                                     ],                                  # report: "format": "report",
                                                                         # "sidecar": "output/facts.json"
                         "tolerance": {"abs": 0.01, "rel": 0.0},
                         "decisions": ["hidden rules the agent cannot infer: filters, rounding,
                                        tie-breaks, join keys"]}}

def solve(workspace: str) -> None:
    # The reference solution: reads the files in `workspace`, writes every output the contract names.

Rules: the answer keys equal the graded output paths; no answer value may appear in the instruction,
the contract or the files; the untouched workspace must fail the verifier; solve() must pass it.
multihop = how many sources must be joined (index file, per-entity files, cross-reference);
dirtiness = injected distractors, missing fields, schema and unit mismatches (handled by the
stated decisions so the reference logic stays well defined).'''


def writer_prompt(spec: WriterSpec, example_code: str, patterns: str) -> list[dict[str, Any]]:
    """The first request to the writer LLM."""
    system = (
        "You write task generators for training a shell-and-files agent. Follow the contract "
        "exactly. Reply with one ```python fenced block holding the whole file and nothing else."
    )
    want = (
        f'GENERATOR = {{"capability": "{spec.capability}", "domain": "{spec.domain}", '
        f'"multihop": {spec.multihop}, "dirtiness": {spec.dirtiness}, "output_format": "{spec.output_format}"}}'
    )
    parts = [
        "The contract:\n" + CONTRACT_TEXT,
        f"Write a NEW generator with exactly this metadata:\n{want}",
    ]
    if patterns.strip():
        parts.append(
            "The agent recently failed in these recurring ways; make the task exercise them "
            "(without giving answers away):\n" + patterns.strip()
        )
    if example_code.strip():
        parts.append(
            "A working generator from the built-in library, as an example of the form (do not copy "
            "it; write a different task for the requested domain and difficulty):\n```python\n"
            + example_code.strip()
            + "\n```"
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def repair_message(stage: str, error: str, max_chars: int) -> dict[str, Any]:
    """The follow-up that sends a failure back to the writer."""
    what = {
        "reply": "I could not find usable Python code in your reply",
        "static": "Your generator fails a static check",
        "forge": "Building your generator in the sandbox failed",
        "verify": "Your generator built, but the forged task failed verification",
        "duplicate": "Your generator is the same code as one already accepted",
    }.get(stage, "Your generator failed")
    cut = (
        error
        if len(error) <= max_chars
        else error[: max_chars // 2] + "\n...\n" + error[-max_chars // 2 :]
    )
    return {
        "role": "user",
        "content": f"{what}:\n{cut}\n\nFix it and reply with the complete corrected file in one "
        "```python block.",
    }


# ---------------------------------------------------------------------------------------------
# the write -> check -> forge -> verify -> repair loop


def _default_forge(
    row: dict[str, Any], sandbox: SandboxConfig, retries: int, timeout: float
) -> dict[str, Any]:
    from clawloop.generators.forge import forge_candidate

    return forge_candidate(row, sandbox, retries=retries, timeout=timeout)


def _default_verify(
    forged: dict[str, Any], sandbox: SandboxConfig
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from clawloop.generators.verify import verify_task

    return verify_task(forged, sandbox)


def write_generator(
    spec: WriterSpec,
    chat_fn: ChatFn,
    sandbox: SandboxConfig,
    *,
    model: str,
    example_code: str = "",
    patterns: str = "",
    seen_hashes: set[str] | None = None,
    cfg: WriterConfig = WriterConfig(),
    forge_fn: ForgeFn | None = None,
    verify_fn: VerifyFn | None = None,
) -> WriterResult:
    """Write one generator for `spec`; repair up to cfg.max_repairs times; never raises for LLM faults.

    `seen_hashes` holds the normalised hashes already accepted (and the example's); an accepted
    generator's hash is added to it.
    """
    from clawloop.generators.forge import candidate_from_code

    forge = forge_fn or (
        lambda row, sb: _default_forge(row, sb, cfg.forge_retries, cfg.build_timeout_s)
    )
    verify = verify_fn or _default_verify
    seen = seen_hashes if seen_hashes is not None else set()
    result = WriterResult(spec=spec, status="dropped", reason="")
    messages = writer_prompt(spec, example_code, patterns)
    failed_hashes: dict[str, str] = {}  # normalised hash -> the error it got (unchanged resubmits)
    for attempt in range(cfg.max_repairs + 1):
        try:
            reply = chat_fn(messages)
        except LLMError as exc:
            result.reason = (
                f"writer endpoint error ({exc.kind}) on attempt {attempt}: {str(exc)[:300]}"
            )
            result.attempts.append(WriteAttempt(attempt, "reply", result.reason, ""))
            return result
        code = extract_code(reply)
        sha = hashlib.sha256(code.encode()).hexdigest()
        stage, error = _check_one(code, spec, cfg, seen, failed_hashes)
        forged: dict[str, Any] | None = None
        if not error:
            cand = candidate_from_code(code, spec.seed, origin=f"llm:{model}", split=spec.split)
            forged = forge(cand, sandbox)
            result.forged = forged
            if forged.get("status") != "ok":
                stage, error = (
                    "forge",
                    f"[{forged.get('error_kind', '')}] {forged.get('error', '')}",
                )
            else:
                checks, verdict = verify(forged, sandbox)
                result.checks, result.verdict = checks, verdict
                if not verdict.get("kept"):
                    failed = [
                        f"- {c['check']}: {c['reason']}" for c in checks if not c.get("passed")
                    ]
                    stage, error = "verify", "\n".join(failed) or str(verdict.get("reason", ""))
                else:
                    result.attempts.append(WriteAttempt(attempt, "ok", "", sha))
                    result.status, result.code, result.candidate = "ok", code, cand
                    result.normalized_hash = normalized_hash(code)
                    result.reason = f"kept after {attempt} repair(s)"
                    seen.add(result.normalized_hash)
                    return result
        result.attempts.append(WriteAttempt(attempt, stage, error[: cfg.max_error_chars], sha))
        result.code = code
        if stage == "duplicate":
            # A duplicate is not a bug to repair: the spec is already covered.
            result.status, result.reason = "duplicate", error
            return result
        if stage in ("static", "forge", "verify"):
            with contextlib.suppress(WriterError):
                failed_hashes[normalized_hash(code)] = error
        result.reason = f"{stage} failed after {attempt + 1} attempt(s): {error[:500]}"
        messages = [
            *messages,
            {"role": "assistant", "content": reply[: cfg.max_code_chars]},
            repair_message(stage, error, cfg.max_error_chars),
        ]
    return result


def _check_one(
    code: str, spec: WriterSpec, cfg: WriterConfig, seen: set[str], failed: Mapping[str, str]
) -> tuple[str, str]:
    """(stage, error) of the host-side checks; ("", "") when the code may go to the sandbox."""
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
        return "duplicate", "normalised code hash equals an accepted generator or the example"
    if h in failed:
        return (
            "static",
            "this is the same code as a previous attempt, which failed with:\n" + failed[h],
        )
    return "", ""


# ---------------------------------------------------------------------------------------------
# many specs; the built-in library when there is no endpoint


def example_for(spec: WriterSpec) -> str:
    """A built-in generator of the same capability (another domain when possible) as the example."""
    try:
        from clawloop.generators import library
        from clawloop.generators.domains import domain_names
    except ImportError:
        return ""
    others = [d for d in domain_names() if d != spec.domain] or [spec.domain]
    for domain in (others[0], spec.domain):
        try:
            return library.render_generator(
                spec.capability, domain, spec.multihop, spec.dirtiness, spec.output_format
            )
        except (KeyError, ValueError, OSError):
            continue
    return ""


def write_generators(
    specs: Iterable[WriterSpec],
    endpoint: LLMEndpoint | None,
    sandbox: SandboxConfig,
    *,
    guidance: Mapping[str, Any] | None = None,
    cfg: WriterConfig = WriterConfig(),
    chat_fn: ChatFn | None = None,
    forge_fn: ForgeFn | None = None,
    verify_fn: VerifyFn | None = None,
) -> tuple[list[WriterResult], list[str]]:
    """Write a generator per spec with the endpoint (or chat_fn); returns (results, notes).

    Without an endpoint nothing is written: the note says synthesis uses the built-in library.
    """
    specs = list(specs)
    if chat_fn is None and endpoint is None:
        return [], [
            f"no generator-writer endpoint configured: {len(specs)} spec(s) use the built-in library"
        ]
    chat = chat_fn or endpoint_chat(
        endpoint, max_tokens=cfg.max_tokens, temperature=cfg.temperature
    )  # type: ignore[arg-type]
    model = endpoint.model if endpoint is not None else "scripted"
    patterns_by_cap: Mapping[str, str] = (guidance or {}).get("patterns") or {}
    seen: set[str] = set()
    results: list[WriterResult] = []
    for spec in specs:
        example = example_for(spec)
        if example:
            with contextlib.suppress(WriterError):
                seen.add(normalized_hash(example))  # a verbatim copy of the example is a duplicate
        results.append(
            write_generator(
                spec,
                chat,
                sandbox,
                model=model,
                example_code=example,
                patterns=str(patterns_by_cap.get(spec.capability, "")),
                seen_hashes=seen,
                cfg=cfg,
                forge_fn=forge_fn,
                verify_fn=verify_fn,
            )
        )
    kept = sum(r.status == "ok" for r in results)
    notes = [f"LLM writer ({model}): {kept}/{len(results)} generator(s) kept after forge + verify"]
    return results, notes


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


def llm_candidates(
    candidates: list[dict[str, Any]],
    endpoint: LLMEndpoint | None,
    sandbox: SandboxConfig,
    *,
    guidance: Mapping[str, Any] | None = None,
    cfg: WriterConfig = WriterConfig(),
    chat_fn: ChatFn | None = None,
    forge_fn: ForgeFn | None = None,
    verify_fn: VerifyFn | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Swap synthesize's built-in candidates for LLM-written generators of the same spec.

    A candidate whose generator could not be written (dropped or duplicate) keeps its built-in
    code, so the pool keeps its size and its capability mix; the notes say how many were replaced.
    Without an endpoint the candidates come back unchanged, with a note saying so.
    """
    results, notes = write_generators(
        [spec_from_candidate(c) for c in candidates],
        endpoint,
        sandbox,
        guidance=guidance,
        cfg=cfg,
        chat_fn=chat_fn,
        forge_fn=forge_fn,
        verify_fn=verify_fn,
    )
    if not results:
        return list(candidates), notes
    out = [
        r.candidate if r.status == "ok" and r.candidate else dict(c)
        for c, r in zip(candidates, results, strict=True)
    ]
    kept_builtin = sum(1 for r in results if r.status != "ok")
    if kept_builtin:
        notes.append(
            f"{kept_builtin} candidate(s) kept their built-in generator (writer dropped or duplicated)"
        )
    return out, notes
