"""A progress bar for a training phase in the terminal: a `transformers` TrainerCallback.

The phases run with the Trainer's own tqdm off (`disable_tqdm`: its bars would garble logs and
Prefect's output), so the train stage showed nothing while it trained. `progress_callbacks(phase)`
gives a rich bar (steps done of max_steps, elapsed, the last logged loss) on stderr, only when
stderr is a terminal and only on the main process; elsewhere it gives none.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from transformers import TrainerCallback


class TrainProgress(TrainerCallback):
    """Steps of one phase as a bar with the last loss; `console` defaults to stderr."""

    def __init__(self, phase: str, console: Console | None = None) -> None:
        self.phase = phase
        self.console = console or Console(stderr=True)
        self.progress: Progress | None = None
        self.task: Any = None
        self.loss = ""

    def _bar(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[loss]}"),
            console=self.console,
        )

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        self.progress = self._bar()
        self.progress.start()
        self.task = self.progress.add_task(f"train {self.phase}", total=state.max_steps, loss="")

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step, loss=self.loss)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.progress is not None and logs and "loss" in logs:
            self.loss = f"loss {float(logs['loss']):.4f}"
            self.progress.update(self.task, loss=self.loss)

    def on_train_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step, loss=self.loss)
            self.progress.stop()
            self.progress = None


def progress_callbacks(phase: str, enabled: bool | None = None) -> list[TrainerCallback]:
    """[TrainProgress(phase)] when stderr is a terminal (or `enabled`), else []."""
    show = sys.stderr.isatty() if enabled is None else enabled
    return [TrainProgress(phase)] if show else []
