"""A rich progress bar for a stage's per-task work (forge, verify, rollout), shown on a terminal."""

from __future__ import annotations

import sys

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def progress_bar(enabled: bool | None = None) -> Progress:
    """A Progress that renders only when stderr is a terminal (unless `enabled` says otherwise)."""
    show = sys.stderr.isatty() if enabled is None else enabled
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not show,
    )
