"""`clawloop skills`: build a SkillSynth skill graph from skill folders, and sample paths over it.

    clawloop skills graph ../shared/data/skills --out graphs/skills --heuristic --json
    clawloop skills graph my_skills/ --out graphs/mine --base-url http://127.0.0.1:8000/v1 --model m
    clawloop skills sample graphs/skills --n 300 --seed 0 --sampler inverse --json
    clawloop skills synth graphs/skills --n 4 --out tasks/ --base-url http://127.0.0.1:8000/v1 --model m

The scenario LLM comes from `--base-url`/`--model` (key in `--api-key-env`), else from the run
config's `llm:` section (`--config FILE`) when it names an endpoint; with neither, or with
`--heuristic`, the offline extractor infers scenarios (said on stderr). `synth` needs an
endpoint: the Planner, Constructor and rubric judge are that LLM. Errors a user can fix (missing
folder, no skills, not a graph folder, no endpoint, no sandbox) are one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, get_args

from clawloop.harness.llm import ChatFn
from clawloop.synthesis.config import SkillsSource


def _fail(verb: str, msg: str) -> int:
    print(f"clawloop skills {verb}: {msg}", file=sys.stderr)
    return 2


def _endpoint_chat(args: argparse.Namespace) -> tuple[ChatFn | None, str, str]:
    """(chat, model, why-heuristic). Flags first, then the run config's llm section."""
    from clawloop.harness.llm import LLMEndpoint, endpoint_chat

    if args.heuristic:
        return None, "", "--heuristic given"
    base_url, model, key_env = _flags_or_config(args)
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
    from clawloop.synthesis.skillgraph.corpus import CorpusError
    from clawloop.synthesis.skillgraph.graph import GraphError, build_from_corpus, save_graph

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
    from clawloop.synthesis.skillgraph.graph import GraphError, load_graph
    from clawloop.synthesis.skillgraph.sample import (
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


def _skill_records(graph: Any) -> dict[str, Any]:
    """The skills the graph was built from (SKILL.md bodies for the Planner), read again from
    meta.json's `skills_dirs` where they still exist; {} leaves the Planner the descriptions."""
    from clawloop.synthesis.skillgraph.corpus import CorpusError, load_corpus, usable

    dirs = [d for d in graph.graph.get("meta", {}).get("skills_dirs", []) if Path(d).is_dir()]
    try:
        return {r.name: r for r in usable(load_corpus(dirs))} if dirs else {}
    except CorpusError:
        return {}


def _cmd_synth(args: argparse.Namespace) -> int:
    from clawloop.harness.llm import LLMEndpoint
    from clawloop.harness.sandbox.backend import check_backend
    from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
    from clawloop.synthesis.llm_writer import writer_chat
    from clawloop.synthesis.skillgraph.graph import GraphError, load_graph
    from clawloop.synthesis.skillgraph.instantiate import synthesize_tasks
    from clawloop.synthesis.skillgraph.sample import sample_paths

    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return _fail("synth", f"--out {out} already exists and is not an empty folder")
    if args.n < 1:
        return _fail("synth", "need --n >= 1")
    try:
        graph = load_graph(args.graph_dir)
        base_url, model, key_env = _endpoint_of(args)
        sandbox = SandboxConfig(backend=args.backend)
        check_backend(sandbox)
    except (GraphError, ValueError, SandboxError) as exc:
        return _fail("synth", str(exc))
    paths, _ = sample_paths(
        graph, args.n, args.seed, sampler=args.sampler, min_len=args.min_len, max_len=args.max_len
    )
    paths = list({p.path_id: p for p in paths}.values())
    chat = writer_chat(LLMEndpoint(base_url, model, key_env, request_timeout_s=600.0))
    out.mkdir(parents=True, exist_ok=True)
    cands, attempts = synthesize_tasks(
        paths, _skill_records(graph), chat, sandbox, out, args.seed, max_repairs=args.max_repairs
    )
    by_path: dict[str, list[dict[str, Any]]] = {}
    for a in attempts:
        by_path.setdefault(a["path_id"], []).append(a)
    kept = {c["task_id"] for c in cands}
    report = {
        "kept": len(cands), "paths": len(paths),
        "attempts": sum(a["stage"] != "plan" for a in attempts),
        "repairs": sum(max(0, len(v) - 1) for v in by_path.values()),
        "tasks": [
            {"path_id": p.path_id, "skills": [s.skill for s in p.steps],
             "kept": any(a["task_id"] in kept and a["passed"] for a in by_path.get(p.path_id, [])),
             "attempts": [{k: a[k] for k in ("attempt", "stage", "passed", "reason", "task_id")}
                          for a in by_path.get(p.path_id, [])]}
            for p in paths
        ],
        "out": str(out),
    }  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for t in report["tasks"]:
            last = t["attempts"][-1] if t["attempts"] else {"reason": "no attempt"}
            what = f"kept {out / last['task_id']}" if t["kept"] else f"dropped: {last['reason']}"
            print(f"{' -> '.join(t['skills'])}: {len(t['attempts'])} attempt(s), {what}")
        print(f"{report['kept']}/{report['paths']} paths kept, {report['repairs']} repairs; {out}")
    return 0 if cands else 1


def _flags_or_config(args: argparse.Namespace) -> tuple[str | None, str | None, str]:
    """(base_url, model, key env) from the flags, else the run config's llm section."""
    base_url, model, key_env = args.base_url, args.model, args.api_key_env
    if not base_url and args.config:
        from clawloop.tasks.config import load_config

        llm = load_config(args.config).llm
        base_url, model, key_env = llm.base_url, model or llm.model, llm.api_key_env
    return base_url, model, key_env


def _endpoint_of(args: argparse.Namespace) -> tuple[str, str, str]:
    """(base_url, model, key env) for `synth`, which cannot run without one."""
    base_url, model, key_env = _flags_or_config(args)
    if not base_url or not model:
        raise ValueError(
            "needs an LLM endpoint for the Planner, Constructor and judge: --base-url URL "
            "--model NAME, or --config FILE whose llm: section names one"
        )
    return base_url, model, key_env


def _endpoint_flags(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--base-url", help=f"OpenAI-compatible base URL for {what}")
    p.add_argument("--model", help="served model name")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the API key")
    p.add_argument("--config", help="a run config YAML whose llm: section names the endpoint")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("skills", help="SkillSynth: a skill graph from skill folders, path sampling")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    g = verbs.add_parser("graph", help="infer scenarios, merge them, write the skill graph")
    g.add_argument("skills_dir", help="a folder whose sub-folders each hold a SKILL.md")
    g.add_argument("--out", required=True, help="the graph folder to write (Parquet + GraphML)")
    g.add_argument("--heuristic", action="store_true", help="offline scenario extractor, no LLM")
    _endpoint_flags(g, "scenario inference")
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
    y = verbs.add_parser("synth", help="sample paths, plan + construct + verify them as tasks")
    y.add_argument("graph_dir", help="a folder written by `clawloop skills graph`")
    y.add_argument("--n", type=int, required=True, help="paths to instantiate")
    y.add_argument("--out", required=True, help="an empty or new folder for the task folders")
    y.add_argument("--seed", type=int, default=0, help="random seed")
    # The defaults are the run config's (synthesize.skills: SkillsSource), written there only.
    src = SkillsSource.model_fields
    sampler, (lo, hi), repairs = (src[k].default for k in ("sampler", "path_len", "max_repairs"))
    y.add_argument(
        "--sampler",
        choices=list(get_args(src["sampler"].annotation)),
        default=sampler,
        help=f"{src['sampler'].description} (default: {sampler})",
    )
    y.add_argument("--min-len", type=int, default=lo, help=f"shortest path (skills; default {lo})")
    y.add_argument("--max-len", type=int, default=hi, help=f"longest path (skills; default {hi})")
    y.add_argument(
        "--max-repairs",
        type=int,
        default=repairs,
        help=f"{src['max_repairs'].description} (default: {repairs})",
    )
    y.add_argument("--backend", choices=("auto", "bwrap", "docker"), default="auto")
    _endpoint_flags(y, "the Planner, Constructor and judge")
    y.add_argument("--json", action="store_true", help="print one JSON object")
    y.set_defaults(func=_cmd_synth)
