"""The Planner: a path's prompt, the plan's validation, and malformed replies repaired over real
HTTP (a scripted fake that answers by how many replies the conversation already holds)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.harness.llm import LLMEndpoint, LLMError, endpoint_chat
from clawloop.synthesis.skillgraph.model import PathStep, SkillPath, SkillRecord
from clawloop.synthesis.skillgraph.plan import (
    Plan,
    PlanError,
    check_plan,
    plan_path,
    step_views,
)
from clawloop.synthesis.skillgraph.prompts import PLANNER_MARK, ReplyError, parse_json_reply

PATH = SkillPath(
    "p1",
    (
        PathStep("pdf-extract", "n1", "n2", "a folder of scanned PDF invoices", "invoice rows"),
        PathStep("xlsx-report", "n2", "n3", "invoice rows", "a spreadsheet report", "Write xlsx"),
    ),
)
LONG_BODY = "## When to use\nInvoices.\n" + "x" * 5000
SKILLS = {
    "pdf-extract": SkillRecord(
        "pdf-extract", "pdf", "Extract tables from PDFs", LONG_BODY, ("scripts/x.py",), "h"
    ),
}


def good_plan(**over: Any) -> dict[str, Any]:
    plan = {
        "goal": "Turn a folder of invoices into a per-vendor total report.",
        "domain": "Bookbinding Supplies",
        "files": [{"path": "invoices/a.txt", "kind": "txt", "holds": "one invoice"}],
        "steps": [
            {"skill": "pdf-extract", "state": "invoice rows in memory"},
            {"skill": "xlsx-report", "state": "the report written"},
        ],
        "outputs": [{"path": "output/totals.csv", "format": "csv", "contains": "vendor totals"}],
        "checks": [{"fact": "total per vendor", "output": "output/totals.csv"}],
    }
    plan.update(over)
    return plan


def chat_of(fake: FakeOpenAI):
    return endpoint_chat(LLMEndpoint(fake.base_url, "fake", max_retries=0, request_timeout_s=10))


def test_a_valid_plan_is_read_and_tied_to_its_path() -> None:
    plan = check_plan(Plan.model_validate(good_plan()), PATH)
    assert plan.path_id == "p1" and plan.domain == "bookbinding_supplies"
    assert plan.output_format == "csv" and plan.multihop == 0
    two = good_plan(
        outputs=[
            {"path": "output/a.json", "format": "json", "contains": "a"},
            {"path": "output/b.md", "format": "report", "contains": "b"},
        ],
        checks=[{"fact": "x", "output": "output/a.json"}, {"fact": "y", "output": "output/b.md"}],
    )
    assert check_plan(Plan.model_validate(two), PATH).output_format == "multi"


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"steps": [{"skill": "pdf-extract", "state": "s"}]}, "the path has 2 steps"),
        (
            {"steps": [{"skill": "a", "state": "s"}, {"skill": "xlsx-report", "state": "t"}]},
            "step 1: 'a' (expected 'pdf-extract')",
        ),
        ({"checks": [{"fact": "f", "output": "output/other.csv"}]}, "not in outputs"),
        (
            {"files": [{"path": "output/totals.csv", "kind": "csv", "holds": "x"}]},
            "overwrite starting files",
        ),
    ],
)
def test_cross_field_rules_say_what_is_wrong(over: dict, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        check_plan(Plan.model_validate(good_plan(**over)), PATH)
    assert needle in str(info.value)


def test_an_output_without_a_check_and_bad_paths_are_refused() -> None:
    extra = good_plan(
        outputs=[
            {"path": "output/totals.csv", "format": "csv", "contains": "t"},
            {"path": "output/x.json", "format": "json", "contains": "x"},
        ]
    )
    with pytest.raises(ValueError, match="outputs with no check"):
        check_plan(Plan.model_validate(extra), PATH)
    with pytest.raises(ValueError, match="escapes the workspace"):
        Plan.model_validate(good_plan(files=[{"path": "../etc", "kind": "x", "holds": "y"}]))
    with pytest.raises(ValueError, match="format"):
        Plan.model_validate(good_plan(outputs=[{"path": "o.x", "format": "xlsx", "contains": "c"}]))


def test_the_prompt_carries_each_step_with_a_trimmed_body() -> None:
    views = step_views(PATH, SKILLS)
    assert views[0]["description"] == "Extract tables from PDFs"
    assert views[1]["description"] == "Write xlsx" and views[1]["body"] == ""  # no record
    assert views[0]["pre"] == "a folder of scanned PDF invoices"
    seen: list[list[dict]] = []

    def chat(messages: list[dict]) -> str:
        seen.append(messages)
        return json.dumps(good_plan())

    plan_path(PATH, list(SKILLS.values()), chat)
    prompt = seen[0][1]["content"]
    assert PLANNER_MARK in seen[0][0]["content"]
    assert "a spreadsheet report" in prompt and "`xlsx-report`" in prompt
    assert "[... trimmed]" in prompt and len(prompt) < 6000


def test_a_malformed_plan_is_repaired_with_the_error_fed_back() -> None:
    def route(messages: list[dict]) -> str:
        n = sum(m["role"] == "assistant" for m in messages)
        if n == 0:
            return "Sure! {'goal': 'single quotes are not JSON'}"
        if n == 1:
            return "```json\n" + json.dumps(good_plan(checks=[])) + "\n```"  # schema error
        return "```json\n" + json.dumps(good_plan()) + "\n```"

    with FakeOpenAI("routed", router=route) as fake:
        plan = plan_path(PATH, SKILLS, chat_of(fake))
        bodies = [r["messages"] for r in fake.requests]
    assert plan.domain == "bookbinding_supplies" and len(bodies) == 3
    assert "does not parse" in bodies[1][-1]["content"]
    assert "checks" in bodies[2][-1]["content"] and "at least 1" in bodies[2][-1]["content"]


def test_no_valid_plan_after_two_reasks_is_a_plan_error() -> None:
    with FakeOpenAI("routed", router=lambda m: json.dumps(good_plan(steps=[]))) as fake:
        with pytest.raises(PlanError, match="3 replies, none valid"):
            plan_path(PATH, SKILLS, chat_of(fake))
        assert len(fake.requests) == 3


def test_an_endpoint_fault_propagates_as_llm_error() -> None:
    with FakeOpenAI("drop") as fake, pytest.raises(LLMError):
        plan_path(PATH, SKILLS, chat_of(fake))


def test_json_is_found_in_fences_or_prose() -> None:
    assert parse_json_reply('<think>{"no": 1}</think> ok {"a": {"b": 2}} done') == {"a": {"b": 2}}
    assert parse_json_reply('```json\n{"a": 1}\n```\nand {"b": 2}') == {"a": 1}
    with pytest.raises(ReplyError, match="no JSON object"):
        parse_json_reply("nothing here")
