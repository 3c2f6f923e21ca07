"""Benchmark: the SkillSynth skill graph on the shared real corpus, inverse-frequency vs uniform.

Builds the graph from the skill folders with heuristic scenarios (no LLM) and the offline MiniLM,
then samples paths with both samplers over several seeds and prints:
  1. raw vs merged scenarios, skill edges, chain pairs, and how many skills can start or continue
     a chain (a skill on no path of length >= 2 caps coverage and entropy for any sampler);
  2. per sampler: mean path length, normalised scenario- and skill-visit entropy
     (H / log #nodes, H / log #skills; the issue's goal: >= 0.95 and above uniform), coverage;
  3. the ratios inverse / uniform.

    .venv/bin/python benchmarks/skill_paths.py [--skills DIR] [--n 300] [--seeds 0 1 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from clawloop.synthesis.skillgraph.corpus import default_corpus_root
from clawloop.synthesis.skillgraph.graph import build_from_corpus, chain_targets
from clawloop.synthesis.skillgraph.sample import entropy_report, first_steps, sample_paths

METRICS = (
    "mean_length",
    "scenario_entropy",
    "skill_entropy",
    "skill_coverage",
    "scenario_coverage",
)


def chain_counts(g) -> dict[str, int]:  # noqa: ANN001 - nx.MultiDiGraph
    """Skills that can start a path of length >= 2, and skills that can follow another."""
    targets = chain_targets(g)
    can_start = {k for _, _, k in first_steps(g)}
    can_follow = set()
    for u, v, k in g.edges(keys=True):
        for q in targets.get(v, [v]):
            can_follow.update(
                k2 for _, w, k2 in g.out_edges(q, keys=True) if k2 != k and w not in (u, v)
            )
    return {
        "can_start": len(can_start), "can_follow": len(can_follow),
        "on_some_path": len(can_start | can_follow), "self_loops": sum(u == v for u, v in g.edges()),
    }  # fmt: skip


def run_sampler(g, sampler: str, n: int, seeds: list[int]) -> dict[str, float]:  # noqa: ANN001
    rows = []
    for seed in seeds:
        paths, _ = sample_paths(g, n, seed, sampler=sampler)
        r = entropy_report(paths, g)
        rows.append({
            "mean_length": r["mean_length"], "scenario_entropy": r["scenario_entropy"],
            "skill_entropy": r["skill_entropy"], "skill_coverage": r["coverage"]["skills"],
            "scenario_coverage": r["coverage"]["scenarios"],
        })  # fmt: skip
    return {m: statistics.mean(r[m] for r in rows) for m in METRICS}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--skills", help="skill folders (default: the shared corpus)")
    ap.add_argument("--n", type=int, default=300, help="paths per sampler and seed")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    root = args.skills or default_corpus_root()
    if root is None:
        print("no skills corpus: pass --skills DIR or set CLAWLOOP_SKILLS_CORPUS", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    built = build_from_corpus(root)
    build_s = time.perf_counter() - t0
    g, summary = built.graph, built.summary()
    result = {
        "corpus": str(root), "build_s": round(build_s, 2), "n_paths": args.n, "seeds": args.seeds,
        **{k: summary[k] for k in ("skills", "raw_scenarios", "unique_phrasings", "scenarios", "edges", "chains")},
        "skipped": len(summary["skipped"]), **chain_counts(g),
        "inverse": run_sampler(g, "inverse", args.n, args.seeds),
        "uniform": run_sampler(g, "uniform", args.n, args.seeds),
    }  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(
        f"corpus {root}: {result['skills']} skills ({result['skipped']} folders skipped), built in {build_s:.1f} s"
    )
    print(
        f"scenarios: {result['raw_scenarios']} raw ({result['unique_phrasings']} distinct) -> "
        f"{result['scenarios']} merged nodes; {result['edges']} skill edges, {result['chains']} chain pairs"
    )
    print(
        f"skills that can start a chain: {result['can_start']}, follow one: {result['can_follow']}, "
        f"either (upper bound on coverage): {result['on_some_path']} / {result['skills']}; "
        f"self-loops: {result['self_loops']}"
    )
    print(f"\n{args.n} paths x seeds {args.seeds} (means)")
    print(f"{'metric':<20}{'inverse':>10}{'uniform':>10}{'inv/uni':>10}")
    for m in METRICS:
        a, b = result["inverse"][m], result["uniform"][m]
        print(f"{m:<20}{a:>10.3f}{b:>10.3f}{(a / b if b else float('nan')):>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
