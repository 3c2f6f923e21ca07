"""Human-readable views of a run: per-stage table/markdown (Prefect artifacts) and the CLI summary.

Pure functions from engine outcomes and run listings to rows, markdown and rich tables; and the
whole run's per-iteration figures (`RunFigures`, gathered by flows/cli/report.py) as report.md, a
terminal table and one PNG.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from clawloop.diagnosis.paired import PairedPasses, PairedScores
from clawloop.flows.runs import RunInfo, RunSummary, error_summary
from clawloop.tasks.engine import StageOutcome

STATUS_STYLE = {
    "ran": "green",
    "skipped": "cyan",
    "failed": "bold red",
    "blocked": "yellow",
    "complete": "green",
    "incomplete": "yellow",
    "stale": "yellow",
    "running": "cyan",
    "unreadable": "bold red",
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


IDLE_STATUSES = ("nothing_to_train",)  # a stage's own summary status that says it did no work


def idle(outcome: StageOutcome) -> str:
    """The stage's own "did no work" status (train's nothing_to_train), or ""."""
    status = outcome.manifest.summary.get("status") if outcome.manifest else None
    return status if status in IDLE_STATUSES else ""


def summary_title(summary: RunSummary) -> str:
    """'ok' only when no stage said it did nothing; else which did, so a run that trained
    nothing does not read as a run that did its work."""
    if not summary.ok:
        state = "FAILED"
    else:
        idles = [f"{o.stage} {o.iteration}" for o in summary.outcomes if idle(o)]
        state = f"ok, but did no work: {', '.join(idles)}" if idles else "ok"
    return f"run {summary.run_id} — {state} in {summary.duration_s:.1f}s"


def summary_table(summary: RunSummary) -> Table:
    """The end-of-run summary: one line per stage and iteration."""
    t = Table(title=summary_title(summary))
    for col in ("iter", "stage", "status", "rows", "time", "why"):
        t.add_column(col, justify="right" if col in ("iter", "time") else "left")
    for o in summary.outcomes:
        style = STATUS_STYLE.get(o.status, "")
        why = error_summary(o.error) if o.error else o.reason
        if idle(o):
            why = str(o.manifest.summary.get("reason") or why)
        t.add_row(
            str(o.iteration),
            o.stage,
            Text(f"{o.status}: {idle(o)}" if idle(o) else o.status, style=style),
            _rows_text(o.rows),
            f"{o.duration_s:.2f}s",
            Text(why[:100]),
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
        t.add_row(  # Text, not markup: a reason may hold "[...]" (a damaged file's content)
            Text(run.run_id),
            Text(run.status, style=style),
            _when(run.started_at),
            f"{run.duration_s:.1f}s",
            str(run.k or "-"),
            Text(run.reason[:120]),
        )
    return t


def stages_table(run: RunInfo, order: Sequence[str]) -> Table:
    """One run's stages as the next `clawloop run --run-id` would find them."""
    t = Table(title=Text(f"run {run.run_id}: {run.status}"))
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
                Text(s.status, style=style),
                _rows_text(s.rows),
                f"{s.duration_s:.2f}s",
                Text(s.reason[:120]),
            )
    return t


# ---- the whole run at a glance: `clawloop report` ----------------------------------------------


