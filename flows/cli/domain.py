"""`clawloop domain`: executable domains (issue 12), read from their folder, never run here.

    clawloop domain graph DIR           # tools, their tables and skills, as a table
    clawloop domain graph DIR --json    # the fixed JSON shape checks rely on
    clawloop domain graph DIR --json --base-url URL --model M   # + the LLM's reading of each tool

One function per subcommand (`_cmd_<verb>`), each registered in `register`; a domain folder that
breaks the contract prints the DomainError (file, what is wrong, what to do) and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console()


def _contract_error(exc: Exception) -> int:
    print(f"clawloop: {exc}", file=sys.stderr)
    return 2


def _cmd_graph(args: argparse.Namespace) -> int:
    from clawloop.synthesis.domain.load import load_domain
    from clawloop.synthesis.domain.model import DomainError
    from clawloop.synthesis.domain.skills import cluster_skills, graph_json

    try:
        domain = load_domain(Path(args.dir))
    except DomainError as exc:
        return _contract_error(exc)
    analysis = None
    if args.base_url:
        if not args.model:
            return _contract_error(ValueError("--base-url needs --model (the served model name)"))
        domain, analysis = _llm_refined(domain, args)
    skills = cluster_skills(domain)
    shape = graph_json(domain, skills)
    if analysis is not None:
        shape["llm_analysis"] = analysis
    if args.json:
        print(json.dumps(shape, indent=2))
        return 0
    skill_of = {t: s["name"] for s in shape["skills"] for t in s["tools"]}
    t = Table(
        title=f"{domain.name}: {len(domain.tools)} tools, {len(domain.tables)} tables "
        f"({domain.state_format}), {len(skills)} skills"
    )
    for col in ("skill", "tool", "params", "reads", "writes", "returns"):
        t.add_column(col, overflow="fold")
    for tool in sorted(shape["tools"], key=lambda x: (skill_of[x["name"]], x["name"])):
        t.add_row(
            skill_of[tool["name"]],
            tool["name"],
            " ".join(tool["params"]),
            " ".join(tool["reads"]),
            " ".join(tool["writes"]) or "-",
            " ".join(tool["returns"]),
        )
    console.print(t)
    return 0


def _llm_refined(domain, args: argparse.Namespace):  # noqa: ANN001, ANN202 - Domain in, out
    """The domain with the LLM's reading of each tool added to the AST's edges (cached)."""
    from clawloop.harness.llm import LLMEndpoint, endpoint_chat
    from clawloop.synthesis.domain.llm_analysis import refine_with_llm

    chat = endpoint_chat(
        LLMEndpoint(args.base_url, args.model, args.api_key_env), max_tokens=600, temperature=0.0
    )
    cache = Path(args.cache_dir).expanduser()
    return refine_with_llm(domain, chat, cache, args.model)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("domain", help="executable domains: their tool/table graph and skills")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    v = verbs.add_parser("graph", help="tools, parameters, returns, tables read/written, skills")
    v.add_argument("dir", help="an executable-domain folder (domain.toml, tools/, state)")
    v.add_argument("--json", action="store_true", help="print the graph as JSON")
    v.add_argument("--base-url", help="an OpenAI-compatible endpoint: the LLM reads each tool too")
    v.add_argument("--model", help="served model name")
    v.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the API key")
    v.add_argument("--cache-dir", default="~/.cache/clawloop/domain-analysis",
                   help="the LLM's readings, by source hash and model")  # fmt: skip
    v.set_defaults(func=_cmd_graph)
    from clawloop.flows.cli.domain_synth import register_synth

    register_synth(verbs)
