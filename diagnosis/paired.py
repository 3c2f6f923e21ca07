"""Paired tests of an iteration against the base policy on the same held-out tasks.

With `synthesize.fixed_eval` and `diagnose.baseline`, row "base" and every iteration grade the
very same tasks, `diagnose.eval_n` episodes each: two pass rates over the same tasks are paired
data, and a paired test is both fairer and stronger than comparing two Wilson intervals (which
treat the samples as independent, so they overlap long after a change is real).

- Pass/fail: the exact McNemar test over episodes paired by (task, attempt). Only the discordant
  pairs speak: `gained` (failed under base, passed now) and `lost` (the reverse); under "no
  change" each discordant pair is a fair coin, so the p-value is two-sided binomial(gained + lost,
  1/2). Pairing by attempt index is arbitrary within a task, which is valid because a task's
  attempts are exchangeable draws.
- Scores in [0, 1] (an external benchmark's mean score): the paired sign-flip (permutation) test
  over per-task mean score differences: under "no change" each task's difference is as likely
  negated, so the p-value is the share of the 2^m sign patterns whose |sum| reaches the observed
  one (exact for m <= EXACT_MAX tasks that differ, else SIGN_FLIP_DRAWS seeded random patterns).

Pure functions over trajectory rows (dicts with task_id, attempt, passed, reward, end_reason,
split); an episode ended by an infrastructure fault says nothing about the policy and is left out,
with its pair, as the pass rates leave it out.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clawloop.storage.schemas import INFRA_END_REASONS

EXACT_MAX = 16  # sign-flip: enumerate every pattern up to 2^16 = 65,536
SIGN_FLIP_DRAWS = 20_000  # else this many seeded random patterns


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts: 2 * P(X <= min) for
    X ~ binomial(gained + lost, 1/2), capped at 1; 1.0 when no pair is discordant."""
    if gained < 0 or lost < 0:
        raise ValueError(f"discordant counts must be >= 0, got {gained}, {lost}")
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1))
    return min(1.0, 2 * tail / 2**n)


def sign_flip_p(
    diffs: Sequence[float], seed: int = 0, exact_max: int = EXACT_MAX, draws: int = SIGN_FLIP_DRAWS
) -> float:
    """Two-sided paired sign-flip p-value of `diffs` (one per pair): the share of sign patterns
    whose |sum| is at least the observed |sum| (exact up to `exact_max` non-zero differences;
    beyond, (1 + hits) / (1 + draws) over seeded random patterns). 1.0 when every difference is 0."""
    d = [float(x) for x in diffs if x != 0]
    if not d:
        return 1.0
    observed = abs(sum(d)) - 1e-12 * sum(abs(x) for x in d)  # float ties count as reaching it
    m = len(d)
    if m <= exact_max:
        hits = 0
        for mask in range(2**m):
            total = sum(-x if mask >> i & 1 else x for i, x in enumerate(d))
            hits += abs(total) >= observed
        return hits / 2**m
    rng = random.Random(seed)
    hits = sum(
        abs(sum(x if rng.random() < 0.5 else -x for x in d)) >= observed for _ in range(draws)
    )
    return (1 + hits) / (1 + draws)


@dataclass(frozen=True)
class PairedPasses:
    """Episodes graded under both policies, and the exact McNemar test over them."""

    pairs: int
    gained: int  # failed under base, passed now
    lost: int  # passed under base, failed now
    p_value: float

    def cell(self) -> str:
        """'p=0.0312 (+6/-0 of 48)': the p-value beside what moved."""
        return f"p={self.p_value:.3g} (+{self.gained}/-{self.lost} of {self.pairs})"


@dataclass(frozen=True)
class PairedScores:
    """Tasks scored under both policies: the mean per-task score difference (now - base) and the
    sign-flip test over the per-task differences."""

    tasks: int
    mean_diff: float
    p_value: float

    def cell(self) -> str:
        return f"p={self.p_value:.3g} ({self.mean_diff:+.3f} over {self.tasks} tasks)"


def _counted(rows: Iterable[Mapping[str, Any]], split: str | None) -> list[Mapping[str, Any]]:
    return [
        r
        for r in rows
        if (split is None or (r.get("split") or "eval") == split)
        and r.get("end_reason") not in INFRA_END_REASONS
    ]


def _by_episode(rows: list[Mapping[str, Any]]) -> dict[tuple[str, int], bool]:
    return {(str(r["task_id"]), int(r["attempt"])): bool(r["passed"]) for r in rows}


def paired_passes(
    base: Iterable[Mapping[str, Any]], now: Iterable[Mapping[str, Any]], split: str | None = None
) -> PairedPasses | None:
    """McNemar over the episodes of `split` (None: all) present in both, paired by (task_id,
    attempt); None when no episode pairs (e.g. different tasks)."""
    b, n = _by_episode(_counted(base, split)), _by_episode(_counted(now, split))
    keys = b.keys() & n.keys()
    if not keys:
        return None
    gained = sum(1 for k in keys if n[k] and not b[k])
    lost = sum(1 for k in keys if b[k] and not n[k])
    return PairedPasses(len(keys), gained, lost, mcnemar_exact(gained, lost))


def task_scores(rows: list[Mapping[str, Any]]) -> dict[str, float]:
    """Each task's mean reward over its counted episodes."""
    sums: dict[str, list[float]] = {}
    for r in rows:
        sums.setdefault(str(r["task_id"]), []).append(float(r["reward"] or 0.0))
    return {t: sum(v) / len(v) for t, v in sums.items()}


def paired_scores(
    base: Iterable[Mapping[str, Any]], now: Iterable[Mapping[str, Any]], split: str | None = None
) -> PairedScores | None:
    """The sign-flip test over per-task mean scores of the tasks scored under both; None when
    none is."""
    b, n = task_scores(_counted(base, split)), task_scores(_counted(now, split))
    tasks = sorted(b.keys() & n.keys())
    if not tasks:
        return None
    diffs = [n[t] - b[t] for t in tasks]
    return PairedScores(len(tasks), sum(diffs) / len(diffs), sign_flip_p(diffs))
