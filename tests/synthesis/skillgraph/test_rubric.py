"""The rubric judge: the answer's shape without values, the verdict's validation, a malformed
verdict asked again over real HTTP, and a forged folder judged as the agent would read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.harness.llm import LLMEndpoint, LLMError, endpoint_chat
from clawloop.synthesis.skillgraph.prompts import JUDGE_MARK
from clawloop.synthesis.skillgraph.rubric import (
    RubricError,
    RubricVerdict,
    answer_summary,
    judge,
    judge_folder,
    shape,
)

CONTRACT = {
    "outputs": [
        {
            "path": "output/summary.json",
            "format": "json",
            "schema": {
                "type": "object",
                "properties": {
                    "totals": {"type": "object", "additionalProperties": {"type": "number"}},
                    "rows": {"type": "array", "key": ["id"]},
                },
            },
        },
        {"path": "output/t.csv", "format": "csv", "columns": ["id", "kg"], "key": ["id"]},
        {"path": "output/r.md", "format": "report", "sidecar": "output/facts.json"},
    ],
    "tolerance": {"abs": 0.01, "rel": 0.0},
    "decisions": [],
}
ANSWER = {
    "output/summary.json": {
        "totals": {"HV-101": 12.75, "HV-202": 3.5},
        "rows": [{"id": "A-9", "ok": True}, {"id": "B-7", "ok": False, "note": None}],
        "count": 7,
    },
    "output/t.csv": [{"id": "X1", "kg": 4.25}],
    "output/facts.json": {"worst": "HV-202"},
}


def chat_of(fake: FakeOpenAI):
    return endpoint_chat(LLMEndpoint(fake.base_url, "fake", max_retries=0, request_timeout_s=10))


def test_the_summary_names_fields_and_types_never_values() -> None:
    text = answer_summary(ANSWER, CONTRACT)
    assert "totals: {<key>: float} (2 entries)" in text
    assert "rows: list[{id: str, ok: bool, note: null}] (2 items)" in text
    assert "count: int" in text
    assert "output/t.csv (csv): columns ['id', 'kg'], key ['id'], 1 row(s)" in text
    assert "output/facts.json (report sidecar of output/r.md): {worst: str}" in text
    for value in ("HV-101", "12.75", "A-9", "X1", "4.25", "HV-202"):
        assert value not in text
    many = {f"k{i}": i for i in range(12)}
    assert shape(many) == "{<key>: int} (12 entries)"


@pytest.mark.parametrize(
    ("reply", "ok"),
    [
        ({"agree": True, "untested_asks": [], "unasked_tests": [], "reason": "fine"}, True),
        ({"agree": False, "unasked_tests": ["count"], "reason": "x"}, True),
        ({"agree": True, "unasked_tests": ["count"]}, False),  # contradicts itself
        ({"agree": False}, False),  # no mismatch named
        ({"agree": "yes"}, False),  # not a boolean
    ],
)
def test_verdicts_are_validated(reply: dict, ok: bool) -> None:
    if ok:
        RubricVerdict.model_validate(reply)
    else:
        with pytest.raises(ValueError):
            RubricVerdict.model_validate(reply)


def test_a_malformed_verdict_is_asked_again_with_the_error() -> None:
    def route(messages: list[dict]) -> str:
        if sum(m["role"] == "assistant" for m in messages) == 0:
            return '{"agree": true, "unasked_tests": ["count"]}'
        return '```json\n{"agree": false, "unasked_tests": ["count"], "reason": "count"}\n```'

    with FakeOpenAI("routed", router=route) as fake:
        verdict = judge(
            "Report the totals.", CONTRACT, answer_summary(ANSWER, CONTRACT), chat_of(fake)
        )
        first, second = (r["messages"] for r in fake.requests)
    assert not verdict.agree and verdict.unasked_tests == ["count"]
    assert "graded but never asked for: count" in verdict.feedback()
    assert JUDGE_MARK in first[0]["content"] and "Report the totals." in first[1]["content"]
    assert "count: int" in first[1]["content"] and "12.75" not in first[1]["content"]
    assert "agree is true but" in second[-1]["content"]


def test_no_valid_verdict_is_a_rubric_error_and_a_dropped_endpoint_an_llm_error() -> None:
    with (
        FakeOpenAI("routed", router=lambda m: "I think it is fine.") as fake,
        pytest.raises(RubricError, match="2 replies, none valid"),
    ):
        judge("x", CONTRACT, "- a: int", chat_of(fake))
    with FakeOpenAI("drop") as fake, pytest.raises(LLMError):
        judge("x", CONTRACT, "- a: int", chat_of(fake))


def test_a_task_folder_is_judged_from_its_instruction_contract_and_answer(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "instruction.md").write_text("Write the totals per hive.\n\n## Outputs\n")
    (tmp_path / "tests" / "contract.json").write_text(json.dumps(CONTRACT))
    (tmp_path / "tests" / "answer.json").write_text(json.dumps(ANSWER))
    ok = '{"agree": true, "untested_asks": [], "unasked_tests": [], "reason": "agree"}'
    with FakeOpenAI("routed", router=lambda m: ok) as fake:
        assert judge_folder(tmp_path, chat_of(fake)).agree
        sent = fake.requests[0]["messages"][1]["content"]
    assert "Write the totals per hive." in sent and "totals: {<key>: float}" in sent
    with pytest.raises(RubricError, match="cannot read the task"):
        judge_folder(tmp_path / "missing", lambda m: ok)
