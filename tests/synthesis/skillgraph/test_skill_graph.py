"""The skill graph: edges, chains, save/load round trip (Parquet and GraphML), corpus build."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from test_merge import stub_embed

from clawloop.synthesis.skillgraph.corpus import load_corpus, usable
from clawloop.synthesis.skillgraph.graph import (
    GraphConfig,
    GraphError,
    build_from_corpus,
    build_graph,
    chain_targets,
    compatible,
    load_graph,
    save_graph,
)
from clawloop.synthesis.skillgraph.merge import merge_scenarios
from clawloop.synthesis.skillgraph.model import Scenarios

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "skills"


def _graph(compat: float = 0.6) -> nx.MultiDiGraph:
    recs = usable(load_corpus(FIXTURES))
    scen = [
        Scenarios("pdf-to-markdown", "a folder of pdf files", "markdown notes from pdf", True),
        Scenarios("markdown-to-html", "markdown documents", "html pages", True),
        Scenarios("csv-summary-report", "csv tables", "a summary report", True),
    ]
    merged = merge_scenarios([p for s in scen for p in (s.pre, s.post)], stub_embed)
    return build_graph(recs, scen, merged, config=GraphConfig(compat_threshold=compat))


def test_edges_and_chains() -> None:
    g = _graph()
    assert g.number_of_edges() == 3 and g.number_of_nodes() == 6
    (u, v, k), = [e for e in g.edges(keys=True) if e[2] == "pdf-to-markdown"]  # fmt: skip
    assert g.nodes[u]["representative"] == "a folder of pdf files"
    assert g.edges[u, v, k]["folder"] == "pdf-to-markdown"
    md_pre = next(a for a, _, s in g.edges(keys=True) if s == "markdown-to-html")
    assert (
        md_pre in chain_targets(g)[v]
    )  # "markdown notes from pdf" hands over to "markdown documents"
    ok, sim, how = compatible(g, v, md_pre, 0.6)
    assert ok and how == "embedding" and sim > 0.6
    html_post = next(b for _, b, s in g.edges(keys=True) if s == "markdown-to-html")
    assert chain_targets(g)[html_post] == [html_post]  # html is compatible with nothing
    assert compatible(g, v, v, 0.99) == (True, 1.0, "same")
    assert not _graph(compat=0.999).graph["chains"]


def test_save_load_round_trip_with_graphml(tmp_path: Path) -> None:
    g = _graph()
    save_graph(g, tmp_path / "g", meta={"corpus_sha256": "abc"})
    for f in ("nodes.parquet", "edges.parquet", "chains.parquet", "graph.graphml", "meta.json"):
        assert (tmp_path / "g" / f).is_file()
    back = load_graph(tmp_path / "g")
    assert sorted(back.edges(keys=True)) == sorted(g.edges(keys=True))
    assert (
        back.graph["chains"] == g.graph["chains"] and back.graph["meta"]["corpus_sha256"] == "abc"
    )
    for n, d in g.nodes(data=True):
        assert back.nodes[n]["representative"] == d["representative"]
        assert np.allclose(back.nodes[n]["vector"], d["vector"])
    gml = nx.read_graphml(tmp_path / "g" / "graph.graphml")
    assert set(gml.nodes) == set(g.nodes) and gml.number_of_edges() == 3
    assert {d["skill"] for _, _, d in gml.edges(data=True)} == {k for _, _, k in g.edges(keys=True)}


def test_load_graph_rejects_other_folders(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match="not a skill-graph folder"):
        load_graph(tmp_path)


def test_build_from_fixture_corpus(tmp_path: Path) -> None:
    built = build_from_corpus(FIXTURES, embed=stub_embed)
    s = built.summary()
    assert (s["skills"], s["raw_scenarios"], s["edges"], s["heuristic"]) == (3, 6, 3, 3)
    assert {x["folder"] for x in s["skipped"]} == {
        "broken-yaml", "no-front-matter", "no-description", "not-a-skill",
    }  # fmt: skip
    assert len(s["corpus_sha256"]) == 64
    empty = tmp_path / "empty"
    (empty / "x").mkdir(parents=True)
    with pytest.raises(GraphError, match="no usable skill folders"):
        build_from_corpus(empty, embed=stub_embed)
