"""`clawloop skills`: build a SkillSynth skill graph from skill folders, and sample paths over it.

    clawloop skills graph ../shared/data/skills --out graphs/skills --heuristic --json
    clawloop skills graph my_skills/ --out graphs/mine --base-url http://127.0.0.1:8000/v1 --model m
    clawloop skills sample graphs/skills --n 300 --seed 0 --sampler inverse --json

The scenario LLM comes from `--base-url`/`--model` (key in `--api-key-env`), else from the run
config's `llm:` section (`--config FILE`) when it names an endpoint; with neither, or with
`--heuristic`, the offline extractor infers scenarios (said on stderr). Errors a user can fix
(missing folder, no skills, not a graph folder) are one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from clawloop.harness.llm import ChatFn


def _fail(verb: str, msg: str) -> int:
    print(f"clawloop skills {verb}: {msg}", file=sys.stderr)
    return 2


def _endpoint_chat(args: argparse.Namespace) -> tuple[ChatFn | None, str, str]:
    """(chat, model, why-heuristic). Flags first, then the run config's llm section."""
    from clawloop.harness.llm import LLMEndpoint, endpoint_chat

    if args.heuristic:
        return None, "", "--heuristic given"
    base_url, model, key_env = args.base_url, args.model, args.api_key_env
    if not base_url and args.config:
        from clawloop.tasks.config import load_config

        llm = load_config(args.config).llm
        base_url, model, key_env = llm.base_url, model or llm.model, llm.api_key_env
    if not base_url:
        return (
            None,
            "",
            "no LLM endpoint configured (--base-url/--model or --config with llm.base_url)",
        )
    if not model:
        raise ValueError("--base-url needs --model (the served model name)")
    endpoint = LLMEndpoint(base_url, model, key_env)
    return endpoint_chat(endpoint, max_tokens=600, temperature=0.0), model, ""


def _cmd_graph(args: argparse.Namespace) -> int:
    from clawloop.generators.skillgraph.corpus import CorpusError
    from clawloop.generators.skillgraph.graph import GraphError, build_from_corpus, save_graph

    if not Path(args.skills_dir).is_dir():
        return _fail("graph", f"{args.skills_dir} is not a folder: pass a folder of skill folders")
    try:
        chat, model, why = _endpoint_chat(args)
    except ValueError as exc:
        return _fail("graph", str(exc))
    if chat is None:
        print(f"clawloop skills graph: heuristic scenarios ({why})", file=sys.stderr)
    cache = Path(args.cache_dir) if args.cache_dir else Path(args.out) / "scenario-cache"
    try:
        built = build_from_corpus(args.skills_dir, chat=chat, model=model, cache_dir=cache)
    except (CorpusError, GraphError) as exc:
        return _fail("graph", str(exc))
    save_graph(built.graph, args.out)
    summary = built.summary()
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(
            f"{summary['skills']} skills, {summary['raw_scenarios']} raw -> {summary['scenarios']} "
            f"scenario nodes, {summary['edges']} edges, {summary['chains']} chain pairs; "
            f"{len(summary['skipped'])} folders skipped; wrote {args.out}"
        )
        for s in summary["skipped"]:
            print(f"  skipped {s['folder']}: {s['reason']}")
    return 0


def _cmd_sample(args: argparse.Namespace) -> int:
    from clawloop.generators.skillgraph.graph import GraphError, load_graph
    from clawloop.generators.skillgraph.sample import (
        entropy_report,
        load_visits,
        sample_paths,
        save_visits,
    )

    if args.n < 1 or args.min_len < 1 or args.max_len < args.min_len:
        return _fail("sample", "need --n >= 1 and 1 <= --min-len <= --max-len")
    try:
        graph = load_graph(args.graph_dir)
    except GraphError as exc:
        return _fail("sample", str(exc))
    visits = None
    if args.visits and Path(args.visits).is_file():
        visits = load_visits(args.visits)
    paths, visits = sample_paths(
        graph, args.n, args.seed, sampler=args.sampler, min_len=args.min_len,
        max_len=args.max_len, visits=visits,
    )  # fmt: skip
    if args.visits:
        save_visits(visits, args.visits)
    report = entropy_report(paths, graph)
    out = {
        "paths": [
            [{"skill": s.skill, "pre": s.pre, "post": s.post} for s in p.steps] for p in paths
        ],
        **report,
    }
    if args.json:
        print(json.dumps(out))
    else:
        for p in paths:
            print(" -> ".join(s.skill for s in p.steps))
        print(
            f"{len(paths)} paths, mean length {report['mean_length']:.2f}; entropy scenario "
            f"{report['scenario_entropy']:.3f} skill {report['skill_entropy']:.3f}; skill coverage "
            f"{report['coverage']['skills']:.2%}"
        )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("skills", help="SkillSynth: a skill graph from skill folders, path sampling")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    g = verbs.add_parser("graph", help="infer scenarios, merge them, write the skill graph")
    g.add_argument("skills_dir", help="a folder whose sub-folders each hold a SKILL.md")
    g.add_argument("--out", required=True, help="the graph folder to write (Parquet + GraphML)")
    g.add_argument("--heuristic", action="store_true", help="offline scenario extractor, no LLM")
    g.add_argument("--base-url", help="OpenAI-compatible base URL for scenario inference")
    g.add_argument("--model", help="served model name")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the API key")
    g.add_argument("--config", help="a run config YAML whose llm: section names the endpoint")
    g.add_argument("--cache-dir", help="scenario cache (default: GRAPH_DIR/scenario-cache)")
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.set_defaults(func=_cmd_graph)
    s = verbs.add_parser("sample", help="sample monotone skill paths from a graph folder")
    s.add_argument("graph_dir", help="a folder written by `clawloop skills graph`")
    s.add_argument("--n", type=int, required=True, help="paths to sample")
    s.add_argument("--seed", type=int, default=0, help="random seed")
    s.add_argument("--sampler", choices=["inverse", "uniform"], default="inverse")
    s.add_argument("--min-len", type=int, default=2, help="shortest path kept (skills)")
    s.add_argument("--max-len", type=int, default=5, help="longest path (skills)")
    s.add_argument("--visits", help="visit counts (Parquet): read if present, updated after")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_cmd_sample)
