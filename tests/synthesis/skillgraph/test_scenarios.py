"""Scenario inference: the heuristic extractor, and the LLM path over the real-HTTP fake server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.synthesis.skillgraph.corpus import default_corpus_root, load_corpus, usable
from clawloop.synthesis.skillgraph.scenarios import (
    heuristic_scenarios,
    infer_scenarios,
    kinds_in,
    parse_reply,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "skills"
GOOD = {
    "pre": {"summary": "a folder of PDF documents", "artifacts": ["pdf"]},
    "post": {"summary": "Markdown files with the extracted text", "artifacts": [".MD"]},
}


def _skills() -> dict[str, object]:
    return {r.name: r for r in usable(load_corpus(FIXTURES))}


def test_heuristic_on_fixtures_names_kinds_and_direction() -> None:
    skills = _skills()
    pdf = heuristic_scenarios(skills["pdf-to-markdown"])
    assert (pdf.pre, pdf.post) == ("a folder of PDF documents", "new Markdown documents")
    assert pdf.heuristic and pdf.artifacts_in == ("pdf",) and pdf.artifacts_out == ("md",)
    html = heuristic_scenarios(skills["markdown-to-html"])
    assert html.artifacts_in == ("md",) and html.artifacts_out == ("html",)
    report = heuristic_scenarios(skills["csv-summary-report"])
    assert report.pre == "a folder of CSV tables" and "report" in report.post
    assert heuristic_scenarios(skills["pdf-to-markdown"]) == pdf  # deterministic


def test_kinds_in_counts_mentions() -> None:
    assert kinds_in("Convert .docx and Word documents to PDF") == ["docx", "pdf"]
    assert kinds_in("nothing here") == []


def test_heuristic_on_real_skills() -> None:
    root = default_corpus_root()
    if root is None:
        pytest.skip("shared skills corpus absent (set CLAWLOOP_SKILLS_CORPUS)")
    by_folder = {r.folder: r for r in usable(load_corpus(root))}
    pdf = heuristic_scenarios(by_folder["github-awesome-copilot__convert-pdf-to-md"])
    assert pdf.artifacts_in == ("pdf",) and pdf.artifacts_out == ("md",)
    html = heuristic_scenarios(by_folder["github-awesome-copilot__markdown-to-html"])
    assert html.artifacts_in == ("md",) and html.artifacts_out == ("html",)
    review = heuristic_scenarios(by_folder["github-awesome-copilot__sql-code-review"])
    assert review.artifacts_out == ("report",)
    all_scen = [heuristic_scenarios(r) for r in by_folder.values()]
    assert all(s.heuristic and s.pre and s.post for s in all_scen)
    assert len({s.pre for s in all_scen}) >= 15  # not one state for everything


def test_parse_reply_validates_and_normalises() -> None:
    reply = parse_reply("Sure:\n```json\n" + json.dumps(GOOD) + "\n```")
    assert reply.post.artifacts == ["md"]
    with pytest.raises(ValueError):
        parse_reply('{"pre": {"summary": "x"}}')


def test_llm_malformed_reply_is_repaired_then_cached(tmp_path: Path) -> None:
    def router(messages: list[dict]) -> str:
        repairs = sum(m["role"] == "assistant" for m in messages)
        return "not json at all {" if repairs == 0 else json.dumps(GOOD)

    skill = _skills()["pdf-to-markdown"]
    with FakeOpenAI("routed", router=router) as srv:
        chat = endpoint_chat(LLMEndpoint(srv.base_url, "m", max_retries=0))
        first = infer_scenarios(skill, chat, tmp_path, model="m")
        assert len(srv.requests) == 2
        repair = srv.requests[1]["messages"][-1]["content"]
        assert (
            "not valid" in repair and "pdf-to-markdown" in srv.requests[0]["messages"][1]["content"]
        )
        second = infer_scenarios(skill, chat, tmp_path, model="m")
        assert len(srv.requests) == 2  # cache hit: nothing asked
        infer_scenarios(skill, chat, tmp_path, model="other-model")
        assert len(srv.requests) == 4  # the model is part of the key: asked (and repaired) again
    assert first == second and not first.heuristic
    assert (first.pre, first.artifacts_out) == ("a folder of PDF documents", ("md",))


def test_llm_that_never_answers_well_falls_back_to_heuristic(tmp_path: Path) -> None:
    skill = _skills()["markdown-to-html"]
    with FakeOpenAI("routed", router=lambda m: '{"pre": 1}') as srv:
        chat = endpoint_chat(LLMEndpoint(srv.base_url, "m", max_retries=0))
        got = infer_scenarios(skill, chat, tmp_path, model="m")
        assert len(srv.requests) == 3  # first answer + 2 repairs
    assert got.heuristic and "after 2 repairs" in got.heuristic_reason
    assert got == heuristic_scenarios(skill, got.heuristic_reason)
    assert not list(tmp_path.iterdir())  # failures are not cached


def test_unreachable_endpoint_falls_back(tmp_path: Path) -> None:
    with FakeOpenAI("drop") as srv:
        chat = endpoint_chat(LLMEndpoint(srv.base_url, "m", max_retries=0))
        got = infer_scenarios(_skills()["pdf-to-markdown"], chat, tmp_path)
    assert got.heuristic and "LLM call failed" in got.heuristic_reason
