"""Path sampling: monotone, bounded, inverse beats uniform on a skewed graph, visits persist."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np

from clawloop.synthesis.skillgraph.sample import (
    Visits,
    entropy_report,
    load_visits,
    sample_paths,
    save_visits,
)


def _graph(
    edges: list[tuple[str, str, str]], chains: list[tuple[str, str]] = ()
) -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    for u, v, k in edges:
        for n in (u, v):
            g.add_node(n, representative=f"state {n}", vector=np.ones(2) / np.sqrt(2))
        g.add_edge(u, v, key=k, skill=k, description=f"skill {k}")
    g.graph["chains"] = [
        {"post": p, "pre": q, "similarity": 0.9, "method": "embedding"} for p, q in chains
    ]
    return g


def skewed() -> nx.MultiDiGraph:
    """A funnel: six starts lead into M; from M a short popular route (N, O) and a branch P that
    fans out into five skills; a separate two-skill chain X -> Y -> Z, and Z hands over to S0."""
    edges = [(f"S{i}", "M", f"in{i}") for i in range(6)]
    edges += [("M", "N", "mn"), ("N", "O", "no"), ("M", "P", "mp")]
    edges += [("P", f"Q{i}", f"pq{i}") for i in range(5)]
    edges += [("X", "Y", "xy"), ("Y", "Z", "yz")]
    return _graph(edges, chains=[("Z", "S0")])


def test_paths_are_monotone_and_bounded() -> None:
    g = skewed()
    paths, visits = sample_paths(g, 200, seed=1, min_len=2, max_len=3)
    assert len(paths) == 200 and visits.paths == 200
    for p in paths:
        assert 2 <= len(p.steps) <= 3
        nodes = [n for s in p.steps for n in (s.pre, s.post)]
        skills = [s.skill for s in p.steps]
        assert len(set(skills)) == len(skills)
        # each step starts where the last ended, or at a compatible node (Y -> D here)
        for a, b in zip(p.steps, p.steps[1:], strict=False):
            assert a.post == b.pre or (a.post, b.pre) == ("Z", "S0")
        assert len(set(nodes)) == len(nodes) - sum(
            a.post == b.pre for a, b in zip(p.steps, p.steps[1:], strict=False)
        )
        assert p.steps[0].pre_text.startswith("state ") and p.path_id
    assert any(
        s.skill == "yz" and s.post == "Z" and p.steps[-1].skill != "yz"
        for p in paths
        for s in p.steps
    )


def test_inverse_beats_uniform_on_skill_entropy() -> None:
    g = skewed()
    for seed in (0, 1, 2):
        inv, _ = sample_paths(g, 300, seed=seed, sampler="inverse")
        uni, _ = sample_paths(g, 300, seed=seed, sampler="uniform")
        ri, ru = entropy_report(inv, g), entropy_report(uni, g)
        assert ri["skill_entropy"] > ru["skill_entropy"], seed
        assert ri["scenario_entropy"] > ru["scenario_entropy"], seed
        assert ri["coverage"]["skills"] == 1.0 and ri["mean_length"] >= 2


def test_visits_persist_and_bias_the_next_batch(tmp_path: Path) -> None:
    g = skewed()
    heavy = Visits()
    heavy.skills.update({"mn": 50, "no": 50})
    heavy.scenarios.update({"N": 50, "O": 50})
    save_visits(heavy, tmp_path / "visits.parquet")
    loaded = load_visits(tmp_path / "visits.parquet")
    assert loaded.skills == heavy.skills and loaded.scenarios == heavy.scenarios
    biased, after = sample_paths(g, 50, seed=3, visits=loaded)
    fresh, _ = sample_paths(g, 50, seed=3)
    hub_share = lambda ps: sum(s.skill in ("mn", "no") for p in ps for s in p.steps)  # noqa: E731
    assert hub_share(biased) < hub_share(fresh)
    assert after.paths == 50 and loaded.paths == 0  # the input is not changed in place
    assert sum(after.skills.values()) == sum(heavy.skills.values()) + sum(
        len(p.steps) for p in biased
    )


def test_guidance_weight_up_weights_a_skill() -> None:
    g = skewed()
    plain, _ = sample_paths(g, 100, seed=5)
    guided, _ = sample_paths(g, 100, seed=5, skill_weights={"pq3": 20.0})
    count = lambda ps: sum(s.skill == "pq3" for p in ps for s in p.steps)  # noqa: E731
    assert count(guided) > 2 * count(plain)


def test_stuck_graph_gives_no_paths_below_min_len() -> None:
    g = _graph([("A", "B", "only")])
    paths, visits = sample_paths(g, 5, seed=0, min_len=2)
    assert paths == [] and visits.paths == 0
    one, _ = sample_paths(g, 3, seed=0, min_len=1)
    assert [len(p.steps) for p in one] == [1, 1, 1]
