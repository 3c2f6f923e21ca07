"""The Constructor: a task plan -> one generator file in the project's contract.

The Constructor (an LLM through the one client) gets the generator contract (the same text the
LLM writer gets, synthesis/llm_prompts.py), the plan and the metadata wanted, and writes ONE
standard-library generator: `GENERATOR = {...}` (capability "skill_graph", the plan's domain and
difficulty, output_format from the plan's outputs), a deterministic `build(seed)` and a reference
`solve(workspace)`. Written that way, a SkillSynth task goes through forge, verify, ablation and
Harbor export unchanged. On a repair the Constructor sees its previous code and the failure.

Its code is only parsed here (`check_code`: llm_writer's static_check, ast only); it runs in a
sandbox, later, in forge and verify. It may declare extra PyPI packages for the agent's
environment as `GENERATOR["packages"] = [...]` inside the literal (the contract parser ignores
keys it does not know); `declared_packages` reads them so the attempt row can carry them.

    code = construct(plan, path, chat)
    check_code(code, plan)
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from clawloop.harness.llm import ChatFn
from clawloop.synthesis.llm_prompts import WriterSpec
from clawloop.synthesis.llm_writer import WriterError, extract_code, static_check
from clawloop.synthesis.skillgraph.model import SkillPath
from clawloop.synthesis.skillgraph.plan import Plan
from clawloop.synthesis.skillgraph.prompts import (
    EXAMPLE_GENERATOR,
    constructor_messages,
    constructor_repair,
    trim,
)

CAPABILITY = "skill_graph"
MAX_CODE_CHARS = 60_000
_PACKAGE_RE = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(\[[A-Za-z0-9,._-]+\])?([<>=!~]=?[\w.*]+)?$"
)


class ConstructError(ValueError):
    """The Constructor's code fails a host-side (static) check; the message is fed back."""


def spec_for(plan: Plan) -> WriterSpec:
    """The GENERATOR metadata a plan asks for, as the writer's spec (for static_check)."""
    return WriterSpec(
        capability=CAPABILITY,
        domain=plan.domain,
        multihop=plan.multihop,
        dirtiness=plan.dirtiness,
        output_format=plan.output_format,
    )


def metadata_literal(plan: Plan) -> str:
    """`{"capability": ..., ...}` exactly as the Constructor must write it."""
    spec = spec_for(plan)
    return json.dumps(
        {
            "capability": spec.capability,
            "domain": spec.domain,
            "multihop": spec.multihop,
            "dirtiness": spec.dirtiness,
            "output_format": spec.output_format,
        }
    )


def construct_messages(
    plan: Plan,
    path: SkillPath,
    feedback: str = "",
    *,
    previous: str = "",
    stage: str = "",
    with_example: bool = True,
) -> list[dict[str, Any]]:
    """The Constructor's conversation: the first request; on a repair also its previous code
    (as its own reply) and the failure of `stage` (static, forge, verify, rubric)."""
    plan_text = json.dumps(
        {
            "path_id": path.path_id,
            "skills": [s.skill for s in path.steps],
            **json.loads(plan.to_json()),
        },
        indent=2,
        ensure_ascii=False,
    )
    messages = constructor_messages(
        plan_text, metadata_literal(plan), EXAMPLE_GENERATOR if with_example else ""
    )
    if previous.strip():
        messages.append(
            {"role": "assistant", "content": f"```python\n{trim(previous, MAX_CODE_CHARS)}\n```"}
        )
    if feedback.strip():
        messages.append(constructor_repair(stage, feedback))
    return messages


def construct(
    plan: Plan,
    path: SkillPath,
    chat: ChatFn,
    feedback: str = "",
    *,
    previous: str = "",
    stage: str = "",
    with_example: bool = True,
) -> str:
    """Ask the Constructor for the generator code of `plan` (a repair when `feedback` is given:
    pass the failing code as `previous` and the failed stage). Returns the extracted code,
    unchecked (see check_code). LLMError from `chat` propagates."""
    messages = construct_messages(
        plan, path, feedback, previous=previous, stage=stage, with_example=with_example
    )
    return extract_code(chat(messages))


def check_code(code: str, plan: Plan) -> None:
    """Host-side checks, ast only: a generator is there, its metadata is the plan's, only the
    standard library is imported, any declared packages are well-formed. Raises ConstructError."""
    if not code.strip() or "def build" not in code:
        raise ConstructError(
            "no generator code found (expected one ```python block defining GENERATOR, build, solve)"
        )
    try:
        static_check(code, spec_for(plan), MAX_CODE_CHARS)
        declared_packages(code)
    except WriterError as exc:
        raise ConstructError(str(exc)) from exc


def declared_packages(code: str) -> list[str]:
    """GENERATOR["packages"]: the extra PyPI packages the generator asks for ([] when none).
    Raises WriterError when the key is there but is not a list of package specifiers."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise WriterError(f"SyntaxError: {exc.msg} (line {exc.lineno})") from exc
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "GENERATOR" for t in node.targets
        ):
            try:
                meta = ast.literal_eval(node.value)
            except ValueError:
                return []  # static_check reports a non-literal GENERATOR
            pkgs = meta.get("packages", []) if isinstance(meta, dict) else []
            if not isinstance(pkgs, list) or not all(
                isinstance(p, str) and _PACKAGE_RE.match(p) for p in pkgs
            ):
                raise WriterError(
                    'GENERATOR["packages"] must be a list of PyPI package names such as '
                    f'["openpyxl", "pypdf>=4"], got {pkgs!r}'
                )
            return list(pkgs)
    return []
