"""Run ids are names, never paths: `[A-Za-z0-9._-]{1,128}`, not `.` or `..`.

A run id becomes a folder under the storage root (`<root>/<run_id>/`), so one with a `/` or that
is `..` would write outside the root. Checked at every door: the command line (argparse type),
the Prefect deployments' parameters (`loop`, `rerun-stage`), and the functions that write a run.
"""

from __future__ import annotations

import argparse
import re

RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
RULE = "1 to 128 of A-Z a-z 0-9 . _ - (not '.' or '..')"


class RunIdError(ValueError):
    """A run id that is not a plain name."""


def run_id_problem(value: object) -> str | None:
    """What is wrong with `value` as a run id (None: nothing)."""
    if not isinstance(value, str):
        return f"a run id is a string, not {type(value).__name__}"
    if value in (".", ".."):
        return f"run id {value!r} names a folder above the run, not a run"
    if not RUN_ID.fullmatch(value):
        bad = sorted({c for c in value if not re.fullmatch(r"[A-Za-z0-9._-]", c)})
        why = f"it has {len(value)} characters" if not bad else f"it contains {''.join(bad)!r}"
        return f"run id {value!r} is not a name ({why}): use {RULE}"
    return None


def check_run_id(value: object) -> str:
    """`value` when it is a valid run id, else RunIdError saying why."""
    problem = run_id_problem(value)
    if problem is not None:
        raise RunIdError(problem)
    return str(value)


def run_id_arg(value: str) -> str:
    """argparse `type=` for --run-id / --run: one line naming the rule."""
    problem = run_id_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value
