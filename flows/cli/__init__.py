"""The `clawloop` command line: one console script, a subcommand per verb.

Each verb group is a module in this package (run, report, task + export, rollout, train, ...)
with a `register(subparsers)`; this module only parses, dispatches, and turns
expected errors into one clear line on stderr (exit 2) instead of a traceback.
"""

from __future__ import annotations

import argparse
import sys
import traceback


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clawloop",
        description="Teacher-free self-improvement loop for sandboxed shell-and-files agents.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of user errors too"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Each module adds its verbs; imports stay here so `clawloop --help` lists everything.
    from clawloop.flows.cli import (
        domain,
        generators,
        report,
        rollout,
        run,
        skills,
        task,
        train,
    )

    for verbs in (run, report, task, generators, rollout, train, skills, domain):
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


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("clawloop: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if not isinstance(exc, _user_errors()):
            raise
        if args.debug:
            traceback.print_exception(exc)
        print(f"clawloop: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