@dataclass
class IterationFigures:
    """One iteration's key numbers, read from its stages' manifests and small tables (None: the
    stage did not commit, or wrote nothing to measure)."""

    iteration: int
    candidates: int | None = None  # synthesize: candidate tasks
    forged: int | None = None  # forge: built (status ok)
    forge_failed: int | None = None
    verified: int | None = None  # verify: kept (train + eval)
    verified_train: int | None = None
    rollout_tasks: int | None = None  # rollout: train tasks rolled out
    episodes: int | None = None
    rollout_passed: int | None = None
    band_kept: int | None = None  # band filter: tasks kept for training
    train_status: str | None = None  # trained | nothing_to_train
    train_steps: int | None = None
    losses: list[tuple[str, int, float]] = field(default_factory=list)  # (phase, step, loss)
    eval_episodes: int | None = None  # diagnose: held-out episodes graded
    heldout: dict[str, tuple[int, int]] = field(default_factory=dict)  # capability: (passed, n)
    external_pass_rate: float | None = None  # an external eval set's, when diagnose has one
    external: dict[str, float] = field(default_factory=dict)  # per eval set (/ capability)
    # 95 % intervals of the external figures (Wilson for the pass rate) and the mean score
    external_pass_ci: tuple[float, float] | None = None
    external_mean: float | None = None
    external_mean_ci: tuple[float, float] | None = None
    external_passed: int | None = None  # external episodes passed / counted (all eval sets)
    external_episodes: int | None = None
    # paired tests against row "base" on the same tasks (diagnosis/paired.py): held-out and
    # external pass/fail (exact McNemar), external per-task score (sign-flip); None: no base row
    heldout_test: PairedPasses | None = None
    external_test: PairedPasses | None = None
    score_test: PairedScores | None = None
    missing: list[str] = field(default_factory=list)  # stages with no committed output
    damaged: list[str] = field(default_factory=list)  # "<manifest url> is damaged: why"

    @property
    def label(self) -> str:
        """The row's name: the iteration, or "base" for row 0 (the policy before any training)."""
        return "base" if self.iteration == 0 else str(self.iteration)

    @property
    def band_yield(self) -> float | None:
        """Share of the rolled-out tasks the band filter kept."""
        if self.band_kept is None or not self.rollout_tasks:
            return None
        return self.band_kept / self.rollout_tasks

    def mean_loss(self, phase: str) -> float | None:
        vals = [loss for p, _, loss in self.losses if p == phase and loss == loss]  # not NaN
        return sum(vals) / len(vals) if vals else None

    @property
    def heldout_passed(self) -> tuple[int, int]:
        """(passed, n) over every capability's held-out episodes."""
        return (
            sum(p for p, _ in self.heldout.values()),
            sum(n for _, n in self.heldout.values()),
        )

    @property
    def heldout_pass_rate(self) -> float | None:
        n = sum(e for _, e in self.heldout.values())
        return sum(p for p, _ in self.heldout.values()) / n if n else None

    def capability_rate(self, capability: str) -> float | None:
        passed, n = self.heldout.get(capability, (0, 0))
        return passed / n if n else None


@dataclass
class RunFigures:
    run_id: str
    k: int  # iterations the run was configured for
    iterations: list[IterationFigures]
    # Why the figures are partial: another process holds the run's lease ("" when none does).
    partial: str = ""

    @property
    def capabilities(self) -> list[str]:
        return sorted({c for it in self.iterations for c in it.heldout})

    @property
    def has_base(self) -> bool:
        """Row "base" (diagnose.baseline) leads: the later rows carry paired tests against it."""
        return bool(self.iterations) and self.iterations[0].iteration == 0

    @property
    def has_external(self) -> bool:
        return any(it.external_pass_rate is not None for it in self.iterations)


def iteration_json(it: IterationFigures) -> dict[str, Any]:
    """One row of `clawloop report --json`: held-out (passed, n); the external eval sets' passed,
    n and mean score (null without any); train's status and logged steps (null: no train stage,
    as in row "base")."""
    passed, n = it.heldout_passed
    external = None
    if it.external_episodes is not None:
        external = {
            "passed": it.external_passed or 0,
            "n": it.external_episodes,
            "mean_score": it.external_mean,
        }
    train = None
    if it.train_status is not None:
        train = {"status": it.train_status, "steps": it.train_steps}
    return {"label": it.label, "heldout": {"passed": passed, "n": n}, "external": external,
            "train": train}  # fmt: skip


def run_report_json(figures: RunFigures) -> dict[str, Any]:
    """`clawloop report --run ID --json`: the figures the table is made of, exactly the shape of
    issue 33 item 6: {"run_id", "iterations": [{"label", "heldout": {"passed", "n"},
    "external": {"passed", "n", "mean_score"} | null, "train": {"status", "steps"} | null}]}.
    A run another process is writing is marked partial on stderr (flows/cli/report.py), not
    with keys of its own here."""
    return {
        "run_id": figures.run_id,
        "iterations": [iteration_json(it) for it in figures.iterations],
    }


