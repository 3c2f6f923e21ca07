"""The verify stage's batches: each task's solution in a sandbox of its own, one grading
interpreter per batch; every worker gets a batch, and no row is lost or repeated."""

from __future__ import annotations

import pytest

from clawloop.tasks.verify import batches


@pytest.mark.parametrize(
    ("n", "size", "workers", "sizes"),
    [
        (0, 8, 2, []),
        (1, 8, 2, [1]),
        (5, 8, 2, [3, 2]),  # two workers: two batches, not one of five
        (20, 8, 2, [8, 8, 4]),
        (20, 1, 2, [1] * 20),
        (7, 8, 16, [1] * 7),
    ],
)
def test_batches_cover_every_row_once_and_feed_every_worker(
    n: int, size: int, workers: int, sizes: list[int]
) -> None:
    rows = [{"task_id": str(i)} for i in range(n)]
    got = batches(rows, size, workers)
    assert [len(b) for b in got] == sizes
    assert [r for b in got for r in b] == rows
