"""Benchmark: do SkillSynth's sampled paths read as workflows? (issue 24, item 7's measure)

Builds the skill graph from the shared corpus with heuristic scenarios (no LLM) and the offline
MiniLM, samples paths, and reports per sampler: the share of consecutive step pairs whose
artifacts agree (what step k writes, `artifacts_out`, is a kind step k+1 reads, `artifacts_in`),
and the share of paths of length >= 2 where every consecutive pair agrees. Also how many
skills are usable, how many the heuristic types from a stated input and output (`stated_io`),
and how many phrasings merged across different artifact kinds.

Those shares check the heuristic's own labels, so they are partly circular. The hand labels
(`--labels`, by default tests/synthesis/skillgraph/data/skill_io_labels.json: 48 usable skills,
their input and output kinds read from their SKILL.md by a person; set "dev" was looked at while
the heuristic was changed, set "held_out" was not) give two independent figures: the
heuristic's accuracy on each set (its input kind among the hand's inputs, its output
kind among the hand's outputs), and the same pair and path shares computed with the hand labels,
over the pairs whose two skills are labelled and the paths whose every skill is (both sets) (sampled
`--hand-n` paths per seed, more than `--n`, since few paths are labelled throughout).

    .venv/bin/python benchmarks/skill_artifacts.py [--skills DIR] [--n 300] [--hand-n 3000]
        [--seeds 0 1 2] [--labels FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from clawloop.synthesis.skillgraph.corpus import default_corpus_root
from clawloop.synthesis.skillgraph.graph import build_from_corpus
from clawloop.synthesis.skillgraph.sample import sample_paths
from clawloop.synthesis.skillgraph.scenarios import stated_io

LABELS = (
    Path(__file__).resolve().parents[1] / "tests/synthesis/skillgraph/data/skill_io_labels.json"
)


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


Labels = dict[str, tuple[frozenset[str], frozenset[str]]]


def load_labels(path: str | Path, only: str = "") -> Labels:
    """folder -> (input kinds, output kinds) a person read from its SKILL.md; `only` one set."""
    rows = json.loads(Path(path).read_text())["labels"]
    return {
        r["folder"]: (frozenset(r["in"]), frozenset(r["out"]))
        for r in rows
        if not only or r.get("set") == only
    }


def label_accuracy(built, labels) -> dict[str, object]:  # noqa: ANN001 - BuiltGraph, labels
    """Heuristic vs hand: input right (its kind among the hand's inputs), output right, both; a
    side the hand left empty (no artifact named) is not scored."""
    folder_of = {r.name: r.folder for r in built.records if not r.problem}
    ins = outs = both = n_in = n_out = n_both = 0
    wrong = []
    for s in built.scenarios:
        lab = labels.get(folder_of.get(s.skill, ""))
        if lab is None:
            continue
        ok_in = bool(set(s.artifacts_in) & lab[0]) if lab[0] else None
        ok_out = bool(set(s.artifacts_out) & lab[1]) if lab[1] else None
        n_in, ins = n_in + (ok_in is not None), ins + bool(ok_in)
        n_out, outs = n_out + (ok_out is not None), outs + bool(ok_out)
        if ok_in is not None and ok_out is not None:
            n_both, both = n_both + 1, both + (ok_in and ok_out)
        if ok_in is False or ok_out is False:
            wrong.append(f"{s.skill}: {','.join(s.artifacts_in)} -> {','.join(s.artifacts_out)}")
    return {
        "labelled": len(labels), "input": f"{ins}/{n_in}", "output": f"{outs}/{n_out}",
        "both": f"{both}/{n_both}", "wrong": sorted(wrong),
    }  # fmt: skip


def hand_agreement(g, paths, labels) -> dict[str, float]:  # noqa: ANN001
    """Pair and path shares with the hand labels: a pair agrees when a kind the hand says step
    k writes is one it says step k+1 reads; only pairs / paths whose skills are all labelled."""
    pairs = agree = whole = full = 0
    for p in paths:
        labs = [labels.get(g.edges[s.pre, s.post, s.skill]["folder"]) for s in p.steps]
        ok_all = len(labs) >= 2
        for a, b in zip(labs, labs[1:], strict=False):
            if a is None or b is None:
                ok_all = False
                continue
            pairs += 1
            agree += bool(a[1] & b[0])
            ok_all = ok_all and bool(a[1] & b[0])
        if len(labs) >= 2 and all(lab is not None for lab in labs):
            full += 1
            whole += ok_all
    return {
        "labelled_pairs": pairs, "hand_pair_share": round(agree / pairs, 3) if pairs else 0.0,
        "labelled_paths": full, "hand_path_share": round(whole / full, 3) if full else 0.0,
    }  # fmt: skip


def typed(built) -> dict[str, int]:  # noqa: ANN001 - BuiltGraph
    """How many usable skills the heuristic types from what the text states (not from the
    kinds it merely mentions): both sides, the input only, the output only."""
    sides = [stated_io(r) for r in built.records if not r.problem]
    return {
        "both": sum(bool(i and o) for i, o in sides), "input_only": sum(bool(i and not o) for i, o in sides),
        "output_only": sum(bool(o and not i) for i, o in sides), "of": len(sides),
    }  # fmt: skip


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
    ap.add_argument("--hand-n", type=int, default=3000)
    ap.add_argument("--labels", default=str(LABELS))
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
        "typed_from_stated_io": typed(built),
    }
    labels = load_labels(a.labels)
    for name in ("dev", "held_out"):
        out[f"hand_labels_{name}"] = label_accuracy(built, load_labels(a.labels, name))
    for sampler in ("inverse", "uniform"):
        rows = [agreement(g, sample_paths(g, a.n, seed, sampler=sampler)[0]) for seed in a.seeds]
        out[sampler] = {k: round(sum(r[k] for r in rows) / len(rows), 3) for k in rows[0]}
        hand = [hand_agreement(g, sample_paths(g, a.hand_n, s, sampler=sampler)[0], labels)
                for s in a.seeds]  # fmt: skip
        out[sampler] |= {k: round(sum(r[k] for r in hand) / len(hand), 3) for k in hand[0]}
    print(json.dumps(out, indent=2) if a.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