def _n(v: int | str | None) -> str:
    return "-" if v is None else str(v)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _loss(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


REPORT_COLUMNS = (
    "iter",
    "candidates",
    "forged",
    "verified kept",
    "kept train",
    "rolled out",
    "band kept",
    "band yield",
    "episodes passed",
    "train",
    "sft loss",
    "grpo loss",
    "held-out pass",
)
PAIRED_COLUMN = "held-out vs base (McNemar)"  # when the run has row "base"


def iteration_row(it: IterationFigures, external: bool) -> list[str]:
    """One iteration's cells, in REPORT_COLUMNS order (+ the external pass rate when any)."""
    passed = "-" if it.episodes is None else f"{_n(it.rollout_passed)}/{it.episodes}"
    train = it.train_status if it.train_status is None else f"{it.train_status} ({it.train_steps})"
    cells = [
        it.label,
        _n(it.candidates),
        _n(it.forged),
        _n(it.verified),
        _n(it.verified_train),
        _n(it.rollout_tasks),
        _n(it.band_kept),
        _pct(it.band_yield),
        passed,
        _n(train),
        _loss(it.mean_loss("sft")),
        _loss(it.mean_loss("grpo")),
        _pct(it.heldout_pass_rate),
    ]
    return cells + (external_cells(it) if external else [])


def paired_cells(it: IterationFigures, external: bool) -> list[str]:
    """The paired tests against row "base" (p-value, gained/lost pairs): held-out, and with an
    external set its pass/fail and per-task score tests; "-" on row base itself."""
    cells = ["-" if it.heldout_test is None else it.heldout_test.cell()]
    if external:
        cells.append("-" if it.external_test is None else it.external_test.cell())
        cells.append("-" if it.score_test is None else it.score_test.cell())
    return cells


def _ci(ci: tuple[float, float] | None, fmt: Any) -> str:
    return "" if ci is None else f" [{fmt(ci[0])}, {fmt(ci[1])}]"


def external_cells(it: IterationFigures) -> list[str]:
    """The external pass rate and mean score, each with its 95 % interval when known."""
    score = "-" if it.external_mean is None else f"{it.external_mean:.3f}"
    return [
        _pct(it.external_pass_rate) + _ci(it.external_pass_ci, _pct),
        score + _ci(it.external_mean_ci, lambda v: f"{v:.3f}"),
    ]


EXTERNAL_COLUMNS = ("external pass [95% Wilson]", "external score [95% CI]")
EXTERNAL_PAIRED_COLUMNS = ("external pass vs base (McNemar)", "external score vs base (sign-flip)")


def _columns(figures: RunFigures) -> list[str]:
    cols = list(REPORT_COLUMNS) + (list(EXTERNAL_COLUMNS) if figures.has_external else [])
    if figures.has_base:
        cols += [PAIRED_COLUMN] + (list(EXTERNAL_PAIRED_COLUMNS) if figures.has_external else [])
    return cols


def _row(figures: RunFigures, it: IterationFigures) -> list[str]:
    cells = iteration_row(it, figures.has_external)
    return cells + (paired_cells(it, figures.has_external) if figures.has_base else [])


def run_report_markdown(figures: RunFigures, png_name: str = "report.png") -> str:
    """report.md: the per-iteration table, held-out pass rate per capability, the figure."""
    its = figures.iterations
    lines = [
        f"# Run `{figures.run_id}`: {_of_k(figures)}",
        "",
        *([f"**Partial:** {figures.partial}.", ""] if figures.partial else []),
        f"![per-iteration figures]({png_name})",
        "",
        "## Per iteration",
        "",
        "Kept tasks per stage, the band filter's yield (kept / rolled out), the rollout's passed",
        "episodes, train's status (logged steps) and mean SFT / GRPO loss over its logged steps,",
        "and diagnose's held-out pass rate (passed / graded eval episodes, every capability).",
    ]
    if figures.has_base:
        lines += [
            "Against row base (the same tasks): the exact McNemar p-value over episodes paired by",
            "(task, attempt), with +gained/-lost pairs; for an external set also the sign-flip",
            "p-value over per-task mean score differences.",
        ]
    lines += [""]
    cols = _columns(figures)
    lines += ["| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
    lines += ["| " + " | ".join(_row(figures, it)) + " |" for it in its]
    caps = figures.capabilities
    if caps:
        lines += ["", "## Held-out pass rate per capability", ""]
        head = ["capability"] + [f"iter {it.label}" for it in its]
        lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(its)]
        for c in caps:
            cells = [
                "-"
                if c not in it.heldout
                else f"{_pct(it.capability_rate(c))} ({it.heldout[c][0]}/{it.heldout[c][1]})"
                for it in its
            ]
            lines.append("| " + " | ".join([c, *cells]) + " |")
    ext = sorted({c for it in its for c in it.external})
    if ext:
        lines += ["", "## External eval pass rate per eval set and capability", ""]
        head = ["eval set / capability"] + [f"iter {it.label}" for it in its]
        lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(its)]
        lines += [
            "| " + " | ".join([c] + [_pct(it.external.get(c)) for it in its]) + " |" for c in ext
        ]
    gaps = [f"iteration {it.iteration}: {', '.join(it.missing)}" for it in its if it.missing]
    if gaps:
        lines += ["", "Stages without committed output (shown as -): " + "; ".join(gaps) + "."]
    return "\n".join(lines) + "\n"


