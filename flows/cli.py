"""The `clawloop` command line: one console script, a subcommand per verb.

Subcommands live beside the code they drive and register themselves here with
`register(subparsers)`; this module only parses, dispatches, and turns expected errors into one
clear line on stderr (exit 2) instead of a traceback.
"""

from __future__ import annotations

import argparse
import sys


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clawloop",
        description="Teacher-free self-improvement loop for sandboxed shell-and-files agents.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Each module adds its verbs; imports stay here so `clawloop --help` lists everything.
    from generators import cli as generators_cli

    generators_cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("clawloop: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
