"""The Constructor: its prompt (contract, plan, metadata), repairs, host-side checks, declared
packages; and the example generator it is shown forges and passes verify in the real sandbox."""

from __future__ import annotations

import shutil

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.generators.candidates import candidate_row
from clawloop.generators.forge import forge_candidate
from clawloop.generators.verify import verify_task
from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.synthesis.llm_prompts import CONTRACT_TEXT
from clawloop.synthesis.skillgraph.construct import (
    ConstructError,
    check_code,
    construct,
    declared_packages,
    metadata_literal,
    spec_for,
)
from clawloop.synthesis.skillgraph.model import PathStep, SkillPath
from clawloop.synthesis.skillgraph.plan import Plan, check_plan
from clawloop.synthesis.skillgraph.prompts import CONSTRUCTOR_MARK, EXAMPLE_GENERATOR

PATH = SkillPath("p-trail", (PathStep("csv-join", "a", "b"), PathStep("json-summary", "b", "c")))
PLAN = check_plan(
    Plan.model_validate(
        {
            "goal": "Find overdue trail segments from an index and an inspection log.",
            "domain": "trail_maintenance",
            "multihop": 1,
            "files": [
                {"path": "segments.csv", "kind": "csv", "holds": "segments and limits"},
                {"path": "inspections.csv", "kind": "csv", "holds": "inspections"},
            ],
            "steps": [
                {"skill": "csv-join", "state": "inspections joined to limits"},
                {"skill": "json-summary", "state": "overdue list written"},
            ],
            "outputs": [{"path": "output/overdue.json", "format": "json", "contains": "ids"}],
            "checks": [{"fact": "overdue segments", "output": "output/overdue.json"}],
        }
    ),
    PATH,
)


def test_the_example_matches_the_plan_metadata_and_passes_the_host_checks() -> None:
    assert spec_for(PLAN).output_format == "json" and spec_for(PLAN).capability == "skill_graph"
    assert metadata_literal(PLAN).startswith('{"capability": "skill_graph"')
    check_code(EXAMPLE_GENERATOR, PLAN)
    assert declared_packages(EXAMPLE_GENERATOR) == []


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda c: c.replace('"multihop": 1', '"multihop": 2'), "multihop=2 (asked for 1)"),
        (lambda c: c.replace("import csv", "import numpy"), "found: numpy"),
        (lambda c: c.replace("def solve(", "def solution("), "does not define solve()"),
        (lambda c: "print('hello')\n", "no generator code"),
        (
            lambda c: c.replace(
                '"output_format": "json"}', '"output_format": "json", "packages": "pandas"}'
            ),
            'GENERATOR["packages"] must be a list',
        ),
    ],
)
def test_host_checks_say_what_is_wrong(edit, needle: str) -> None:
    with pytest.raises(ConstructError) as info:
        check_code(edit(EXAMPLE_GENERATOR), PLAN)
    assert needle in str(info.value)


def test_declared_packages_are_read_from_the_literal() -> None:
    code = EXAMPLE_GENERATOR.replace(
        '"output_format": "json"}', '"output_format": "json", "packages": ["openpyxl", "pypdf>=4"]}'
    )
    check_code(code, PLAN)  # the contract parser ignores the extra key
    assert declared_packages(code) == ["openpyxl", "pypdf>=4"]
    assert candidate_row(code, 1)["capability"] == "skill_graph"


def test_construct_asks_with_contract_plan_and_metadata_and_repairs_with_the_failure() -> None:
    reply = "Here it is.\n```python\n" + EXAMPLE_GENERATOR + "```\nDone."
    with FakeOpenAI("routed", router=lambda m: reply) as fake:
        chat = endpoint_chat(LLMEndpoint(fake.base_url, "fake", max_retries=0))
        code = construct(PLAN, PATH, chat)
        again = construct(PLAN, PATH, chat, "oracle: scores 0.5", previous=code, stage="verify")
        first, repair = (r["messages"] for r in fake.requests)
    assert code == EXAMPLE_GENERATOR.strip() + "\n" and again == code
    assert CONSTRUCTOR_MARK in first[0]["content"]
    user = first[1]["content"]
    assert CONTRACT_TEXT in user and '"path_id": "p-trail"' in user
    assert "inspections joined to limits" in user and metadata_literal(PLAN) in user
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert "failed verification" in repair[-1]["content"] and "scores 0.5" in repair[-1]["content"]
    assert "def solve" in repair[2]["content"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_example_generator_forges_and_verifies(seed: int) -> None:
    sandbox = SandboxConfig(backend="bwrap")
    forged = forge_candidate(candidate_row(EXAMPLE_GENERATOR, seed, origin="skill_graph"), sandbox)
    assert forged["status"] == "ok", forged["error"]
    _, verdict = verify_task(forged, sandbox)
    assert verdict["kept"], verdict["reason"]