def _of_k(figures: RunFigures) -> str:
    """'2 of 3 iterations': the loop's iterations shown; row base is not one of them."""
    shown = sum(1 for it in figures.iterations if it.iteration > 0)
    return f"{shown} of {figures.k} iterations" + (" and row base" if figures.has_base else "")


def run_report_table(figures: RunFigures) -> Table:
    """The per-iteration table for the terminal."""
    t = Table(title=f"run {figures.run_id}: {_of_k(figures)}")
    for col in _columns(figures):
        t.add_column(col, justify="left" if col == "train" else "right")
    for it in figures.iterations:
        t.add_row(*_row(figures, it))
    return t


def capability_table(figures: RunFigures) -> Table:
    """Held-out pass rate per capability (rows) over iterations (columns)."""
    title = "held-out pass rate per capability"
    t = Table(title=title, min_width=len(title) + 4)
    t.add_column("capability")
    for it in figures.iterations:
        t.add_column(f"iter {it.label}", justify="right")
    for c in figures.capabilities:
        t.add_row(c, *[_pct(it.capability_rate(c)) for it in figures.iterations])
    return t


def run_report_png(figures: RunFigures) -> bytes:
    """One PNG, four panels: kept tasks per stage, yield and pass rates, SFT / GRPO loss over
    the run's steps, held-out pass rate per capability. Agg canvas: no display, no global state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    its = figures.iterations
    ks = [it.iteration for it in its]
    fig = Figure(figsize=(13, 9), dpi=100)
    FigureCanvasAgg(fig)
    (a, b), (c, d) = fig.subplots(2, 2)
    fig.suptitle(f"clawloop run {figures.run_id}")

    stages = (
        ("candidates", [it.candidates for it in its]),
        ("forged", [it.forged for it in its]),
        ("verified kept", [it.verified for it in its]),
        ("rolled out", [it.rollout_tasks for it in its]),
        ("band kept", [it.band_kept for it in its]),
    )
    width = 0.8 / len(stages)
    for i, (label, vals) in enumerate(stages):
        xs = [k - 0.4 + width * (i + 0.5) for k in ks]
        a.bar(xs, [v or 0 for v in vals], width, label=label)
    a.set(title="kept tasks per stage", xlabel="iteration", ylabel="tasks", xticks=ks)
    a.legend(fontsize=8)

    def line(ax: Any, values: list[float | None], label: str, **kw: Any) -> None:
        pts = [(k, v) for k, v in zip(ks, values, strict=True) if v is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label, **kw)

    line(b, [it.band_yield for it in its], "band-filter yield")
    line(b, [it.heldout_pass_rate for it in its], "held-out pass rate")
    if figures.has_external:
        line(b, [it.external_pass_rate for it in its], "external pass rate", linestyle="--")
        line(b, [it.external_mean for it in its], "external mean score", linestyle=":")
    b.set(title="yield and pass rates", xlabel="iteration", ylim=(-0.05, 1.05), xticks=ks)
    if b.get_lines():
        b.legend(fontsize=8)

    offset, labelled = 0, set()
    for it in its:
        n = 0
        for phase, color in (("sft", "tab:blue"), ("grpo", "tab:orange")):
            pts = [v for p, _, v in it.losses if p == phase]
            if pts:
                c.plot(
                    [offset + n + i + 1 for i in range(len(pts))],
                    pts,
                    color=color,
                    marker=".",
                    label=phase if phase not in labelled else None,
                )
                labelled.add(phase)
                n += len(pts)
        if n and offset:
            c.axvline(offset + 0.5, color="grey", linewidth=0.5)
        if n:
            c.annotate(f"iter {it.iteration}", (offset + 1, 1.0), xycoords=("data", "axes fraction"),
                       va="top", fontsize=8, color="grey")  # fmt: skip
        offset += n
    c.set(title="SFT / GRPO loss (logged steps, run order)", xlabel="logged step", ylabel="loss")
    if any(it.losses for it in its):
        c.legend(fontsize=8)
    else:
        c.text(0.5, 0.5, "nothing trained", ha="center", va="center", transform=c.transAxes)

    for cap in figures.capabilities:
        line(d, [it.capability_rate(cap) for it in its], cap)
    d.set(title="held-out pass rate per capability", xlabel="iteration", xticks=ks)
    d.set_ylim(-0.05, 1.05)
    for ax in (a, b, d):
        ax.set_xticks(ks, [it.label for it in its])
    if figures.capabilities:
        d.legend(fontsize=8)
    else:
        d.text(0.5, 0.5, "no held-out episodes", ha="center", va="center", transform=d.transAxes)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
