"""Recording how verify batches its work: the size of each batch handed to one of its batch
functions (grade_jobs: the gradings one sandbox runs; solve_each: the built-in solutions one
interpreter runs)."""

from __future__ import annotations

from typing import Any

import pytest


def batch_sizes(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """A list that fills, call by call, with the length of the job list passed to
    clawloop.generators.verify.<name>, which still runs."""
    import clawloop.generators.verify as verify

    sizes: list[int] = []
    real = getattr(verify, name)

    def counting(*args: Any) -> Any:
        sizes.append(next(len(a) for a in args if isinstance(a, list)))
        return real(*args)

    monkeypatch.setattr(verify, name, counting)
    return sizes
