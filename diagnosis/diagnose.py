"""The diagnose stage: held-out eval trajectories -> failure summaries, clusters, report, guidance.

The eval rollouts of the updated policy (harness/rollout.py's rollout_stage on the eval split, run
by tasks/diagnose.py) are this stage's input. For each failed episode the policy writes a
structured failure summary (diagnosis/summary.py); summaries are clustered by root cause within
each capability (diagnosis/guidance.py); the report (diagnosis/report.py: markdown + PNG plot of
pass rate per capability per iteration) and the guidance for the next synthesize (guidance.json)
land in `out_dir`.

    res = diagnose_stage(eval_df, prev_pass_rates_df, DiagnoseConfig(), endpoint, Path(out), iteration=1)
    res.tables()   # {"failure_summaries": (schema, rows), "clusters": ..., "pass_rates": ..., "guidance": ...}

Failures are data: a dead policy endpoint gives heuristic summaries (marked fallback), a model
that cannot load gives lexical clustering; both are said in the report's notes.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from clawloop.diagnosis import guidance as feedback
from clawloop.diagnosis.report import plot_pass_rates, render_report
from clawloop.diagnosis.summary import SummaryConfig, summarize_failure
from clawloop.harness.llm import LLMEndpoint, circuit_breaker, endpoint_chat
from clawloop.storage import schemas

log = logging.getLogger("clawloop.diagnose")

REPORT_NAME = "report.md"
PLOT_NAME = "pass_rates.png"
GUIDANCE_NAME = feedback.GUIDANCE_NAME


class DiagnoseConfig(BaseModel):
    """Options of the diagnose stage (the `diagnose:` section of the run config)."""

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(2, ge=1, description="failure summaries requested concurrently")
    max_summaries: int = Field(
        256,
        ge=0,
        description="failed episodes summarised per iteration (the rest are counted only)",
    )
    summary_attempts: int = Field(
        3, ge=1, le=10, description="policy calls per summary before the heuristic fallback"
    )
    max_endpoint_errors: int = Field(
        3,
        ge=1,
        description="endpoint errors in a row after which the remaining summaries use the heuristic",
    )
    max_transcript_chars: int = Field(
        12_000, ge=1000, description="transcript length shown to the summariser"
    )
    embedder: Literal["minilm", "hashed"] = Field(
        "minilm",
        description="minilm: sentence-transformers all-MiniLM-L6-v2 (offline); hashed: lexical, no model",
    )
    cluster_distance: float = Field(
        0.5,
        gt=0.0,
        le=2.0,
        description="average cosine distance above which failure patterns stay apart",
    )
    weight_floor: float = Field(
        0.05, ge=0.0, le=1.0, description="least raw sampling weight of any capability"
    )
    mastery_threshold: float = Field(
        0.8,
        ge=0.0,
        le=1.0,
        description="eval pass rate at which a capability's difficulty rises one level",
    )
    min_episodes_for_mastery: int = Field(
        2, ge=1, description="eval episodes needed before mastery counts"
    )
    patterns_per_capability: int = Field(
        3, ge=0, description="failure patterns quoted per capability in the writer prompt"
    )
    # What the pipeline rolls out for this stage (tasks/diagnose.py), beside the diagnosis itself.
    eval_n: int = Field(1, ge=1, description="episodes per held-out eval task")
    eval_tasks: list[str] = Field(
        default_factory=list,
        description=(
            "external held-out eval sets: Harbor or ClawGym data set folders (a folder of task "
            "folders, or one task folder), rolled out every iteration beside the own held-out "
            "split and graded by their own tests; pass rates reported apart (external_pass_rates)"
        ),
    )
    baseline: bool = Field(
        False,
        description="iteration 1 also rolls out the base policy (before any training) on the same "
        "held-out and external eval tasks: the run's row 0 (baseline_trajectories, summary "
        "`baseline`), what every later iteration is compared with",
    )
    eval_pass_threshold: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="ClawGym eval tasks: an episode passes when reward.sh scores at least this "
        "(the mean score is reported either way)",
    )


@dataclass
class DiagnoseResult:
    summaries: list[dict[str, Any]]  # FAILURE_SUMMARIES rows
    clusters: list[dict[str, Any]]  # CLUSTERS rows
    pass_rates: list[dict[str, Any]]  # PASS_RATES rows of this iteration
    all_pass_rates: (
        pd.DataFrame
    )  # previous iterations' rows + this iteration's (the table and plot)
    guidance: dict[str, Any]  # what the next synthesize takes (also guidance.json)
    report_path: Path
    plot_path: Path
    guidance_path: Path
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # counts for the manifest

    def tables(self) -> dict[str, tuple[pa.Schema, list[dict[str, Any]]]]:
        """The stage's Parquet tables as {name: (schema, rows)} for storage.artifacts.write_table."""
        return {
            "failure_summaries": (schemas.FAILURE_SUMMARIES, self.summaries),
            "clusters": (schemas.CLUSTERS, self.clusters),
            "pass_rates": (schemas.PASS_RATES, self.pass_rates),
            "guidance": (schemas.GUIDANCE, feedback.guidance_rows(self.guidance)),
        }


