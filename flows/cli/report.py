"""`clawloop report --run ID [--root R] [--json]`: the whole run at a glance (registered in
flows/cli.py). `--json` prints the figures the table is made of (flows/report.py run_report_json)
and writes nothing.

Reads every iteration's committed stages (manifests, and the small tables: train's metrics,
diagnose's pass rates), prints the per-iteration table and the held-out pass rate per capability,
and writes `<root>/<run_id>/report.md` and `<root>/<run_id>/report.png` beside the run (any
storage root, object stores included). Nothing is re-run; a stage that did not commit shows "-".

An external held-out eval set (`diagnose.eval_tasks`: Harbor dataset folders rolled out beside our
own eval split) shows as its own column and table: diagnose's summary `external_pass_rate` (all
sets, with its 95 % Wilson interval `external_pass_rate_ci`), its mean score
`external_mean_reward` with `external_mean_reward_ci`, `external_pass_rates` ({eval set: rate}),
and per capability the stage's
external_pass_rates.parquet (one row per iteration, eval set and capability; "*" the whole set).
With `diagnose.baseline` the table starts at row 0 ("base"): the base policy on iteration 1's
held-out and external tasks, from that stage's summary `baseline`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from clawloop.flows.names import check_run_id, run_id_arg
from clawloop.flows.records import run_doc
from clawloop.flows.report import IterationFigures, RunFigures
from clawloop.storage import fs

REPORT_MD, REPORT_PNG = "report.md", "report.png"
WHOLE_SET = "*"  # diagnosis/external.py: an external_pass_rates row about the whole eval set


class ReportError(Exception):
    """No such run: one line, exit 2."""


def _rate(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def external_figures(
    summary: dict[str, Any], rows: list[dict[str, Any]] = ()
) -> tuple[float | None, dict[str, float]]:
    """(pass rate over every external eval set, {label: rate}) from diagnose's summary and its
    external_pass_rates rows; a label is the eval set's name, or "set / capability"."""
    per: dict[str, float] = {}
    sets = summary.get("external_pass_rates")
    for name, v in sets.items() if isinstance(sets, dict) else []:
        if (r := _rate(v)) is not None:
            per[str(name)] = r
    for row in rows:
        if (r := _rate(row.get("pass_rate"))) is not None:
            cap = str(row["capability"])
            per[str(row["eval_set"]) + ("" if cap == WHOLE_SET else f" / {cap}")] = r
    return _rate(summary.get("external_pass_rate")), per


def _interval(v: Any) -> tuple[float, float] | None:
    """A [low, high] pair of the summary (diagnose's external_*_ci), else None."""
    if not isinstance(v, list | tuple) or len(v) != 2:
        return None
    lo, hi = _rate(v[0]), _rate(v[1])
    return None if lo is None or hi is None else (lo, hi)


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _read_external(
    it: IterationFigures, summary: dict[str, Any], rows: list[dict[str, Any]] = ()
) -> None:
    """The external figures of a diagnose summary (or its `baseline`) into `it`."""
    it.external_pass_rate, it.external = external_figures(summary, rows)
    it.external_pass_ci = _interval(summary.get("external_pass_rate_ci"))
    it.external_mean = _rate(summary.get("external_mean_reward"))
    it.external_mean_ci = _interval(summary.get("external_mean_reward_ci"))
    it.external_passed = _int(summary.get("external_passed"))
    it.external_episodes = _int(summary.get("external_episodes"))


