"""The `clawloop` command line: one console script, a subcommand per verb.

Each verb group is a module in this package (run, report, task + export, rollout, train, ...)
with a `register(subparsers)`; this module only parses, dispatches, and turns
expected errors into one clear line on stderr (exit 2) instead of a traceback.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse with usage errors as one line (what is wrong, where to look), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def make_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="clawloop",
        description="Teacher-free self-improvement loop for sandboxed shell-and-files agents.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of user errors too"
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser
    )
    # Each module adds its verbs; imports stay here so `clawloop --help` lists everything.
    from clawloop.flows.cli import (
        audit,
        domain,
        generators,
        report,
        rollout,
        run,
        skills,
        task,
        train,
    )

    for verbs in (run, report, task, generators, rollout, train, skills, domain, audit):
        verbs.register(sub)
    return parser


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors a user can cause and fix: printed as one line, no traceback."""
    from clawloop.flows.names import RunIdError
    from clawloop.flows.records import RunRecordError
    from clawloop.flows.server import ServerError
    from clawloop.storage.fs import StorageError
    from clawloop.synthesis.library import RenderError
    from clawloop.synthesis.synthesize import SynthesisError
    from clawloop.tasks.config import ConfigError
    from clawloop.tasks.stage import StageError

    return (
        ConfigError,
        StageError,
        ServerError,
        SynthesisError,
        StorageError,
        RenderError,
        RunIdError,
        RunRecordError,
    )


def _one_line(text: str) -> str:
    """A message whose head ends in ':' with one detail line below (a config with one bad
    field) as one line; a list of several problems stays one line per problem."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) == 2 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"
    return "\n".join(lines) if lines else text


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("clawloop: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            traceback.print_exception(exc)
        if isinstance(exc, _user_errors()):
            print(f"clawloop: {_one_line(str(exc))}", file=sys.stderr)
            return 2
        if isinstance(exc, OSError) and exc.filename is not None:  # a path the user named
            print(f"clawloop: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        # Not an expected failure: still one line, and where to get the traceback.
        first = (str(exc).strip().splitlines() or [""])[0]
        print(
            f"clawloop: unexpected {type(exc).__name__}: {first} (run `clawloop --debug "
            f"{args.command} ...` for the traceback)",
            file=sys.stderr,
        )
        return 1
