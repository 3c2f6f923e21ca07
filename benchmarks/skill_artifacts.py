"""Benchmark: do SkillSynth's sampled paths read as workflows? (issue 24, item 7's measure)

Builds the skill graph from the shared corpus with heuristic scenarios (no LLM) and the offline
MiniLM, samples paths, and reports per sampler: the share of consecutive step pairs whose
artifacts agree (what step k writes, `artifacts_out`, is a kind step k+1 reads, `artifacts_in`),
and the share of paths of length >= 2 where every consecutive pair agrees. Also how many
skills are usable and how many phrasings merged across different artifact kinds.

    .venv/bin/python benchmarks/skill_artifacts.py [--skills DIR] [--n 300] [--seeds 0 1 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from clawloop.synthesis.skillgraph.corpus import default_corpus_root
from clawloop.synthesis.skillgraph.graph import build_from_corpus
from clawloop.synthesis.skillgraph.sample import sample_paths


def _kinds(value: str) -> set[str]:
    return {k for k in value.split(",") if k}


def agreement(g, paths) -> dict[str, float]:  # noqa: ANN001 - nx.MultiDiGraph, [SkillPath]
    pairs = agree = whole = long = 0
    for p in paths:
        steps = list(p.steps)
        if len(steps) < 2:
            continue
        long += 1
        ok_all = True
        for a, b in zip(steps, steps[1:], strict=False):
            out = _kinds(g.edges[a.pre, a.post, a.skill]["artifacts_out"])
            inn = _kinds(g.edges[b.pre, b.post, b.skill]["artifacts_in"])
            pairs += 1
            if out & inn:
                agree += 1
            else:
                ok_all = False
        whole += ok_all
    return {
        "paths_len_ge_2": long,
        "pair_share": round(agree / pairs, 3) if pairs else 0.0,
        "path_share": round(whole / long, 3) if long else 0.0,
    }


def mixed_nodes(built) -> int:  # noqa: ANN001 - BuiltGraph
    """Scenario nodes whose phrasings come from different artifact kinds."""
    kind_of: dict[str, set[str]] = {}
    for s in built.scenarios:
        kind_of.setdefault(s.pre, set()).update(s.artifacts_in)
        kind_of.setdefault(s.post, set()).update(s.artifacts_out)
    return sum(
        len({k for m in n.members for k in kind_of.get(m, ())}) > 1 for n in built.merge.nodes
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skills")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    root = a.skills or default_corpus_root()
    if root is None:
        print("no skills corpus: pass --skills DIR or set CLAWLOOP_SKILLS_CORPUS", file=sys.stderr)
        return 2
    built = build_from_corpus(root)
    g = built.graph
    out = {
        "skills": g.graph["meta"]["skills"],
        "skipped": g.graph["meta"]["skipped"],
        "scenario_nodes": len(built.merge.nodes),
        "nodes_mixing_artifact_kinds": mixed_nodes(built),
        "kinds_in": dict(Counter(k for s in built.scenarios for k in s.artifacts_in)),
    }
    for sampler in ("inverse", "uniform"):
        rows = [agreement(g, sample_paths(g, a.n, seed, sampler=sampler)[0]) for seed in a.seeds]
        out[sampler] = {k: round(sum(r[k] for r in rows) / len(rows), 3) for k in rows[0]}
    print(json.dumps(out, indent=2) if a.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