def iteration_figures(root: str, run_id: str, k: int) -> IterationFigures:
    """One iteration's figures from its committed stages."""
    from clawloop.storage import artifacts
    from clawloop.storage.manifest import check_manifest

    it = IterationFigures(iteration=k)

    def manifest(stage: str):
        m, problem = check_manifest(fs.stage_url(root, run_id, k, stage))
        if m is None:
            it.missing.append(stage)
        if problem is not None:
            it.damaged.append(problem)
        return m

    if (m := manifest("synthesize")) is not None:
        it.candidates = m.rows.get("candidates.parquet")
    if (m := manifest("forge")) is not None:
        it.forged, it.forge_failed = _int(m.summary.get("forged")), _int(m.summary.get("failed"))
    if (m := manifest("verify")) is not None:
        it.verified = _int(m.summary.get("kept"))
        it.verified_train = _int(m.summary.get("kept_train"))
    if (m := manifest("rollout")) is not None:
        s = m.summary
        it.rollout_tasks, it.episodes = _int(s.get("tasks")), _int(s.get("episodes"))
        it.rollout_passed, it.band_kept = _int(s.get("passed")), _int(s.get("kept_tasks"))
    if (m := manifest("train")) is not None:
        it.train_status = str(m.summary.get("status", "")) or None
        it.train_steps = _int(m.summary.get("steps"))
        if "metrics.parquet" in m.rows:
            url = fs.stage_url(root, run_id, k, "train")
            it.losses = [
                (str(r["phase"]), int(r["step"]), float(r["loss"]))
                for r in artifacts.read_rows(url, "metrics")
            ]
    if (m := manifest("diagnose")) is not None:
        it.eval_episodes = _int(m.summary.get("eval_episodes"))
        if "pass_rates.parquet" in m.rows:
            url = fs.stage_url(root, run_id, k, "diagnose")
            for r in artifacts.read_rows(url, "pass_rates"):
                if int(r["iteration"]) == k:
                    it.heldout[str(r["capability"])] = (int(r["n_passed"]), int(r["n_episodes"]))
        ext = []
        if "external_pass_rates.parquet" in m.rows:
            url = fs.stage_url(root, run_id, k, "diagnose")
            ext = [
                r for r in artifacts.read_rows(url, "external_pass_rates") if r["iteration"] == k
            ]
        _read_external(it, m.summary, ext)
    return it


def baseline_figures(root: str, run_id: str) -> IterationFigures | None:
    """Row 0, the base policy before any training (`diagnose.baseline`), from iteration 1's
    diagnose summary; None when that stage did not run it."""
    from clawloop.storage.manifest import check_manifest

    m, _ = check_manifest(fs.stage_url(root, run_id, 1, "diagnose"))
    base = m.summary.get("baseline") if m is not None else None
    if not isinstance(base, dict):
        return None
    it = IterationFigures(iteration=0)
    for cap, counts in (base.get("heldout") or {}).items():
        if isinstance(counts, list | tuple) and len(counts) == 2:
            it.heldout[str(cap)] = (int(counts[0]), int(counts[1]))
    it.eval_episodes = _int(base.get("heldout_episodes"))
    _read_external(it, base)
    return it


def run_figures(root: str, run_id: str) -> RunFigures:
    """Every iteration of the run: 1..K from run.json, and any further iteration folder."""
    run_url = fs.join(root, check_run_id(run_id))
    if not fs.exists(fs.join(run_url, "run.json")):
        raise ReportError(f"no run {run_id!r} under {root}: list runs with `clawloop runs`")
    doc = run_doc(root, run_id) or {}
    iterations = (doc.get("config") or {}).get("iterations")
    k = iterations if isinstance(iterations, int) and not isinstance(iterations, bool) else 0
    found = {
        int(n.removeprefix("iter-"))
        for n in fs.listdir(run_url)
        if n.startswith("iter-") and n.removeprefix("iter-").isdigit()
    }
    ks = sorted(found | set(range(1, k + 1)))
    its = [iteration_figures(root, run_id, i) for i in ks]
    while its and len(its[-1].missing) == len(STAGE_NAMES) and its[-1].iteration > 1:
        its.pop()  # iterations the run has not reached: no row
    if (base := baseline_figures(root, run_id)) is not None:
        its.insert(0, base)
        add_paired_tests(root, run_id, its)
    from clawloop.flows.lease import in_progress

    return RunFigures(run_id=run_id, k=k, iterations=its, partial=in_progress(root, run_id))


EPISODE_COLUMNS = ["task_id", "attempt", "split", "passed", "reward", "end_reason"]


