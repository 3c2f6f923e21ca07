"""Human-readable views of a run: per-stage table/markdown (Prefect artifacts) and the CLI summary.

Pure functions from engine outcomes and run listings to rows, markdown and rich tables.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from clawloop.flows.engine import StageOutcome
from clawloop.flows.runs import RunInfo, RunSummary, error_summary

STATUS_STYLE = {
    "ran": "green",
    "skipped": "cyan",
    "failed": "bold red",
    "blocked": "yellow",
    "complete": "green",
    "incomplete": "yellow",
    "stale": "yellow",
    "running": "cyan",
}


def stage_table(outcome: StageOutcome) -> list[dict[str, Any]]:
    """One row per file the stage wrote (the Prefect table artifact)."""
    if outcome.manifest is None:
        return [{"file": "-", "rows": 0, "bytes": 0, "sha256": "-", "status": outcome.status}]
    return [
        {
            "file": f.name,
            "rows": f.rows,
            "bytes": f.bytes,
            "sha256": f.sha256[:16],
            "status": outcome.status,
        }
        for f in outcome.manifest.files
    ]


def stage_markdown(
    run_id: str, outcome: StageOutcome, stage_url: str = "", appendix: str = ""
) -> str:
    """The markdown artifact: what happened, why, what was written, key figures."""
    lines = [f"## {outcome.stage} — iteration {outcome.iteration} of run `{run_id}`", ""]
    lines.append(f"**{outcome.status}** in {outcome.duration_s:.2f}s — {outcome.reason}")
    if stage_url:
        lines.append(f"\nArtifacts: `{stage_url}`")
    m = outcome.manifest
    if m is not None:
        lines += ["", "| file | rows | bytes |", "|---|---:|---:|"]
        lines += [f"| {f.name} | {f.rows if f.rows >= 0 else '-'} | {f.bytes} |" for f in m.files]
        if m.summary:
            lines += ["", "| figure | value |", "|---|---|"]
            lines += [
                f"| {k} | {json.dumps(v) if not isinstance(v, str) else v} |"
                for k, v in m.summary.items()
            ]
        lines += ["", f"cache key `{m.inputs_hash[:16]}`, code `{m.code_version[:12]}`"]
    if outcome.error:
        lines += ["", "```", outcome.error.strip()[:4000], "```"]
    if appendix:
        lines += ["", "---", "", appendix[:20000]]
    return "\n".join(lines)


def _rows_text(rows: dict[str, int]) -> str:
    return ", ".join(f"{name.removesuffix('.parquet')}={n}" for name, n in rows.items()) or "-"


def summary_table(summary: RunSummary) -> Table:
    """The end-of-run summary: one line per stage and iteration."""
    t = Table(
        title=f"run {summary.run_id} — {'ok' if summary.ok else 'FAILED'} in {summary.duration_s:.1f}s"
    )
    for col in ("iter", "stage", "status", "rows", "time", "why"):
        t.add_column(col, justify="right" if col in ("iter", "time") else "left")
    for o in summary.outcomes:
        style = STATUS_STYLE.get(o.status, "")
        why = error_summary(o.error) if o.error else o.reason
        t.add_row(
            str(o.iteration),
            o.stage,
            f"[{style}]{o.status}[/]",
            _rows_text(o.rows),
            f"{o.duration_s:.2f}s",
            why[:100],
        )
    return t


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def runs_table(runs: Sequence[RunInfo], order: Sequence[str]) -> Table:
    """`clawloop runs`: one line per run (status, start, duration, K), then one per stage when a
    single run is shown. A stale stage re-runs on the next `clawloop run --run-id`."""
    t = Table(title="runs")
    for col in ("run", "status", "started (UTC)", "duration", "K", "why"):
        t.add_column(col)
    for run in runs:
        head = run.status.split(" ")[0].rstrip(":")
        style = STATUS_STYLE.get(head, "")
        t.add_row(
            run.run_id,
            f"[{style}]{run.status}[/]",
            _when(run.started_at),
            f"{run.duration_s:.1f}s",
            str(run.k or "-"),
            run.reason[:120],
        )
    return t


def stages_table(run: RunInfo, order: Sequence[str]) -> Table:
    """One run's stages as the next `clawloop run --run-id` would find them."""
    t = Table(title=f"run {run.run_id}: {run.status}")
    for col in ("iter", "stage", "status", "rows", "time", "why"):
        t.add_column(col)
    rank = {name: i for i, name in enumerate(order)}
    if not run.iterations:
        t.add_row("-", "-", "no stages yet", "-", "-", "")
    for k, stages in run.iterations.items():
        for s in sorted(stages, key=lambda s: rank.get(s.stage, len(rank))):
            style = STATUS_STYLE.get(s.status, "")
            t.add_row(
                str(k),
                s.stage,
                f"[{style}]{s.status}[/]",
                _rows_text(s.rows),
                f"{s.duration_s:.2f}s",
                s.reason[:120],
            )
    return t
