"""SkillSynth instantiation end to end, with a scripted Planner / Constructor / judge over real
HTTP and the real sandbox: plan -> construct -> forge -> verify -> rubric -> repair -> kept, a path
dropped after 3 repairs, LLM faults as rows, and the kept task exported as a Harbor folder."""

from __future__ import annotations

import itertools
import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from doubles.fake_openai import FakeOpenAI
from doubles.skillsynth import generator, plan_for, router_for, system_of

from clawloop.generators.verify import verify_task
from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.rows import import_folder
from clawloop.synthesis.skillgraph.instantiate import (
    ATTEMPT_STAGES,
    PATH_KEY,
    instantiate,
    synthesize_tasks,
)
from clawloop.synthesis.skillgraph.model import PathStep, SkillPath, SkillRecord
from clawloop.synthesis.skillgraph.prompts import CONSTRUCTOR_MARK, JUDGE_MARK, PLANNER_MARK

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")

PATH = SkillPath(
    path_id="p-rain",
    steps=(
        PathStep("csv-join", "s1", "s2", "a folder of CSV station logs", "rows joined by station"),
        PathStep("json-summary", "s2", "s3", "rows joined by station", "a JSON summary report"),
    ),
)
SKILLS = [
    SkillRecord(
        "csv-join", "csv-join", "Join CSV files on a key column", "# Join\nUse csv.", (), "a"
    ),
    SkillRecord("json-summary", "json-summary", "Summarise rows as JSON", "# Summary", (), "b"),
]


def chat_of(fake: FakeOpenAI):
    return endpoint_chat(LLMEndpoint(fake.base_url, "fake", max_retries=0, request_timeout_s=10))


SANDBOX = SandboxConfig(backend="bwrap")


def test_rubric_failure_is_repaired_and_the_task_kept_and_exported(tmp_path: Path) -> None:
    route = router_for(lambda n: generator(asks=n > 0))
    with FakeOpenAI("routed", router=route) as fake:
        cands, attempts = synthesize_tasks([PATH], SKILLS, chat_of(fake), SANDBOX, tmp_path, seed=5)
        roles = [system_of(r["messages"]).split("]")[0] + "]" for r in fake.requests]
    assert roles == [PLANNER_MARK, CONSTRUCTOR_MARK, JUDGE_MARK, CONSTRUCTOR_MARK, JUDGE_MARK]
    assert [(a["attempt"], a["stage"], a["passed"]) for a in attempts] == [
        (0, "rubric", False),
        (1, "kept", True),
    ]
    assert "wettest_station" in attempts[0]["reason"]
    assert json.loads(attempts[0]["rubric"])["unasked_tests"] == ["wettest_station"]
    assert all(a["stage"] in ATTEMPT_STAGES and a["path_id"] == "p-rain" for a in attempts)
    assert attempts[0]["generator_sha256"] != attempts[1]["generator_sha256"]
    # the repair request carried the judge's finding back to the Constructor
    repair = fake.requests[3]["messages"]
    assert "wettest_station" in repair[-1]["content"] and repair[-2]["role"] == "assistant"

    (cand,) = cands
    assert cand["origin"] == "skill_graph" and cand["capability"] == "skill_graph"
    assert cand["domain"] == "rain_gauges" and cand["seed"] == 5
    assert json.loads(cand[PATH_KEY])["steps"][1]["skill"] == "json-summary"
    assert cand["task_id"] == attempts[1]["task_id"]
    folder = tmp_path / cand["task_id"]
    meta = tomllib.loads((folder / "task.toml").read_text())
    assert meta["task"]["name"].endswith("/" + cand["task_id"])
    assert meta["metadata"]["clawloop"]["origin"] == "skill_graph"
    assert "wettest_station" in (folder / "instruction.md").read_text()
    # the exported folder passes verify like any other task
    checks, verdict = verify_task(import_folder(folder), SANDBOX)
    assert verdict["kept"], verdict["reason"]
    assert {"oracle", "noop", "leak", "determinism"} <= {c["check"] for c in checks}


def test_a_path_failing_forge_and_verify_four_times_is_dropped_with_reasons() -> None:
    # The Constructor sees only its last code, so this one counts its own calls: build() raises
    # (forge fails), then solve() is wrong (verify's oracle fails), each a new version.
    calls = itertools.count()

    def constructor(_: int) -> str:
        n = next(calls)
        return generator(True, broken="build" if n % 2 == 0 else "solve") + f"\nVERSION = {n}\n"

    route = router_for(constructor)
    with FakeOpenAI("routed", router=route) as fake:
        res = instantiate(PATH, SKILLS, chat_of(fake), SANDBOX, seed=2)
        judged = [r for r in fake.requests if JUDGE_MARK in system_of(r["messages"])]
    assert res.candidate is None and res.forged is None and not res.kept
    assert [a["attempt"] for a in res.attempts] == [0, 1, 2, 3]
    assert [a["stage"] for a in res.attempts] == ["forge", "verify", "forge", "verify"]
    assert not any(a["passed"] for a in res.attempts)
    assert "rain.csv template has no header" in res.attempts[0]["reason"]
    assert "oracle" in res.attempts[1]["reason"]
    assert not judged  # nothing reached the rubric
    assert res.plan is not None and res.plan.domain == "rain_gauges"


