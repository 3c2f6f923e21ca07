"""`clawloop domain`: executable domains (issue 12), read from their folder, never run here.

    clawloop domain graph DIR           # tools, their tables and skills, as a table
    clawloop domain graph DIR --json    # the fixed JSON shape checks rely on

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
    from clawloop.generators.domain.load import load_domain
    from clawloop.generators.domain.model import DomainError
    from clawloop.generators.domain.skills import cluster_skills, graph_json

    try:
        domain = load_domain(Path(args.dir))
    except DomainError as exc:
        return _contract_error(exc)
    skills = cluster_skills(domain)
    shape = graph_json(domain, skills)
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


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("domain", help="executable domains: their tool/table graph and skills")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    v = verbs.add_parser("graph", help="tools, parameters, returns, tables read/written, skills")
    v.add_argument("dir", help="an executable-domain folder (domain.toml, tools/, state)")
    v.add_argument("--json", action="store_true", help="print the graph as JSON")
    v.set_defaults(func=_cmd_graph)
    from clawloop.flows.domain_synth_cli import register_synth

    register_synth(verbs)
