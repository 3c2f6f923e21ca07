"""Instantiate skill paths as verified tasks: plan, construct, check, repair (up to 3 times).

One path: the Planner plans once; then each attempt the Constructor writes a generator, which is
statically checked on the host (ast only), forged in the sandbox (generators/forge.py), verified
agent-free (generators/verify/__init__.py: oracle passes, no-op fails, leak, trivial probes, determinism)
and judged by the rubric (rubric.py: the instruction and the tests agree). The first failure
goes back to the Constructor with its text, up to `max_repairs` times, so at most
1 + max_repairs constructions. Every attempt is a row (`ATTEMPT_STAGES` names how far it got);
a path whose attempts all fail has no candidate, and its rows say why. Faults that are not the
generator's (the LLM endpoint, the sandbox engine, a judge that gives no valid verdict) end the
path with a row saying so, never an uncaught crash; repairing the code would not help them.

    result = instantiate(path, skills, chat, SandboxConfig(backend="bwrap"), seed=0)
    result.candidate   # a CANDIDATES row, origin "skill_graph", the path as JSON in "skill_path"
    cands, attempts = synthesize_tasks(paths, skills, chat, sandbox, out_dir, seed=0)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clawloop.generators.candidates import candidate_row, code_sha256
from clawloop.generators.contract import ContractError
from clawloop.generators.forge import forge_candidate
from clawloop.generators.verify import verify_task
from clawloop.harness.llm import ChatFn, LLMError
from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
from clawloop.harness.sandbox.scratch import scratch
from clawloop.harness.taskfolder.folder import TaskFolderError
from clawloop.harness.taskfolder.packing import unpack_tar
from clawloop.harness.taskfolder.rows import export_rows
from clawloop.synthesis.llm_writer import (
    WriterError,
    forge_failure,
    normalized_hash,
    verify_failure,
)
from clawloop.synthesis.skillgraph.construct import (
    ConstructError,
    check_code,
    construct,
    declared_packages,
)
from clawloop.synthesis.skillgraph.model import SkillPath, SkillRecord
from clawloop.synthesis.skillgraph.plan import Plan, PlanError, check_plan, plan_path
from clawloop.synthesis.skillgraph.prompts import EXAMPLE_GENERATOR
from clawloop.synthesis.skillgraph.rubric import RubricError, judge_folder

ORIGIN = "skill_graph"
PATH_KEY = "skill_path"  # the candidate row's key holding the path as JSON
ATTEMPT_STAGES = ("plan", "construct", "static", "forge", "verify", "rubric", "kept")


@dataclass
class Instantiated:
    """One path's outcome: every attempt's row, and the kept task (or None)."""

    path_id: str
    attempts: list[dict[str, Any]] = field(default_factory=list)
    candidate: dict[str, Any] | None = None  # CANDIDATES row + PATH_KEY, when kept
    forged: dict[str, Any] | None = None  # the kept task's FORGED row (task_tar: the folder)
    plan: Plan | None = None
    fault: str = ""  # an infrastructure fault (endpoint, sandbox) ended the path: not a result

    @property
    def kept(self) -> bool:
        return self.candidate is not None


@dataclass(frozen=True)
class _Outcome:
    """How far one attempt got. `final`: stop the path (kept, or a fault repair cannot fix)."""

    stage: str
    passed: bool
    reason: str
    final: bool = False
    candidate: dict[str, Any] | None = None
    forged: dict[str, Any] | None = None
    packages: tuple[str, ...] = ()
    rubric: str = ""  # the judge's verdict as JSON, when it was asked
    infra: bool = False  # the endpoint or the sandbox failed, not the generator: retry the path


def path_json(path: SkillPath) -> str:
    """The path as JSON: {"path_id", "steps": [{skill, pre, post, ...}]} (the PATH_KEY value)."""
    return json.dumps(
        {"path_id": path.path_id, "steps": [asdict(s) for s in path.steps]},
        ensure_ascii=False,
        sort_keys=True,
    )


def attempt_row(
    path: SkillPath, attempt: int, out: _Outcome, code: str = "", task_id: str = ""
) -> dict[str, Any]:
    """One attempt row: how far it got, why it stopped, and the code it tried."""
    return {
        "path_id": path.path_id,
        "attempt": attempt,
        "stage": out.stage,
        "passed": out.passed,
        "reason": out.reason,
        "generator_sha256": code_sha256(code) if code else "",
        "code": code,
        "task_id": task_id,
        "packages": list(out.packages),
        "rubric": out.rubric,
    }


INFRA_LLM_KINDS = ("timeout", "connection", "http")  # the endpoint failed, not the model's reply


def _llm_fault(role: str, exc: LLMError) -> str:
    return f"LLM fault in the {role} ({exc.kind}): {str(exc)[:400]}; the path ends here"


def _is_infra(exc: LLMError) -> bool:
    return exc.kind in INFRA_LLM_KINDS


def _host_checks(code: str, plan: Plan, failed: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """("", packages) when the code may go to the sandbox, else (why, ())."""
    try:
        check_code(code, plan)
        h = normalized_hash(code)
        packages = tuple(declared_packages(code))
    except (ConstructError, WriterError) as exc:
        return str(exc), ()
    if h in failed:
        return f"this is the same code as an earlier attempt, which failed with:\n{failed[h]}", ()
    return "", packages


def _rubric(forged: dict[str, Any], chat: ChatFn) -> _Outcome:
    """Judge the forged folder; agreement passes, disagreement is the Constructor's to repair."""
    with scratch("clawloop-rubric-") as tmp:
        task_dir = unpack_tar(forged["task_tar"], Path(tmp, "task"))
        try:
            verdict = judge_folder(task_dir, chat)
        except LLMError as exc:
            why = _llm_fault("rubric judge", exc)
            return _Outcome("rubric", False, why, final=True, infra=_is_infra(exc))
        except RubricError as exc:
            return _Outcome("rubric", False, f"no valid rubric verdict: {exc}", final=True)
    text = verdict.model_dump_json()
    if not verdict.agree:
        return _Outcome("rubric", False, verdict.feedback(), rubric=text)
    return _Outcome("kept", True, verdict.reason or "instruction and tests agree", rubric=text)