def test_max_repairs_bounds_the_constructions() -> None:
    route = router_for(lambda n: generator(True, broken="build") + f"\nVERSION = {n}\n")
    with FakeOpenAI("routed", router=route) as fake:
        res = instantiate(PATH, SKILLS, chat_of(fake), SANDBOX, seed=2, max_repairs=1)
    assert [a["attempt"] for a in res.attempts] == [0, 1]
    assert res.candidate is None


def test_the_same_failing_code_again_is_refused_on_the_host() -> None:
    route = router_for(lambda n: generator(True, broken="solve"))
    with FakeOpenAI("routed", router=route) as fake:
        res = instantiate(PATH, SKILLS, chat_of(fake), SANDBOX, seed=2, max_repairs=1)
    assert [a["stage"] for a in res.attempts] == ["verify", "static"]
    assert "same code as an earlier attempt" in res.attempts[1]["reason"]


def test_an_llm_that_drops_the_connection_is_a_clean_row() -> None:
    with FakeOpenAI("drop") as fake:
        res = instantiate(PATH, SKILLS, chat_of(fake), SANDBOX, seed=1)
    (row,) = res.attempts
    assert row["stage"] == "plan" and not row["passed"] and row["attempt"] == 0
    assert "LLM fault in the Planner (connection)" in row["reason"]
    assert res.candidate is None


def test_a_constructor_or_judge_endpoint_fault_ends_the_path_with_a_row() -> None:
    route = router_for(lambda n: generator(asks=True))
    with FakeOpenAI("routed", router=route) as good, FakeOpenAI("drop") as bad:
        good_chat, bad_chat = chat_of(good), chat_of(bad)

        def constructor_drops(messages: list[dict[str, Any]]) -> str:
            return (bad_chat if CONSTRUCTOR_MARK in system_of(messages) else good_chat)(messages)

        res = instantiate(PATH, SKILLS, constructor_drops, SANDBOX, seed=1)
        assert [(a["stage"], a["passed"]) for a in res.attempts] == [("construct", False)]
        assert "Constructor (connection)" in res.attempts[0]["reason"]

        judged = instantiate(PATH, SKILLS, good_chat, SANDBOX, seed=1, judge_chat=bad_chat)
    (row,) = judged.attempts
    assert row["stage"] == "rubric" and "rubric judge (connection)" in row["reason"]
    assert row["code"] and judged.candidate is None


def test_a_planner_that_never_plans_is_one_plan_row() -> None:
    with FakeOpenAI("routed", router=lambda m: "I would rather not.") as fake:
        res = instantiate(PATH, SKILLS, chat_of(fake), SANDBOX, seed=1)
        asked = len(fake.requests)
    (row,) = res.attempts
    assert row["stage"] == "plan" and "no plan" in row["reason"] and "3 replies" in row["reason"]
    assert asked == 3  # the first ask and 2 re-asks


def test_a_given_plan_is_used_without_asking_the_planner() -> None:
    from clawloop.synthesis.skillgraph.plan import Plan

    plan = Plan.model_validate(plan_for(["csv-join", "json-summary"]))
    route = router_for(lambda n: generator(True, broken="build") + f"\nVERSION = {n}\n")
    with FakeOpenAI("routed", router=route) as fake:
        res = instantiate(PATH, SKILLS, chat_of(fake), SANDBOX, seed=2, max_repairs=0, plan=plan)
        roles = [system_of(r["messages"]).split("]")[0] + "]" for r in fake.requests]
    assert roles == [CONSTRUCTOR_MARK]  # no Planner request
    assert res.plan is not None and res.plan.path_id == "p-rain"
    assert res.plan.domain == "rain_gauges"
    assert [a["stage"] for a in res.attempts] == ["forge"]
    # a plan that does not fit the path is a plan row, and nothing is asked
    wrong = Plan.model_validate(plan_for(["csv-join", "csv-join"]))
    with FakeOpenAI("routed", router=route) as fake:
        res = instantiate(PATH, SKILLS, chat_of(fake), SANDBOX, seed=2, plan=wrong)
        asked = len(fake.requests)
    (row,) = res.attempts
    assert row["stage"] == "plan" and "wrong skills" in row["reason"] and asked == 0
