"""The paired tests of an iteration against row base (diagnosis/paired.py), on cases small enough
to work out by hand."""

from __future__ import annotations

import math

import pytest

from clawloop.diagnosis.paired import (
    PairedPasses,
    mcnemar_exact,
    paired_passes,
    paired_scores,
    sign_flip_p,
)


@pytest.mark.parametrize(
    ("gained", "lost", "p"),
    [
        (0, 0, 1.0),  # nothing moved
        (6, 0, 2 / 2**6),  # all six discordant pairs one way: 2 * (1/2)^6 = 0.03125
        (0, 6, 2 / 2**6),  # two-sided: the same the other way
        (5, 0, 2 / 2**5),  # 0.0625: five is not enough at 5 %
        (7, 1, 2 * (1 + 8) / 2**8),  # 2 * (C(8,0) + C(8,1)) / 256 = 0.0703125
        (3, 3, 1.0),  # 2 * 42/64 > 1: capped
        (10, 2, 2 * (1 + 12 + 66) / 2**12),  # 0.0385742...
    ],
)
def test_mcnemar_exact_by_hand(gained, lost, p):
    assert mcnemar_exact(gained, lost) == pytest.approx(p, rel=1e-12)


def test_mcnemar_refuses_negative_counts():
    with pytest.raises(ValueError, match="discordant counts"):
        mcnemar_exact(-1, 2)


@pytest.mark.parametrize(
    ("diffs", "p"),
    [
        ([], 1.0),
        ([0.0, 0.0], 1.0),
        ([1.0, 1.0, 1.0], 2 / 8),  # only all-plus and all-minus reach |3|
        ([1.0, 0.5], 2 / 4),  # sums 1.5, 0.5, -0.5, -1.5
        ([0.5, -0.5], 1.0),  # observed 0: every pattern reaches it
        ([0.2, 0.0, 0.2, 0.2, 0.2], 2 / 16),  # a zero difference is no pair to flip
        ([0.1] * 3 + [0.2], 2 / 16),  # float sums (0.1 * 3) still tie at the observed value
    ],
)
def test_sign_flip_exact_by_hand(diffs, p):
    assert sign_flip_p(diffs) == pytest.approx(p)


def test_sign_flip_beyond_the_exact_limit_draws_seeded_patterns():
    diffs = [1.0] * 20  # exact p is 2 / 2^20, below what 2,000 draws can show
    p = sign_flip_p(diffs, exact_max=16, draws=2_000)
    assert p == sign_flip_p(diffs, exact_max=16, draws=2_000)  # seeded: the same every call
    assert p == pytest.approx(1 / 2_001, abs=2 / 2_001)
    balanced = [1.0, -1.0] * 10  # observed sum 0: every draw reaches it
    assert sign_flip_p(balanced, exact_max=16, draws=500) == 1.0


def ep(task: str, attempt: int, passed: bool, reward: float | None = None, **kw) -> dict:
    return {
        "task_id": task,
        "attempt": attempt,
        "split": kw.get("split", "eval"),
        "passed": passed,
        "reward": float(passed) if reward is None else reward,
        "end_reason": kw.get("end_reason", "finished"),
    }


def test_paired_passes_pairs_by_task_and_attempt_and_drops_infra_faults():
    base = [ep("a", 0, False), ep("a", 1, True), ep("b", 0, False), ep("b", 1, False),
            ep("c", 0, True), ep("c", 1, False, end_reason="server_error"),
            ep("x", 0, True, split="external")]  # fmt: skip
    now = [ep("a", 0, True), ep("a", 1, False), ep("b", 0, True), ep("b", 1, True),
           ep("c", 0, True), ep("c", 1, True), ep("d", 0, True)]  # fmt: skip
    test = paired_passes(base, now, "eval")
    # pairs: a0 (+), a1 (-), b0 (+), b1 (+), c0 (=); c1 has a fault, d0 and x0 no partner
    assert test == PairedPasses(pairs=5, gained=3, lost=1, p_value=2 * (1 + 4) / 2**4)
    assert test.cell() == "p=0.625 (+3/-1 of 5)"
    assert paired_passes(base, [ep("z", 0, True)], "eval") is None  # other tasks: no pair


def test_paired_scores_compare_each_tasks_mean_score():
    base = [ep("t1", 0, False, 0.0), ep("t1", 1, False, 0.5), ep("t2", 0, False, 0.2),
            ep("t3", 0, True, 1.0)]  # fmt: skip
    now = [ep("t1", 0, True, 1.0), ep("t1", 1, False, 0.5), ep("t2", 0, False, 0.4),
           ep("t3", 0, True, 1.0), ep("t4", 0, True, 1.0)]  # fmt: skip
    test = paired_scores(base, now)
    # per-task differences: t1 0.75 - 0.25 = 0.5, t2 0.2, t3 0: two non-zero, both up -> 2/4
    assert test.tasks == 3 and math.isclose(test.mean_diff, 0.7 / 3) and test.p_value == 0.5
    assert test.cell() == "p=0.5 (+0.233 over 3 tasks)"
    assert paired_scores(base, [], "external") is None