def episodes(root: str, run_id: str, k: int, table: str) -> list[dict[str, Any]]:
    """A diagnose table's episodes (only the columns a paired test reads); [] when the stage
    did not commit it."""
    import io

    import pyarrow.parquet as pq

    from clawloop.storage.manifest import check_manifest

    url = fs.stage_url(root, run_id, k, "diagnose")
    m, _ = check_manifest(url)
    if m is None or f"{table}.parquet" not in m.rows:
        return []
    data = pq.read_table(io.BytesIO(fs.read_bytes(fs.join(url, f"{table}.parquet"))))
    return data.select([c for c in EPISODE_COLUMNS if c in data.column_names]).to_pylist()


def add_paired_tests(root: str, run_id: str, its: list[IterationFigures]) -> None:
    """Each iteration against row base (its[0]) over the same tasks: held-out and external
    pass/fail (McNemar) and the external per-task score (sign-flip), from iteration 1's
    baseline_trajectories and each iteration's eval / external trajectories."""
    from clawloop.diagnosis.external import EXTERNAL_SPLIT
    from clawloop.diagnosis.paired import paired_passes, paired_scores

    base = episodes(root, run_id, 1, "baseline_trajectories")
    if not base:
        return
    for it in its[1:]:
        held = episodes(root, run_id, it.iteration, "eval_trajectories")
        it.heldout_test = paired_passes(base, held, "eval")
        ext = episodes(root, run_id, it.iteration, "external_trajectories")
        it.external_test = paired_passes(base, ext, EXTERNAL_SPLIT)
        it.score_test = paired_scores(base, ext, EXTERNAL_SPLIT)


STAGE_NAMES = ("synthesize", "forge", "verify", "rollout", "train", "diagnose")


def write_report(root: str, figures: RunFigures) -> tuple[str, str]:
    """report.md and report.png beside the run; returns their URLs."""
    from clawloop.flows.report import run_report_markdown, run_report_png

    md = fs.join(root, figures.run_id, REPORT_MD)
    png = fs.join(root, figures.run_id, REPORT_PNG)
    fs.write_bytes_atomic(png, run_report_png(figures))
    fs.write_bytes_atomic(md, run_report_markdown(figures, REPORT_PNG).encode())
    return md, png


def _cmd_report(args: argparse.Namespace) -> int:
    from rich.console import Console

    from clawloop.flows.report import capability_table, run_report_json, run_report_table

    try:
        figures = run_figures(args.root, args.run)
    except ReportError as exc:
        print(f"clawloop report: {exc}", file=sys.stderr)
        return 2
    for it in figures.iterations:
        for problem in it.damaged:  # shown as "-": said once, one line each
            print(f"clawloop report: {problem}: its figures show as -", file=sys.stderr)
    if figures.partial:  # the JSON keeps its shape: partial is said here
        print(f"clawloop report: {figures.partial}", file=sys.stderr)
    if args.json:  # the figures only, on stdout: nothing written beside the run
        print(json.dumps(run_report_json(figures), indent=2))
        return 0
    if figures.partial:  # the run is not ours: say what is written into it
        print(
            f"clawloop report: writing {REPORT_MD} and {REPORT_PNG} into run {args.run}, which "
            "another process is writing (marked partial; run it again when that one ends)",
            file=sys.stderr,
        )
    md, png = write_report(args.root, figures)
    console = Console(width=None if sys.stdout.isatty() else 200)  # a pipe: no 80-column wrap
    console.print(run_report_table(figures))
    if figures.capabilities:
        console.print(capability_table(figures))
    print(f"wrote {md}\nwrote {png}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="a run's per-iteration figures: printed, and report.md + report.png"
    )
    p.add_argument("--run", type=run_id_arg, required=True, help="run id (see `clawloop runs`)")
    p.add_argument("--root", default="runs", help="storage root the run is under (default: runs)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the figures as JSON ({run_id, iterations: [{label, heldout, external, train}]}) "
        "instead of the tables; writes nothing",
    )
    p.set_defaults(func=_cmd_report)
