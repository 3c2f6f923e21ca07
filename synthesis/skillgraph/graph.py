"""The scenario-mediated skill graph G = (Ω, K): scenario nodes, one skill edge each, and chains.

Each usable skill is an edge of a `networkx.MultiDiGraph` from its pre-scenario node to its
post-scenario node (key = skill name; several skills may join the same two states). A path may go
from a skill ending at node P to a skill starting at node Q when P == Q or (P, Q) is *compatible*:
the representatives' cosine similarity is at least `compat_threshold` — the state one skill leaves
is close enough to the state the next expects. With a ChatFn the pairs within `compat_band` above
the threshold are confirmed by the LLM (a "no" drops the pair); pairs further above are taken
as they are. The accepted pairs are the "chains" table, kept in `G.graph["chains"]`.

On disk (`save_graph`): nodes.parquet, edges.parquet, chains.parquet (the source of truth that
`load_graph` reads), graph.graphml (for Gephi/yEd/networkx users), meta.json (corpus hash,
counts, thresholds). `build_from_corpus` is the whole build: load, infer, merge, connect.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from clawloop.harness.llm import ChatFn, LLMError
from clawloop.synthesis.skillgraph.corpus import (
    Roots,
    corpus_sha256,
    load_corpus,
    roots_of,
    skipped_folders,
    usable,
)
from clawloop.synthesis.skillgraph.merge import (
    Embedder,
    MergeConfig,
    MergeResult,
    merge_scenarios,
    minilm_embedder,
)
from clawloop.synthesis.skillgraph.model import Scenarios, SkillRecord
from clawloop.synthesis.skillgraph.scenarios import infer_scenarios

# v2: artifact-typed heuristic scenarios, kind-aware merge; v3: the heuristic reads what a skill
# starts from ("when you have a plan") and what comes after it ("before ..."): flows not reversed
GRAPH_VERSION = "skill-graph-v3"
FILES = ("nodes.parquet", "edges.parquet", "chains.parquet", "graph.graphml", "meta.json")


class GraphError(ValueError):
    """A graph cannot be built (no usable skills) or read (not a graph folder)."""


@dataclass(frozen=True)
class GraphConfig:
    # Chaining: post node P may hand over to pre node Q when cos(rep P, rep Q) >= this. 0.55 on
    # MiniLM links states about the same artifact kind ("new Markdown documents" -> "a folder of
    # Markdown documents", 0.78; "a transformed copy of the JSON data files" -> "a folder of JSON
    # data files", 0.69) and not different kinds ("a folder of PDF documents" -> "new Markdown
    # documents", 0.32). Tuned on the shared corpus with benchmarks/skill_paths.py: 0.6-0.65 left
    # a tenth fewer skills on any path of length >= 2.
    compat_threshold: float = 0.55
    compat_band: float = 0.1  # with a ChatFn, pairs in [t, t + band) are confirmed by the LLM
    merge: MergeConfig = field(default_factory=MergeConfig)


def compatible_prompt(post: str, pre: str) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": "One tool leaves the workspace in state A; can a second tool that expects "
            f"state B start from it?\nA: {post}\nB: {pre}\nAnswer with one word: yes or no.",
        }
    ]


def compatible(
    g: nx.MultiDiGraph, post_node: str, pre_node: str, threshold: float, chat: ChatFn | None = None,
    band: float = 0.0,
) -> tuple[bool, float, str]:  # fmt: skip
    """(compatible?, similarity, method: same | embedding | llm) for handing P over to Q."""
    if post_node == pre_node:
        return True, 1.0, "same"
    a, b = g.nodes[post_node]["vector"], g.nodes[pre_node]["vector"]
    sim = float(np.dot(a, b))
    if sim < threshold:
        return False, sim, "embedding"
    if chat is None or sim >= threshold + band:
        return True, sim, "embedding"
    texts = g.nodes[post_node]["representative"], g.nodes[pre_node]["representative"]
    try:
        answer = chat(compatible_prompt(*texts)).strip().lower()
    except LLMError:
        return True, sim, "embedding"  # no judgement available: the embedding decision stands
    return not answer.startswith("no"), sim, "llm"


def build_graph(
    records: list[SkillRecord], scenarios: list[Scenarios], merged: MergeResult,
    chat: ChatFn | None = None, config: GraphConfig | None = None,
) -> nx.MultiDiGraph:  # fmt: skip
    """Scenario nodes + skill edges + the chains table (see the module docstring)."""
    cfg = config or GraphConfig()
    by_name = {r.name: r for r in records}
    g = nx.MultiDiGraph()
    for n in merged.nodes:
        g.add_node(
            n.node_id, representative=n.representative, members="\n".join(n.members),
            count=n.count, vector=merged.vectors[n.node_id],
        )  # fmt: skip
    for s in scenarios:
        rec = by_name.get(s.skill)
        if rec is None or s.pre not in merged.node_of or s.post not in merged.node_of:
            raise GraphError(f"skill {s.skill!r} has scenarios but no record or merged node")
        g.add_edge(
            merged.node_of[s.pre], merged.node_of[s.post], key=s.skill, skill=s.skill,
            folder=rec.folder, description=rec.description, pre_text=s.pre, post_text=s.post,
            heuristic=s.heuristic, heuristic_reason=s.heuristic_reason,
            artifacts_in=",".join(s.artifacts_in), artifacts_out=",".join(s.artifacts_out),
        )  # fmt: skip
    posts = sorted({v for _, v in g.edges()})
    pres = sorted({u for u, _ in g.edges()})
    chains = []
    for p in posts:
        for q in pres:
            if p == q:
                continue
            ok, sim, how = compatible(g, p, q, cfg.compat_threshold, chat, cfg.compat_band)
            if ok:
                chains.append({"post": p, "pre": q, "similarity": round(sim, 6), "method": how})
    g.graph.update(chains=chains, config=asdict(cfg))
    return g


def chain_targets(g: nx.MultiDiGraph) -> dict[str, list[str]]:
    """post node -> the pre nodes a path may continue from (itself first, then compatible)."""
    out: dict[str, list[str]] = {n: [n] for n in g.nodes}
    for c in g.graph.get("chains", []):
        out.setdefault(c["post"], [c["post"]]).append(c["pre"])
    return out


def _frames(g: nx.MultiDiGraph) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    nodes = pd.DataFrame(
        [
            {
                "node_id": n,
                "representative": d["representative"],
                "members": d["members"].split("\n"),
                "count": int(d["count"]),
                "vector": [float(x) for x in d["vector"]],
            }
            for n, d in g.nodes(data=True)
        ]  # fmt: skip
    )
    edges = pd.DataFrame([{"pre": u, "post": v, **d} for u, v, d in g.edges(data=True)])
    chains = pd.DataFrame(
        g.graph.get("chains", []), columns=["post", "pre", "similarity", "method"]
    )
    return nodes, edges, chains


def save_graph(g: nx.MultiDiGraph, out_dir: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Write the five files of FILES into out_dir (created); returns out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nodes, edges, chains = _frames(g)
    for name, df in (("nodes", nodes), ("edges", edges), ("chains", chains)):
        tmp = out / f".{name}.parquet.tmp"
        df.to_parquet(tmp, index=False)
        tmp.replace(out / f"{name}.parquet")
    plain = nx.MultiDiGraph()
    plain.add_nodes_from(
        (n, {k: v for k, v in d.items() if k != "vector"}) for n, d in g.nodes(data=True)
    )
    plain.add_edges_from((u, v, k, d) for u, v, k, d in g.edges(keys=True, data=True))
    nx.write_graphml(plain, out / "graph.graphml")
    info = {
        "version": GRAPH_VERSION, "nodes": g.number_of_nodes(), "edges": g.number_of_edges(),
        "chains": len(chains), "config": g.graph.get("config", {}), **(meta or g.graph.get("meta", {})),
    }  # fmt: skip
    (out / "meta.json").write_text(json.dumps(info, indent=1, sort_keys=True))
    return out


def load_graph(graph_dir: str | Path) -> nx.MultiDiGraph:
    """Read a folder written by save_graph (Parquet tables; GraphML is for other tools)."""
    d = Path(graph_dir)
    missing = [f for f in FILES if not (d / f).is_file()]
    if not d.is_dir() or missing:
        raise GraphError(
            f"{d} is not a skill-graph folder (missing {', '.join(missing) or 'the folder'}): "
            f"build one with `clawloop skills graph SKILLS_DIR --out {d}`"
        )
    meta = json.loads((d / "meta.json").read_text())
    g = nx.MultiDiGraph()
    for row in pd.read_parquet(d / "nodes.parquet").to_dict("records"):
        g.add_node(
            row["node_id"], representative=row["representative"], members="\n".join(row["members"]),
            count=int(row["count"]), vector=np.asarray(row["vector"], dtype=np.float32),
        )  # fmt: skip
    for row in pd.read_parquet(d / "edges.parquet").to_dict("records"):
        g.add_edge(row.pop("pre"), row.pop("post"), key=row["skill"], **row)
    chains = pd.read_parquet(d / "chains.parquet").to_dict("records")
    g.graph.update(chains=chains, config=meta.get("config", {}), meta=meta)
    return g


@dataclass
class BuiltGraph:
    graph: nx.MultiDiGraph
    records: list[SkillRecord]  # every folder with a SKILL.md, unusable ones included
    skipped: list[tuple[str, str]]  # (folder, reason): no SKILL.md or a problem record
    scenarios: list[Scenarios]
    merge: MergeResult

    def summary(self) -> dict[str, Any]:
        heur = sum(s.heuristic for s in self.scenarios)
        return {
            "skills": len(self.scenarios), "scenarios": self.merge.merged,
            "raw_scenarios": self.merge.raw, "unique_phrasings": self.merge.unique,
            "edges": self.graph.number_of_edges(), "chains": len(self.graph.graph["chains"]),
            "heuristic": heur, "llm": len(self.scenarios) - heur,
            "skipped": [{"folder": f, "reason": r} for f, r in self.skipped],
            "corpus_sha256": self.graph.graph["meta"]["corpus_sha256"],
        }  # fmt: skip


def scenario_kinds(scen: list[Scenarios]) -> dict[str, frozenset[str]]:
    """phrasing -> every artifact kind a scenario with that phrasing names (pre: its inputs,
    post: its outputs), for the merge to keep disjoint kinds apart."""
    out: dict[str, set[str]] = {}
    for s in scen:
        out.setdefault(s.pre, set()).update(s.artifacts_in)
        out.setdefault(s.post, set()).update(s.artifacts_out)
    return {p: frozenset(k) for p, k in out.items()}


def build_from_corpus(
    skills_dir: Roots, *, chat: ChatFn | None = None, model: str = "",
    cache_dir: str | Path | None = None, embed: Embedder | None = None,
    config: GraphConfig | None = None,
) -> BuiltGraph:  # fmt: skip
    """Load the corpus (one folder of skill folders, or several), infer every usable skill's
    scenarios, merge them, build the graph. meta.json names the folders (`skills_dirs`), so
    `clawloop skills synth` can show the Planner each skill's SKILL.md body."""
    cfg = config or GraphConfig()
    records = load_corpus(skills_dir)
    good = usable(records)
    skipped = skipped_folders(skills_dir) + [(r.folder, r.problem) for r in records if r.problem]
    if not good:
        raise GraphError(
            f"no usable skill folders under {skills_dir} ({len(records)} with a SKILL.md, "
            f"{len(skipped)} skipped): each skill is a sub-folder with SKILL.md front matter "
            "holding `name` and `description`"
        )
    scen = [infer_scenarios(r, chat, cache_dir, model) for r in good]
    merged = merge_scenarios([p for s in scen for p in (s.pre, s.post)], embed or minilm_embedder,
                             chat, cfg.merge, scenario_kinds(scen))  # fmt: skip
    g = build_graph(good, scen, merged, chat, cfg)
    g.graph["meta"] = {
        "corpus_sha256": corpus_sha256(records), "skills": len(good),
        "skills_dirs": [str(Path(d).resolve()) for d in roots_of(skills_dir)],
        "raw_scenarios": merged.raw,
        "scenarios": merged.merged, "heuristic": sum(s.heuristic for s in scen),
        "skipped": len(skipped), "llm_merge_splits": merged.llm_splits,
    }  # fmt: skip
    return BuiltGraph(g, records, sorted(skipped), scen, merged)
