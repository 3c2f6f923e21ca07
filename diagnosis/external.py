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
from clawloop.harness.taskfolder.folder import TaskFolderError
from clawloop.harness.taskfolder.foreign import folder_sha256, task_folders
from clawloop.storage.schemas import INFRA_END_REASONS

EXTERNAL_SPLIT = "external"  # the split column of external episodes: never "eval"
EXTERNAL_PLOT = "external_pass_rates.png"
WHOLE_SET = "*"  # the capability of an external_pass_rates row about the whole eval set


def external_sets(paths: list[str]) -> list[tuple[str, list[Path]]]:
    """(label, task folders) per external eval set; the label is the set folder's name.
    TaskFolderError for a path that holds no task folder, or two sets of the same name."""
    sets = []
    for path in paths:
        label = Path(path).resolve().name or str(path)
        if label in {s[0] for s in sets}:
            raise TaskFolderError(f"two eval sets are named {label!r}; rename one folder")
        sets.append((label, task_folders(Path(path))))
    return sets


def external_fingerprint(paths: list[str]) -> list[Any]:
    """What the external eval sets hold, for the cache key: each task folder's sha256."""
    out: list[Any] = []
    for path in paths:
        try:
            out.append([str(path), [[t.name, folder_sha256(t)] for t in task_folders(Path(path))]])
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
        "Harbor tasks from outside, graded by their own tests; kept apart from the held-out "
        "split above (not in its pass rates, failure summaries or guidance).",
        "",
        "| iteration | eval set | tasks | episodes | passed | pass rate |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    whole = history[history["capability"] == WHOLE_SET].sort_values(["iteration", "eval_set"])
    for r in whole.to_dict("records"):
        lines.append(
            f"| {r['iteration']} | {r['eval_set']} | {r['n_tasks']} | {r['n_episodes']} | "
            f"{r['n_passed']} | {_rate(r['pass_rate'])} |"
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


def external_summary(rates: list[dict[str, Any]], n_tasks: int) -> dict[str, Any]:
    """The stage summary's external_* figures (NaN written as None: the manifest is JSON)."""
    whole = [r for r in rates if r["capability"] == WHOLE_SET]
    episodes = sum(r["n_episodes"] for r in whole)
    passed = sum(r["n_passed"] for r in whole)
    return {
        "external_tasks": n_tasks,
        "external_episodes": episodes,
        "external_passed": passed,
        "external_pass_rate": passed / episodes if episodes else None,
        "external_pass_rates": {
            r["eval_set"]: None if math.isnan(r["pass_rate"]) else r["pass_rate"] for r in whole
        },
    }
