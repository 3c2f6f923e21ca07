"""The Planner: a sampled skill path -> a structured, validated task plan.

A path is a chain scenario -> skill -> scenario. The Planner (an LLM through the one client) reads
each step's skill (name, description, a trimmed SKILL.md body) and its pre/post scenarios and
answers with a JSON plan: the goal, the files of the starting workspace, the state after each
step, the outputs the agent writes and the facts the tests check. The plan is checked here
(pydantic, plus cross-field rules: one state per step, every check tied to an output, paths
relative, outputs never overwriting a starting file); a bad reply goes back with the error, up to
`max_reasks` times, then a PlanError. The plan is what the Constructor implements.

    plan = plan_path(path, skills_by_name, chat)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from clawloop.generators.contract import ContractError, check_relpath
from clawloop.harness.llm import ChatFn
from clawloop.synthesis.skillgraph.model import SkillPath, SkillRecord
from clawloop.synthesis.skillgraph.prompts import ReplyError, ask_json, planner_messages

_DOMAIN_RE = re.compile(r"[^a-z0-9]+")


class PlanError(ValueError):
    """The Planner gave no valid plan for a path (after the re-asks)."""


def _relpath(p: str) -> str:
    try:
        return check_relpath(p, "path")
    except ContractError as exc:
        raise ValueError(str(exc)) from exc


class PlanFile(BaseModel):
    model_config = ConfigDict(extra="ignore")
    path: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    holds: str = Field(min_length=1)

    @field_validator("path")
    @classmethod
    def _check_path(cls, v: str) -> str:
        return _relpath(v)


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="ignore")
    skill: str = Field(min_length=1)
    state: str = Field(min_length=1)


class PlanOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    path: str = Field(min_length=1)
    format: Literal["json", "csv", "report"]
    contains: str = Field(min_length=1)

    @field_validator("path")
    @classmethod
    def _check_path(cls, v: str) -> str:
        return _relpath(v)


class PlanCheck(BaseModel):
    model_config = ConfigDict(extra="ignore")
    fact: str = Field(min_length=1)
    output: str = Field(min_length=1)


class Plan(BaseModel):
    """What the Planner decided; `path_id` ties it to its path."""

    model_config = ConfigDict(extra="ignore")
    goal: str = Field(min_length=10)
    domain: str = Field(min_length=1)
    multihop: int = Field(default=0, ge=0, le=3)
    dirtiness: int = Field(default=0, ge=0, le=3)
    files: list[PlanFile] = Field(min_length=1)
    steps: list[PlanStep] = Field(min_length=1)
    outputs: list[PlanOutput] = Field(min_length=1)
    checks: list[PlanCheck] = Field(min_length=1)
    path_id: str = ""

    @field_validator("domain")
    @classmethod
    def _snake(cls, v: str) -> str:
        out = _DOMAIN_RE.sub("_", v.strip().lower()).strip("_")
        if not out:
            raise ValueError(f"domain {v!r} has no letters or digits")
        return out[:60]

    @property
    def output_format(self) -> str:
        """The contract's output_format: the one output's format, or "multi" for several."""
        return self.outputs[0].format if len(self.outputs) == 1 else "multi"

    def to_json(self) -> str:
        return json.dumps(self.model_dump(exclude={"path_id"}), indent=2, ensure_ascii=False)


def check_plan(plan: Plan, path: SkillPath) -> Plan:
    """Cross-field rules a schema cannot say; ValueError naming the first broken one."""
    want = [s.skill for s in path.steps]
    got = [s.skill for s in plan.steps]
    if len(got) != len(want):
        raise ValueError(
            f"steps has {len(got)} entries; the path has {len(want)} steps ({', '.join(want)}): "
            "give one state per step, in order"
        )
    wrong = [
        f"step {i + 1}: {g!r} (expected {w!r})"
        for i, (g, w) in enumerate(zip(got, want, strict=True))
        if g != w
    ]
    if wrong:
        raise ValueError("steps name the wrong skills: " + "; ".join(wrong))
    outputs = [o.path for o in plan.outputs]
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"outputs repeat a path: {outputs}")
    clash = sorted(set(outputs) & {f.path for f in plan.files})
    if clash:
        raise ValueError(f"outputs {clash} would overwrite starting files; write them elsewhere")
    orphans = [c.output for c in plan.checks if c.output not in outputs]
    if orphans:
        raise ValueError(f"checks name outputs that are not in outputs: {sorted(set(orphans))}")
    unchecked = [o for o in outputs if o not in {c.output for c in plan.checks}]
    if unchecked:
        raise ValueError(f"outputs with no check: {unchecked}; every output needs a checked fact")
    return plan.model_copy(update={"path_id": path.path_id})


def step_views(path: SkillPath, skills: Mapping[str, SkillRecord]) -> list[dict[str, str]]:
    """What the Planner sees of each step: the skill's name, description and SKILL.md body (from
    its record when there is one) and the step's scenario texts."""
    out = []
    for s in path.steps:
        rec = skills.get(s.skill)
        out.append(
            {
                "skill": s.skill,
                "description": (rec.description if rec else "") or s.skill_description,
                "body": rec.body if rec else "",
                "pre": s.pre_text or s.pre,
                "post": s.post_text or s.post,
            }
        )
    return out


def skills_by_name(
    skills: Mapping[str, SkillRecord] | Sequence[SkillRecord],
) -> dict[str, SkillRecord]:
    """Skill records keyed by name, from a mapping or a list."""
    if isinstance(skills, Mapping):
        return dict(skills)
    return {s.name: s for s in skills}


def plan_path(
    path: SkillPath,
    skills: Mapping[str, SkillRecord] | Sequence[SkillRecord],
    chat: ChatFn,
    max_reasks: int = 2,
) -> Plan:
    """Ask the Planner for `path`'s plan; a malformed or invalid reply goes back with the error up
    to `max_reasks` times. Raises PlanError when none is valid (LLMError from `chat` propagates)."""
    if not path.steps:
        raise PlanError(f"path {path.path_id}: has no steps; nothing to plan")

    def validate(value: Any) -> Plan:
        try:
            return check_plan(Plan.model_validate(value), path)
        except ValidationError as exc:
            raise ValueError(_short_validation(exc)) from exc

    messages = planner_messages(step_views(path, skills_by_name(skills)))
    try:
        return ask_json(chat, messages, validate, max_reasks, f"Planner, path {path.path_id}")
    except ReplyError as exc:
        raise PlanError(str(exc)) from exc


def _short_validation(exc: ValidationError) -> str:
    """pydantic's errors as one line each: where, what (no URLs)."""
    lines = [
        f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()[:12]
    ]
    return "the plan does not match the schema:\n" + "\n".join(lines)
