"""External held-out eval sets (`diagnose.eval_tasks`): which task folders a set holds, what
they hold for the cache key, their pass rates per iteration, report.md's section and the plot.

Pure functions over task rows and episodes; the diagnose stage (tasks/diagnose.py) prepares the
tasks, rolls them out and writes what these return. External episodes are kept apart from the
own held-out split: their own table, split "external", never in the guidance.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from clawloop.diagnosis.report import pass_rate_png
from clawloop.harness.taskfolder.clawgym import clawgym_folders
from clawloop.harness.taskfolder.folder import TaskFolderError
from clawloop.harness.taskfolder.foreign import folder_sha256, task_folders
from clawloop.storage.schemas import INFRA_END_REASONS

EXTERNAL_SPLIT = "external"  # the split column of external episodes: never "eval"
EXTERNAL_PLOT = "external_pass_rates.png"
WHOLE_SET = "*"  # the capability of an external_pass_rates row about the whole eval set


Z95 = 1.959963984540054  # the normal quantile of a two-sided 95 % interval


def wilson_interval(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a pass rate passed/n (NaNs when n is 0): unlike the normal
    approximation it stays inside [0, 1] and is not empty at 0/n or n/n."""
    if n <= 0:
        return math.nan, math.nan
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: list[float], z: float = Z95) -> tuple[float, float, float]:
    """(mean, low, high): the normal-approximation 95 % interval of a mean score, clipped to
    [0, 1] (scores are in [0, 1]); the interval is the mean itself for one value, NaNs for none."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = z * sd / math.sqrt(n)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def eval_set_folders(path: Path) -> list[Path]:
    """The task folders of one eval set: ClawGym task folders (data_entry.json) when it holds
    them, else Harbor ones (TaskFolderError when it holds neither)."""
    return clawgym_folders(Path(path)) or task_folders(Path(path))


def external_sets(paths: list[str]) -> list[tuple[str, list[Path]]]:
    """(label, task folders) per external eval set; the label is the set folder's name.
    TaskFolderError for a path that holds no task folder, or two sets of the same name."""
    sets = []
    for path in paths:
        label = Path(path).resolve().name or str(path)
        if label in {s[0] for s in sets}:
            raise TaskFolderError(f"two eval sets are named {label!r}; rename one folder")
        sets.append((label, eval_set_folders(Path(path))))
    return sets


def external_fingerprint(paths: list[str]) -> list[Any]:
    """What the external eval sets hold, for the cache key: each task folder's sha256."""
    out: list[Any] = []
    for path in paths:
        try:
            folders = eval_set_folders(Path(path))
            out.append([str(path), [[t.name, folder_sha256(t)] for t in folders]])
        except (TaskFolderError, OSError) as exc:
            out.append([str(path), f"unreadable: {exc}"])
    return out


def external_pass_rates(
    rows: list[dict[str, Any]], tasks: list[dict[str, Any]], iteration: int
) -> list[dict[str, Any]]:
    """EXTERNAL_PASS_RATES rows from the episodes `rows` of the external `tasks` (their task rows:
    task_id, capability, eval_set): per eval set, one row per capability and one for the whole set
    ("*"). Episodes that ended in an infrastructure fault are not counted; none left: NaN."""
    set_of = {row["task_id"]: row["eval_set"] for row in tasks}
    out = []
    for label in dict.fromkeys(row["eval_set"] for row in tasks):
        ids = {t for t, s in set_of.items() if s == label}
        mine = [r for r in rows if r["task_id"] in ids]
        caps = sorted({row["capability"] for row in tasks if row["task_id"] in ids})
        for cap in [WHOLE_SET, *caps]:
            group = [r for r in mine if cap == WHOLE_SET or r["capability"] == cap]
            n_tasks = len({r["task_id"] for r in group}) if group else 0
            counted = [r for r in group if r["end_reason"] not in INFRA_END_REASONS]
            passed = sum(bool(r["passed"]) for r in counted)
            out.append(
                {
                    "iteration": iteration,
                    "eval_set": label,
                    "capability": cap,
                    "n_tasks": n_tasks,
                    "n_episodes": len(counted),
                    "n_passed": passed,
                    "pass_rate": passed / len(counted) if counted else math.nan,
                    "mean_reward": sum(float(r["reward"]) for r in counted) / len(counted)
                    if counted
                    else math.nan,
                    "external": True,
                }
            )
    return out


