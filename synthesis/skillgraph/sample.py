"""Sample skill paths from the skill graph: inverse-frequency weights, monotone progression.

A path is a chain of skills s1 .. sL where each skill starts from the node the previous one left
(or a node compatible with it, see graph.chain_targets). SkillSynth's sampler keeps the visited
distribution flat: every choice is weighted p ∝ (ν(skill)+1)^-1 · (ν(next scenario)+1)^-1, ν the
visits so far (the start scenario likewise, (ν(node)+1)^-1), optionally times a guidance weight
for skills the agent fails (diagnosis up-weights them). *Monotone*: no scenario node and no skill
appears twice in one path; a path ends at `max_len` or when no admissible step is left, and one
shorter than `min_len` is dropped (counted in `Visits.dropped`). ν is updated after each kept path
and persists across iterations (`save_visits` / `load_visits`), so coverage grows over the loop.

The uniform baseline is a random walk under the same monotone rule and length range, with every
admissible choice equally likely: the comparison then isolates what the weights buy (without the
rule the walk would also revisit hubs, and differ in two ways at once).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import networkx as nx
import pandas as pd

from clawloop.synthesis.skillgraph.graph import chain_targets
from clawloop.synthesis.skillgraph.model import PathStep, SkillPath

Sampler = Literal["inverse", "uniform"]
MAX_ATTEMPTS_PER_PATH = 20  # a graph with few chains gives up rather than spin


@dataclass
class Visits:
    """ν: how often each scenario node and skill appeared in kept paths, plus sampler counts."""

    scenarios: Counter = field(default_factory=Counter)
    skills: Counter = field(default_factory=Counter)
    paths: int = 0  # kept paths, all batches
    dropped: int = 0  # attempts shorter than min_len, all batches

    def add(self, path: SkillPath) -> None:
        nodes = {n for s in path.steps for n in (s.pre, s.post)}
        self.scenarios.update(nodes)
        self.skills.update(s.skill for s in path.steps)
        self.paths += 1


def visit_rows(visits: Visits) -> list[dict[str, Any]]:
    """ν as rows {kind: scenario | skill | meta, id, count} (the skill_visits table)."""
    rows = [
        {"kind": kind, "id": k, "count": int(c)}
        for kind, counts in (("scenario", visits.scenarios), ("skill", visits.skills))
        for k, c in sorted(counts.items())
    ]
    rows += [{"kind": "meta", "id": "paths", "count": visits.paths}]
    return rows + [{"kind": "meta", "id": "dropped", "count": visits.dropped}]


def visits_from_rows(rows: Iterable[dict[str, Any]]) -> Visits:
    v = Visits()
    for r in rows:
        kind, key, count = r["kind"], r["id"], int(r["count"])
        if kind == "scenario":
            v.scenarios[key] = count
        elif kind == "skill":
            v.skills[key] = count
        elif key in ("paths", "dropped"):
            setattr(v, key, count)
    return v


def save_visits(visits: Visits, path: str | Path) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    pd.DataFrame(visit_rows(visits), columns=["kind", "id", "count"]).to_parquet(tmp, index=False)
    tmp.replace(out)


def load_visits(path: str | Path) -> Visits:
    return visits_from_rows(pd.read_parquet(path).to_dict("records"))


def _inv(count: int) -> float:
    return 1.0 / (count + 1)


def _choose(rng: random.Random, items: list[Any], weights: list[float]) -> Any:
    return rng.choices(items, weights=weights, k=1)[0]


def _step(g: nx.MultiDiGraph, pre: str, post: str, skill: str) -> PathStep:
    d = g.edges[pre, post, skill]
    return PathStep(
        skill, pre, post, g.nodes[pre]["representative"], g.nodes[post]["representative"],
        str(d.get("description", "")),
    )  # fmt: skip


def path_id(steps: list[PathStep]) -> str:
    text = "|".join(f"{s.pre}>{s.skill}>{s.post}" for s in steps)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _continues(g: nx.MultiDiGraph, targets: dict[str, list[str]], q: str, v: str, k: str) -> bool:
    """Whether step (q -k-> v) has an admissible second step under the monotone rule."""
    for t in targets.get(v, [v]):
        if t != v and t == q:
            continue
        for _, v2, k2 in g.out_edges(t, keys=True):
            if k2 != k and v2 not in (q, v, t):
                return True
    return False


def first_steps(g: nx.MultiDiGraph) -> list[tuple[str, str, str]]:
    """Skill edges (pre, post, skill) a path of length >= 2 can start with, sorted."""
    targets = chain_targets(g)
    edges = sorted((u, v, k) for u, v, k in g.edges(keys=True) if u != v)
    return [e for e in edges if _continues(g, targets, *e)]


def _walk(
    g: nx.MultiDiGraph, targets: dict[str, list[str]], first: tuple[str, str, str],
    rng: random.Random, weigh: bool, visits: Visits, guide: dict[str, float], max_len: int,
) -> list[PathStep]:  # fmt: skip
    q, v, k = first
    steps, seen_nodes, used = [_step(g, q, v, k)], {q, v}, {k}
    froms = [v, *(t for t in targets.get(v, []) if t != v and t not in seen_nodes)]
    while len(steps) < max_len:
        cands, weights = [], []
        for q in froms:
            for _, v, k in g.out_edges(q, keys=True):
                if k in used or v in seen_nodes or v == q:
                    continue
                w = 1.0
                if weigh:
                    w = _inv(visits.skills[k]) * _inv(visits.scenarios[v]) * guide.get(k, 1.0)
                    if q != froms[0]:  # a compatible hop visits one more node
                        w *= _inv(visits.scenarios[q])
                cands.append((q, v, k))
                weights.append(w)
        if not cands:
            break
        q, v, k = _choose(rng, cands, weights)
        steps.append(_step(g, q, v, k))
        seen_nodes.update((q, v))
        used.add(k)
        froms = [v, *(t for t in targets.get(v, []) if t != v and t not in seen_nodes)]
    return steps


def sample_paths(
    graph: nx.MultiDiGraph, n: int, seed: int, sampler: Sampler = "inverse", min_len: int = 2,
    max_len: int = 5, visits: Visits | None = None, skill_weights: dict[str, float] | None = None,
) -> tuple[list[SkillPath], Visits]:  # fmt: skip
    """Up to n paths (fewer only if the graph gives no more within the attempt budget) and the
    updated visits; `visits` is copied, never changed in place."""
    if sampler not in ("inverse", "uniform"):
        raise ValueError(f"sampler must be 'inverse' or 'uniform', not {sampler!r}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    rng = random.Random(seed)
    nu = Visits(Counter(), Counter())
    if visits is not None:
        nu = Visits(Counter(visits.scenarios), Counter(visits.skills), visits.paths, visits.dropped)
    targets = chain_targets(graph)
    # The start scenario and first skill are drawn together among the edges that can be
    # continued (min_len = 1 admits every edge but self-loops), so no draw is wasted on dead ends.
    starts = first_steps(graph) if min_len > 1 else sorted(
        (u, v, k) for u, v, k in graph.edges(keys=True) if u != v
    )  # fmt: skip
    weigh, guide = sampler == "inverse", dict(skill_weights or {})
    paths: list[SkillPath] = []
    for _ in range(n * MAX_ATTEMPTS_PER_PATH):
        if len(paths) >= n or not starts:
            break
        w = [1.0] * len(starts)
        if weigh:
            w = [_inv(nu.scenarios[q]) * _inv(nu.skills[k]) * _inv(nu.scenarios[v]) * guide.get(k, 1.0)
                 for q, v, k in starts]  # fmt: skip
        steps = _walk(graph, targets, _choose(rng, starts, w), rng, weigh, nu, guide, max_len)
        if len(steps) < min_len:
            nu.dropped += 1
            continue
        path = SkillPath(path_id(steps), tuple(steps))
        paths.append(path)
        nu.add(path)
    return paths, nu


def _norm_entropy(counts: Counter, universe: int) -> float:
    total = sum(counts.values())
    if total == 0 or universe <= 1:
        return 0.0
    h = -sum((c / total) * math.log(c / total) for c in counts.values() if c)
    return h / math.log(universe)


def entropy_report(paths: list[SkillPath], graph: nx.MultiDiGraph) -> dict[str, Any]:
    """Normalised visit entropies (H / log of the graph's node or skill count: 1.0 = every node
    or skill visited equally often), coverage fractions and mean path length."""
    v = Visits()
    for p in paths:
        v.add(p)
    n_nodes, n_skills = graph.number_of_nodes(), graph.number_of_edges()
    lengths = [len(p.steps) for p in paths]
    return {
        "scenario_entropy": round(_norm_entropy(v.scenarios, n_nodes), 6),
        "skill_entropy": round(_norm_entropy(v.skills, n_skills), 6),
        "coverage": {
            "scenarios": round(len(v.scenarios) / n_nodes, 6) if n_nodes else 0.0,
            "skills": round(len(v.skills) / n_skills, 6) if n_skills else 0.0,
        },
        "mean_length": round(sum(lengths) / len(lengths), 6) if lengths else 0.0,
        "n_paths": len(paths),
    }
