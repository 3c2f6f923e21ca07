"""The optional LLM analysis: a tool whose table the AST cannot resolve (chosen at run time) gets
the LLM's reading added, validated against the state's tables, a malformed reply repaired, the
reading cached by source hash and model, and nothing the AST found ever removed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.flows.cli import main
from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.synthesis.domain.llm_analysis import check_reading, refine_with_llm
from clawloop.synthesis.domain.load import load_domain

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "domains" / "json_fn"
DYNAMIC = '''

KINDS = {"passenger": "passengers", "crew": "crew"}


def rename_person(state, kind: str, key: str, name: str) -> str:
    """Rename a passenger or a crew member (the table is chosen at run time)."""
    people = state[KINDS[kind]]
    people[key]["name"] = name
    return "ok"
'''


def _domain(tmp_path: Path) -> Path:
    root = tmp_path / "air"
    shutil.copytree(FIXTURE, root)
    with (root / "tools" / "air.py").open("a") as f:
        f.write(DYNAMIC)
    return root


def _reader(bad_first: bool):
    """An LLM that reads rename_person right (after one malformed reply) and nothing else."""
    seen: dict[str, int] = {}

    def route(messages: list[dict]) -> str:
        user = messages[1]["content"]
        tool = user.split("The tool `", 1)[1].split("`", 1)[0]
        seen[tool] = seen.get(tool, 0) + 1
        if tool != "rename_person":
            return json.dumps({"reads": [], "writes": []})
        if bad_first and seen[tool] == 1:
            return '{"reads": ["people"], "writes": []}'  # no such table: fed back
        return 'Reading it: {"reads": ["passengers", "crew"], "writes": ["passengers", "crew"]}'

    return route


def _chat(fake: FakeOpenAI):
    return endpoint_chat(LLMEndpoint(fake.base_url, "fake", max_retries=0, request_timeout_s=10))


def test_the_llm_adds_what_the_ast_missed_and_caches_it(tmp_path: Path) -> None:
    root = _domain(tmp_path)
    ast_only = load_domain(root)
    assert ast_only.tool("rename_person").writes == ()  # the AST cannot see KINDS[kind]
    with FakeOpenAI("routed", router=_reader(bad_first=True)) as fake:
        refined, rows = refine_with_llm(ast_only, _chat(fake), tmp_path / "cache", "fake")
        asked = len(fake.requests)
        again, rows2 = refine_with_llm(ast_only, _chat(fake), tmp_path / "cache", "fake")
        assert len(fake.requests) == asked  # every reading came from the cache
    tool = refined.tool("rename_person")
    assert set(tool.writes) == {"passengers", "crew"} and set(tool.reads) >= {"passengers", "crew"}
    (row,) = [r for r in rows if r["tool"] == "rename_person"]
    assert row["how"] == "asked" and set(row["added_writes"]) == {"passengers", "crew"}
    assert {r["how"] for r in rows2} == {"cached"} and again == refined
    assert asked == len(ast_only.tools) + 1  # one repair, for the unknown table
    for before in ast_only.tools:  # the AST's edges all stay
        after = refined.tool(before.name)
        assert set(before.reads) <= set(after.reads) and set(before.writes) <= set(after.writes)


def test_replies_name_only_the_states_tables() -> None:
    tables = ("flights", "crew")
    assert check_reading({"reads": ["crew"], "writes": []}, tables).reads == ["crew"]
    for bad, why in (
        ({"reads": ["pilots"], "writes": []}, "unknown tables"),
        ({"reads": "crew", "writes": []}, "reads"),
        ({"reads": [], "writes": [], "deletes": []}, "deletes"),
        (["crew"], "ToolReading"),
    ):
        with pytest.raises(ValueError, match=why):
            check_reading(bad, tables)


def test_domain_graph_cli_with_an_endpoint(tmp_path: Path, capsys) -> None:
    root = _domain(tmp_path)
    with FakeOpenAI("routed", router=_reader(bad_first=False)) as fake:
        argv = ["domain", "graph", str(root), "--json", "--base-url", fake.base_url,
                "--model", "fake", "--cache-dir", str(tmp_path / "c")]  # fmt: skip
        assert main(argv) == 0
    shape = json.loads(capsys.readouterr().out)
    (tool,) = [t for t in shape["tools"] if t["name"] == "rename_person"]
    assert set(tool["writes"]) == {"passengers", "crew"}
    assert {"domain", "tables", "tools", "skills", "llm_analysis"} <= set(shape)
    with FakeOpenAI("drop") as dead:  # a dead endpoint: the AST's graph, the reason per tool
        argv = ["domain", "graph", str(root), "--json", "--base-url", dead.base_url,
                "--model", "fake", "--cache-dir", str(tmp_path / "d")]  # fmt: skip
        assert main(argv) == 0
    shape = json.loads(capsys.readouterr().out)
    (tool,) = [t for t in shape["tools"] if t["name"] == "rename_person"]
    assert tool["writes"] == []
    assert all("LLM call failed (connection)" in r["how"] for r in shape["llm_analysis"])
