"""Scenario merging: a stub embedder for the mechanics, the real MiniLM once."""

from __future__ import annotations

import numpy as np
from doubles.fake_openai import FakeOpenAI

from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.synthesis.skillgraph.merge import MergeConfig, merge_scenarios, minilm_embedder

AXES = ["pdf", "markdown", "html", "csv"]


def stub_embed(texts: list[str]) -> np.ndarray:
    """One axis per artifact word, plus a small 'extra words' axis: near-identical phrasings of
    one kind land close, different kinds are orthogonal."""
    out = np.zeros((len(texts), len(AXES) + 1))
    for i, t in enumerate(texts):
        words = t.lower().split()
        for j, a in enumerate(AXES):
            out[i, j] = sum(w.startswith(a) for w in words)
        out[i, -1] = 0.3 * len(words) / 10
    return out


def test_near_identical_merge_distant_do_not() -> None:
    phr = ["a folder of pdf files", "a folder of pdf documents", "markdown notes", "csv tables",
           "a folder of pdf files"]  # fmt: skip
    res = merge_scenarios(phr, stub_embed)
    assert res.raw == 5 and res.unique == 4 and res.merged == 3
    pdf = res.node_of["a folder of pdf files"]
    assert res.node_of["a folder of pdf documents"] == pdf
    assert len({pdf, res.node_of["markdown notes"], res.node_of["csv tables"]}) == 3
    node = next(n for n in res.nodes if n.node_id == pdf)
    assert node.count == 3 and set(node.members) == {
        "a folder of pdf files",
        "a folder of pdf documents",
    }
    assert node.representative in node.members and res.vectors[pdf].shape == (5,)
    assert merge_scenarios(phr, stub_embed).node_of == res.node_of  # deterministic ids


def test_complete_linkage_cut_controls_merging() -> None:
    phr = ["pdf", "pdf markdown"]  # cosine ~0.7: apart at a tight cut, together at a loose one
    assert merge_scenarios(phr, stub_embed, config=MergeConfig(distance_threshold=0.1)).merged == 2
    loose = MergeConfig(graph_threshold=0.3, distance_threshold=0.5)
    assert merge_scenarios(phr, stub_embed, config=loose).merged == 1


def test_llm_no_splits_a_borderline_merge() -> None:
    phr = ["pdf", "pdf markdown"]
    cfg = MergeConfig(graph_threshold=0.3, distance_threshold=0.35, confirm_band=0.1)
    with FakeOpenAI("routed", router=lambda m: "no") as srv:
        res = merge_scenarios(phr, stub_embed, endpoint_chat(LLMEndpoint(srv.base_url, "m")), cfg)
        assert len(srv.requests) == 1
    assert res.merged == 2 and res.llm_asked == 1 and res.llm_splits == 1
    with FakeOpenAI("routed", router=lambda m: "yes") as srv:
        res = merge_scenarios(phr, stub_embed, endpoint_chat(LLMEndpoint(srv.base_url, "m")), cfg)
    assert res.merged == 1 and res.llm_splits == 0


def test_real_minilm_merges_rewordings_not_other_formats() -> None:
    phr = ["a folder of PDF documents", "PDF documents in a directory", "a folder of Excel spreadsheets",
           "a git repository"]  # fmt: skip
    res = merge_scenarios(phr, minilm_embedder)
    assert res.node_of[phr[0]] == res.node_of[phr[1]]
    assert len({res.node_of[p] for p in phr}) == 3
