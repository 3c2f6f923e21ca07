"""The diagnosis report: the pass-rate table and plot, and the markdown report around them.

`plot_pass_rates` draws eval pass rate per capability over iterations (matplotlib, Agg, PNG);
`render_report` writes the markdown the backbone publishes as a Prefect artifact: pass-rate
table, plot link, recurring failure patterns (diagnosis/guidance.py's clusters) and
the guidance for the next iteration. Pure except for the plot file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from clawloop.diagnosis.guidance import guidance_rows


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += [
        "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in r) + " |" for r in rows
    ]
    return "\n".join(lines)


def pass_rate_table(all_rates: pd.DataFrame) -> str:
    """Markdown table: one row per capability, one column per iteration, cells `rate (passed/n)`."""
    if all_rates.empty:
        return "_no eval episodes_"
    iters = sorted(int(i) for i in all_rates["iteration"].unique())
    rows = []
    for cap, g in all_rates.groupby("capability", sort=True):
        by_it = {int(r.iteration): r for r in g.itertuples()}
        cells = [
            f"{by_it[i].pass_rate:.2f} ({by_it[i].n_passed}/{by_it[i].n_episodes})"
            if i in by_it
            else "-"
            for i in iters
        ]
        rows.append([str(cap), *cells])
    return _md_table(["capability", *[f"iter {i}" for i in iters]], rows)


def pass_rate_png(rates: pd.DataFrame, by: str, ylabel: str, title: str) -> bytes:
    """PNG line plot of `pass_rate` over `iteration`, one line per value of column `by`."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        for label, g in rates.sort_values("iteration").groupby(by, sort=True):
            ax.plot(g["iteration"], g["pass_rate"], marker="o", label=str(label))
        ax.set_xlabel("iteration")
        ax.set_ylabel(ylabel)
        ax.set_ylim(-0.02, 1.02)
        if not rates.empty:
            ax.set_xticks(sorted(int(i) for i in rates["iteration"].unique()))
            ax.legend(loc="best", fontsize="small")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return buf.getvalue()


def plot_pass_rates(all_rates: pd.DataFrame, path: Path) -> Path:
    """PNG line plot of eval pass rate per capability over iterations."""
    png = pass_rate_png(
        all_rates, "capability", "eval pass rate", "held-out pass rate per capability"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


def cluster_table(clusters: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of the recurring failure patterns, largest first as given."""
    if not clusters:
        return "_no failures to cluster_"
    return _md_table(
        ["capability", "root cause", "size", "share", "pattern", "example tasks"],
        [
            [
                str(c["capability"]),
                str(c["root_cause"]),
                str(c["size"]),
                f"{float(c['share']):.0%}",
                str(c["pattern"])[:240],
                ", ".join(json.loads(c["example_task_ids_json"])),
            ]
            for c in clusters
        ],
    )


def guidance_table(guidance: Mapping[str, Any]) -> str:
    """Markdown table of the guidance: weight, pass rate, mastery and difficulty per capability."""
    return _md_table(
        ["capability", "weight", "pass rate", "mastered", "multihop", "dirtiness"],
        [
            [
                r["capability"],
                f"{r['weight']:.3f}",
                "-" if math.isnan(r["pass_rate"]) else f"{r['pass_rate']:.2f}",
                "yes" if r["mastered"] else "no",
                str(r["multihop"]),
                str(r["dirtiness"]),
            ]
            for r in guidance_rows(guidance)
        ],
    )


def render_report(
    iteration: int,
    all_rates: pd.DataFrame,
    summaries: Sequence[Mapping[str, Any]],
    clusters: Sequence[Mapping[str, Any]],
    guidance: Mapping[str, Any],
    plot_name: str,
    notes: Sequence[str] = (),
) -> str:
    """The diagnosis report as markdown (the backbone publishes it as a Prefect artifact)."""
    n_fb = sum(1 for s in summaries if s.get("fallback"))
    parts = [
        f"# clawloop diagnosis - iteration {iteration}",
        "",
        f"{len(summaries)} failed eval episode(s) summarised; {len(summaries) - n_fb} by the policy, "
        f"{n_fb} by the heuristic fallback.",
        *[f"> {n}" for n in notes],
        "",
        "## Pass rate per capability (eval split)",
        "",
        pass_rate_table(all_rates),
        "",
        f"![pass rate per capability]({plot_name})",
        "",
        "## Recurring failure patterns",
        "",
        cluster_table(clusters),
        "",
        f"## Guidance for iteration {guidance.get('for_iteration', iteration + 1)}",
        "",
        guidance_table(guidance),
    ]
    return "\n".join(parts) + "\n"