def _attempt(
    code: str,
    plan: Plan,
    chat: ChatFn,
    sandbox: SandboxConfig,
    seed: int,
    split: str,
    failed: Mapping[str, str],
) -> _Outcome:
    """static -> forge -> verify -> rubric for one generator; the first failure ends it."""
    why, packages = _host_checks(code, plan, failed)
    if why:
        return _Outcome("static", False, why)
    try:
        cand = candidate_row(code, seed, origin=ORIGIN, split=split)
    except ContractError as exc:
        return _Outcome("static", False, str(exc))
    forged = forge_candidate(cand, sandbox)
    if forged["status"] != "ok":
        sandbox_fault = forged.get("error_kind") == "sandbox"
        why = forge_failure(forged)
        return _Outcome("forge", False, why, final=sandbox_fault, infra=sandbox_fault)
    try:
        checks, verdict = verify_task(forged, sandbox)
    except SandboxError as exc:
        why = f"sandbox fault while verifying: {exc}"
        return _Outcome("verify", False, why, final=True, infra=True)
    if not verdict["kept"]:
        return _Outcome("verify", False, verify_failure(verdict, checks))
    try:
        judged = _rubric(forged, chat)
    except TaskFolderError as exc:
        return _Outcome("rubric", False, f"cannot unpack the forged task: {exc}", final=True)
    if not judged.passed:
        return _Outcome(
            judged.stage, False, judged.reason, judged.final, rubric=judged.rubric,
            infra=judged.infra,
        )  # fmt: skip
    return _Outcome("kept", True, judged.reason, True, cand, forged, packages, rubric=judged.rubric)


def instantiate(
    path: SkillPath,
    skills: Mapping[str, SkillRecord] | Sequence[SkillRecord],
    chat: ChatFn,
    sandbox: SandboxConfig,
    seed: int,
    max_repairs: int = 3,
    *,
    split: str = "train",
    judge_chat: ChatFn | None = None,
    with_example: bool = True,
    plan: Plan | None = None,
) -> Instantiated:
    """Plan `path` once, then construct -> static -> forge -> verify -> rubric, repairing with
    the failure fed back up to `max_repairs` times. `judge_chat` is the rubric judge's endpoint
    (default: `chat`); `plan`, when given (checked against `path`), is used instead of asking the
    Planner. Never raises for LLM, sandbox or generator faults: they are rows."""
    result = Instantiated(path.path_id)
    try:
        plan = plan_path(path, skills, chat) if plan is None else check_plan(plan, path)
    except (PlanError, LLMError, ValueError) as exc:  # ValueError: a given plan misfits the path
        why = _llm_fault("Planner", exc) if isinstance(exc, LLMError) else f"no plan: {exc}"
        result.attempts.append(attempt_row(path, 0, _Outcome("plan", False, why)))
        if isinstance(exc, LLMError) and _is_infra(exc):
            result.fault = why
        return result
    result.plan = plan
    failed: dict[str, str] = {}
    with contextlib.suppress(WriterError):
        failed[normalized_hash(EXAMPLE_GENERATOR)] = "it copies the example generator verbatim"
    code, feedback, stage = "", "", ""
    for attempt in range(max(0, max_repairs) + 1):
        try:
            code = construct(
                plan, path, chat, feedback, previous=code, stage=stage, with_example=with_example
            )
        except LLMError as exc:
            out = _Outcome("construct", False, _llm_fault("Constructor", exc))
            result.attempts.append(attempt_row(path, attempt, out))
            result.fault = out.reason if _is_infra(exc) else ""
            return result
        out = _attempt(code, plan, judge_chat or chat, sandbox, seed, split, failed)
        task_id = str((out.candidate or {}).get("task_id", ""))
        result.attempts.append(attempt_row(path, attempt, out, code, task_id))
        if out.passed and out.candidate is not None:
            result.candidate = {**out.candidate, PATH_KEY: path_json(path)}
            result.forged = out.forged
            return result
        if out.final:
            result.fault = out.reason if out.infra else ""
            return result
        with contextlib.suppress(WriterError):
            failed[normalized_hash(code)] = out.reason
        feedback, stage = out.reason, out.stage
    return result


def synthesize_tasks(
    paths: Sequence[SkillPath],
    skills: Mapping[str, SkillRecord] | Sequence[SkillRecord],
    chat: ChatFn,
    sandbox: SandboxConfig,
    out_dir: Path | None,
    seed: int,
    *,
    max_repairs: int = 3,
    split: str = "train",
    judge_chat: ChatFn | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Instantiate each path (seed + its index); returns (kept CANDIDATES rows, every attempt
    row). With `out_dir`, each kept task is also written there as a Harbor folder
    out_dir/<task_id>/ (taskfolder.export_rows)."""
    candidates: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    for i, path in enumerate(paths):
        res = instantiate(
            path,
            skills,
            chat,
            sandbox,
            seed + i,
            max_repairs,
            split=split,
            judge_chat=judge_chat,
        )
        attempts.extend(res.attempts)
        if res.candidate is not None and res.forged is not None:
            candidates.append(res.candidate)
            if out_dir is not None:
                export_rows([res.forged], Path(out_dir))
    return candidates, attempts