def _known_capabilities() -> list[str]:
    try:
        from clawloop.synthesis.catalog import capability_names
    except ImportError:
        return []
    return list(capability_names())


def _embedder(cfg: DiagnoseConfig, notes: list[str]) -> feedback.Embedder:
    if cfg.embedder == "minilm":
        try:
            return feedback.minilm_embedder()
        except (ImportError, OSError, RuntimeError, ValueError) as exc:
            notes.append(
                f"sentence-transformers model unavailable ({type(exc).__name__}: {exc}); clustered with lexical embeddings"
            )
    return feedback.hashed_bow_embedder()


Row = dict[str, Any]
# Runs a one-row function over rows, results in order (the pipeline passes a Prefect-task mapper).
RowMapper = Callable[[Callable[[Row], Row], list[Row]], list[Row]]


def thread_map(workers: int) -> RowMapper:
    def run(fn: Callable[[Row], Row], rows: list[Row]) -> list[Row]:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(fn, rows))

    return run


def _summaries(
    failed: list[dict[str, Any]],
    llm: LLMEndpoint | None,
    cfg: DiagnoseConfig,
    iteration: int,
    notes: list[str],
    map_rows: RowMapper,
) -> list[dict[str, Any]]:
    scfg = SummaryConfig(
        max_attempts=cfg.summary_attempts, max_transcript_chars=cfg.max_transcript_chars
    )
    chat = None
    if llm is not None:
        raw = endpoint_chat(llm, max_tokens=scfg.max_tokens, temperature=scfg.temperature)
        chat = circuit_breaker(raw, cfg.max_endpoint_errors)
    if chat is None:
        notes.append("no policy endpoint: every failure summary is the heuristic fallback")
    name = llm.model if llm else ""

    one = functools.partial(
        summarize_failure, chat_fn=chat, cfg=scfg, iteration=iteration, summarizer=name
    )
    return map_rows(one, failed)


def _eval_episodes(eval_trajectories: pd.DataFrame, notes: list[str]) -> tuple[pd.DataFrame, int]:
    """The episodes that speak for the policy: the eval split, less infrastructure faults.

    Returns (episodes, how many infrastructure faults were left out)."""
    evals = eval_trajectories
    if "split" in evals.columns and not evals.empty:
        evals = evals[evals["split"].fillna("eval") == "eval"]
    infra = 0
    if "end_reason" in evals.columns and not evals.empty:
        # A server, sandbox or harness fault says nothing about the policy: such episodes are
        # neither failures to summarise nor part of the pass rates the guidance weighs.
        is_infra = evals["end_reason"].isin(schemas.INFRA_END_REASONS)
        infra = int(is_infra.sum())
        evals = evals[~is_infra]
    if infra:
        notes.append(
            f"{infra} eval episodes ended in infrastructure faults "
            f"({', '.join(sorted(schemas.INFRA_END_REASONS))}); left out of pass rates and summaries"
        )
    return evals, infra