def _rate(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.0%}"


def external_report(history: pd.DataFrame, iteration: int) -> str:
    """report.md's section on the external eval sets: the whole-set pass rate per iteration, and
    this iteration's per capability."""
    lines = [
        "",
        "## External held-out eval (`diagnose.eval_tasks`)",
        "",
        "Tasks from outside (Harbor, ClawGym), graded by their own tests; kept apart from the held-out "
        "split above (not in its pass rates, failure summaries or guidance).",
        "",
        "| iteration | eval set | tasks | episodes | passed | pass rate [95 % Wilson] "
        "| mean score |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    whole = history[history["capability"] == WHOLE_SET].sort_values(["iteration", "eval_set"])
    for r in whole.to_dict("records"):
        lo, hi = wilson_interval(int(r["n_passed"]), int(r["n_episodes"]))
        ci = "" if math.isnan(lo) else f" [{_rate(lo)}, {_rate(hi)}]"
        mean = r.get("mean_reward", math.nan)
        lines.append(
            f"| {r['iteration']} | {r['eval_set']} | {r['n_tasks']} | {r['n_episodes']} | "
            f"{r['n_passed']} | {_rate(r['pass_rate'])}{ci} | "
            f"{'-' if mean is None or math.isnan(mean) else f'{mean:.3f}'} |"
        )
    now = history[(history["iteration"] == iteration) & (history["capability"] != WHOLE_SET)]
    if not now.empty:
        lines += ["", f"Iteration {iteration} per capability:", "",
                  "| eval set | capability | tasks | episodes | pass rate |",
                  "|---|---|---:|---:|---:|"]  # fmt: skip
        lines += [
            f"| {r['eval_set']} | {r['capability']} | {r['n_tasks']} | {r['n_episodes']} | "
            f"{_rate(r['pass_rate'])} |"
            for r in now.to_dict("records")
        ]
    lines += ["", f"![external pass rate]({EXTERNAL_PLOT})", ""]
    return "\n".join(lines)


def plot_external(history: pd.DataFrame) -> bytes:
    """PNG: each external eval set's whole-set pass rate over iterations."""
    whole = history[history["capability"] == WHOLE_SET]
    title = "external held-out pass rate (diagnose.eval_tasks)"
    return pass_rate_png(whole, "eval_set", "external pass rate", title)


def _none(v: float) -> float | None:
    return None if v is None or math.isnan(v) else v


def external_summary(
    rates: list[dict[str, Any]], n_tasks: int, rows: list[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The stage summary's external_* figures (NaN written as None: the manifest is JSON): pass
    rate with its 95 % Wilson interval, and the mean score over the counted episodes `rows`
    with its 95 % interval."""
    whole = [r for r in rates if r["capability"] == WHOLE_SET]
    episodes = sum(r["n_episodes"] for r in whole)
    passed = sum(r["n_passed"] for r in whole)
    scores = [float(r["reward"]) for r in rows if r["end_reason"] not in INFRA_END_REASONS]
    mean, lo, hi = mean_interval(scores)
    p_lo, p_hi = wilson_interval(passed, episodes)
    return {
        "external_tasks": n_tasks,
        "external_episodes": episodes,
        "external_passed": passed,
        "external_pass_rate": passed / episodes if episodes else None,
        "external_pass_rate_ci": [_none(p_lo), _none(p_hi)] if episodes else None,
        "external_mean_reward": _none(mean),
        "external_mean_reward_ci": [_none(lo), _none(hi)] if scores else None,
        "external_pass_rates": {
            r["eval_set"]: None if math.isnan(r["pass_rate"]) else r["pass_rate"] for r in whole
        },
    }
