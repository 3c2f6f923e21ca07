"""`clawloop generators`: the built-in generator library, to read and to start your own from.

    clawloop generators list                       # capabilities and domains
    clawloop generators render reconciliation --domain apiculture --multihop 2 --dirtiness 1 \\
        --format csv --out my_generators/hives.py    # one standalone file to read, edit, forge
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console()


def _cmd_list(args: argparse.Namespace) -> int:
    from clawloop.generators.meta import OUTPUT_FORMATS
    from clawloop.synthesis.catalog import CAPABILITIES
    from clawloop.synthesis.vocabularies import DOMAINS

    t = Table(title=f"{len(CAPABILITIES)} capabilities")
    t.add_column("capability")
    t.add_column("what the agent does")
    for cap in CAPABILITIES.values():
        t.add_row(cap.name, cap.description)
    console.print(t)
    d = Table(title=f"{len(DOMAINS)} domains")
    for col in ("domain", "title", "entities", "measure"):
        d.add_column(col)
    for dom in DOMAINS.values():
        d.add_row(dom.name, dom.title, dom.entities, f"{dom.measure} ({dom.unit})")
    console.print(d)
    console.print(
        f"knobs: --multihop 0-3, --dirtiness 0-3, --format {' | '.join(OUTPUT_FORMATS)}; "
        "write one with `clawloop generators render CAPABILITY --out FILE`"
    )
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    from clawloop.synthesis.library import RenderError, render_generator

    try:
        code = render_generator(
            args.capability, args.domain, args.multihop, args.dirtiness, args.format
        )
    except (RenderError, KeyError, ValueError) as exc:
        raise RenderError(f"cannot render {args.capability}/{args.domain}: {exc}") from exc
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(code)
    console.print(
        f"wrote {out} ({len(code.splitlines())} lines): forge it with "
        f"`clawloop forge {out} --seed 1 --out /tmp/task`, or add it to synthesize.generator_paths"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generators", help="list the built-in generators, or write one to a file")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    v = verbs.add_parser("list", help="capabilities, domains and knobs of the built-in library")
    v.set_defaults(func=_cmd_list)
    v = verbs.add_parser("render", help="write one built-in generator as a standalone file")
    v.add_argument("capability", help="a capability (see `clawloop generators list`)")
    v.add_argument("--domain", default="apiculture", help="a domain (default: apiculture)")
    v.add_argument("--multihop", type=int, default=0, help="join depth 0-3")
    v.add_argument("--dirtiness", type=int, default=0, help="injected mess 0-3")
    v.add_argument("--format", default="json", help="json | csv | multi | report")
    v.add_argument("--out", required=True, help="the .py file to write")
    v.set_defaults(func=_cmd_render)