def heldout_counts(rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    """{capability: [passed, episodes]} of held-out episodes, counted as the pass rates are
    (infrastructure faults left out)."""
    evals, _ = _eval_episodes(pd.DataFrame(rows, columns=schemas.TRAJECTORIES.names), [])
    return {
        r["capability"]: [r["n_passed"], r["n_episodes"]] for r in feedback.pass_rates(evals, 0)
    }


def _pass_rate_history(
    prev_pass_rates: pd.DataFrame | None, rates: list[dict[str, Any]], iteration: int
) -> pd.DataFrame:
    """Earlier iterations' PASS_RATES rows (any old copy of this iteration's dropped) + this one's."""
    prev = (
        prev_pass_rates
        if prev_pass_rates is not None
        else pd.DataFrame(columns=schemas.PASS_RATES.names)
    )
    prev = prev[prev["iteration"] != iteration] if not prev.empty else prev
    all_rates = pd.concat(
        [prev, pd.DataFrame(rates, columns=schemas.PASS_RATES.names)], ignore_index=True
    )
    return all_rates.astype(
        {"iteration": int, "n_episodes": int, "n_passed": int, "pass_rate": float}
    )


def _failed_episodes(
    evals: pd.DataFrame, cfg: DiagnoseConfig, notes: list[str]
) -> list[dict[str, Any]]:
    """The failed episodes to summarise, at most cfg.max_summaries of them."""
    failed = [r for r in evals.to_dict("records") if not bool(r.get("passed"))]
    if len(failed) > cfg.max_summaries:
        notes.append(f"{len(failed)} failed episodes; summarised the first {cfg.max_summaries}")
        failed = failed[: cfg.max_summaries]
    if evals.empty:
        notes.append(
            "no eval episodes: pass rates and clusters are empty; guidance keeps the previous weights"
        )
    return failed


def _summaries_and_clusters(
    failed: list[dict[str, Any]],
    llm: LLMEndpoint | None,
    cfg: DiagnoseConfig,
    iteration: int,
    notes: list[str],
    map_rows: RowMapper,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """FAILURE_SUMMARIES rows (each with its cluster_id) and CLUSTERS rows."""
    summaries = _summaries(failed, llm, cfg, iteration, notes, map_rows) if failed else []
    embed = _embedder(cfg, notes) if summaries else feedback.hashed_bow_embedder()
    return feedback.cluster_summaries(
        summaries, embed, iteration, feedback.ClusterConfig(distance_threshold=cfg.cluster_distance)
    )


def _guidance_config(cfg: DiagnoseConfig, start_levels: tuple[int, int]) -> feedback.GuidanceConfig:
    return feedback.GuidanceConfig(
        weight_floor=cfg.weight_floor,
        mastery_threshold=cfg.mastery_threshold,
        min_episodes_for_mastery=cfg.min_episodes_for_mastery,
        start_multihop=start_levels[0],
        start_dirtiness=start_levels[1],
        patterns_per_capability=cfg.patterns_per_capability,
    )


def _write_outputs(
    out_dir: Path,
    iteration: int,
    all_rates: pd.DataFrame,
    summaries: list[dict[str, Any]],
    clusters: list[dict[str, Any]],
    guidance: dict[str, Any],
    notes: list[str],
) -> tuple[Path, Path, Path]:
    """Write the plot, report.md and guidance.json; returns (report, plot, guidance) paths."""
    plot_path = plot_pass_rates(all_rates, out_dir / PLOT_NAME)
    report = render_report(iteration, all_rates, summaries, clusters, guidance, PLOT_NAME, notes)
    report_path = out_dir / REPORT_NAME
    _write_text(report_path, report)
    guidance_path = out_dir / GUIDANCE_NAME
    _write_text(guidance_path, json.dumps(guidance, indent=2, sort_keys=True, allow_nan=False))
    return report_path, plot_path, guidance_path


def diagnose_stage(
    eval_trajectories: pd.DataFrame,
    prev_pass_rates: pd.DataFrame | None,
    cfg: DiagnoseConfig,
    llm: LLMEndpoint | None,
    out_dir: Path,
    iteration: int,
    *,
    prev_guidance: dict[str, Any] | None = None,
    capabilities: list[str] | None = None,
    map_rows: RowMapper | None = None,
    start_levels: tuple[int, int] = (0, 0),
) -> DiagnoseResult:
    """Diagnose one iteration's held-out episodes; writes report.md, pass_rates.png, guidance.json.

    `prev_guidance` carries the difficulty levels reached so far (guidance.json of iteration-1);
    `capabilities` (default: the catalog) keeps every capability in the weights, with eval data or not.
    `map_rows` runs the per-failure summaries (default: a pool of `cfg.workers` threads).
    `start_levels` (multihop, dirtiness): the difficulty assumed where no earlier guidance names a
    capability (the pipeline passes synthesize.multihop and .dirtiness, where synthesis starts).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    evals, infra = _eval_episodes(eval_trajectories, notes)
    rates = feedback.pass_rates(evals, iteration)
    all_rates = _pass_rate_history(prev_pass_rates, rates, iteration)

    failed = _failed_episodes(evals, cfg, notes)
    mapper = map_rows or thread_map(cfg.workers)
    summaries, clusters = _summaries_and_clusters(failed, llm, cfg, iteration, notes, mapper)
    caps = capabilities if capabilities is not None else _known_capabilities()
    guidance = feedback.compute_guidance(
        rates,
        clusters,
        prev_guidance,
        _guidance_config(cfg, start_levels),
        iteration,
        capabilities=caps,
    )

    report_path, plot_path, guidance_path = _write_outputs(
        out_dir, iteration, all_rates, summaries, clusters, guidance, notes
    )
    for n in notes:
        log.info("diagnose iteration %d: %s", iteration, n)
    return DiagnoseResult(
        summaries=summaries,
        clusters=clusters,
        pass_rates=rates,
        all_pass_rates=all_rates,
        guidance=guidance,
        report_path=report_path,
        plot_path=plot_path,
        guidance_path=guidance_path,
        notes=notes,
        summary={
            "eval_episodes": len(evals),
            "infra_excluded": infra,
            "failed": len(failed),
            "summaries": len(summaries),
            "fallback_summaries": sum(bool(s["fallback"]) for s in summaries),
            "clusters": len(clusters),
        },
    )


def _write_text(path: Path, text: str) -> None:
    """Atomic write (temp + rename): a killed run never leaves a half report that looks complete."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
