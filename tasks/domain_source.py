"""The synthesize stage's domain-grounded source: a share of the train candidates made from
executable domains (synthesis/domain), the built-in ones and `synthesize.domain_paths`
(`synthesize.domains` already names the built-in library's long-tail domains it keeps).

Each domain's reference plans run in the run's sandbox (checked once, like forge's), so a dead
engine fails the stage with what to do rather than yielding no domain tasks quietly. A domain
folder that breaks the contract fails the stage with the file and the problem.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.harness.sandbox.base import SandboxError
from clawloop.synthesis.domain.execute import ExecutionError
from clawloop.synthesis.domain.load import builtin_domains, load_domain
from clawloop.synthesis.domain.model import DomainError
from clawloop.synthesis.domain.synth import synthesize_domain
from clawloop.synthesis.domain.taskgraph import Knobs
from clawloop.synthesis.synthesize import SynthesizeConfig, failure_rate_weights, share_of
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.stage import StageContext, StageError

Row = dict[str, Any]


def domain_roots(s: SynthesizeConfig) -> list[Path]:
    roots = builtin_domains() if s.builtin_domains else []
    return roots + [Path(p).expanduser() for p in s.domain_paths]


def domains_digest(s: SynthesizeConfig) -> dict[str, str]:
    """Content hashes of every domain folder's files: editing a tool or the state re-synthesizes."""
    out: dict[str, str] = {}
    for root in domain_roots(s) if s.domain_share > 0 else []:
        h = hashlib.sha256()
        for f in sorted(p for p in root.rglob("*") if p.is_file()):
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
        out[str(root)] = h.hexdigest()
    return out


def _seed(run_seed: int, iteration: int, name: str) -> int:
    return int(hashlib.sha256(f"{run_seed}:{iteration}:{name}".encode()).hexdigest()[:8], 16)


def failure_weights(graphs: list[Row], trajectories: list[Row]) -> dict[str, dict[str, float]]:
    """domain -> skill -> 1 + the failure rate of the episodes on tasks whose reference plan
    called the skill."""
    uses = {
        g["task_id"]: {(g["domain"], st["skill"]) for st in json.loads(g["plan"])}
        for g in graphs
        if g["kept"] and g["task_id"] and g["plan"]
    }
    out: dict[str, dict[str, float]] = {}
    for (domain, skill), w in failure_rate_weights(uses, trajectories).items():
        out.setdefault(domain, {})[skill] = w
    return out


def _weights_before(ctx: StageContext) -> dict[str, dict[str, float]]:
    k = ctx.iteration - 1
    if k < 1 or ctx.manifest("rollout", k) is None:
        return {}
    graphs = ctx.rows("synthesize", "domain_graphs", k)
    return failure_weights(graphs, ctx.rows("rollout", "trajectories", k))


def add_domain_tasks(
    ctx: StageContext, rows: list[Row]
) -> tuple[list[Row], dict[str, Any], list[Row], list[Row]]:
    """(rows with `domain_share` of the train rows swapped for domain-grounded candidates,
    summary, abstract-graph rows, skill rows)."""
    s = ctx.config.synthesize
    train = [i for i, r in enumerate(rows) if r["split"] == "train" and r["origin"] == "builtin"]
    n = share_of(len(train), s.domain_share)
    roots = domain_roots(s)
    if n == 0 or not roots:
        why = "synthesize.domain_share is 0" if not s.domain_share else "no domains"
        return rows, {"domain_grounded": 0, "domain_note": why}, [], []
    sandbox = sandbox_for(ctx)
    w = s.llm  # a synthesis endpoint rewrites the instructions; without one they stay offline
    chat = (
        endpoint_chat(LLMEndpoint(w.base_url, w.model, w.api_key_env), max_tokens=800)
        if w
        else None
    )
    if chat is not None:
        chat.model = w.model  # type: ignore[attr-defined]  # the analysis cache key's model
    cache = Path(s.cache_dir).expanduser() / "domain-analysis"
    knobs = Knobs(s.domain_max_nodes, s.domain_subgoals, s.domain_error_recovery)
    asks = [n // len(roots) + (i < n % len(roots)) for i in range(len(roots))]
    shift = (ctx.iteration - 1) % len(roots)  # iterations take turns at the remainder
    asks = asks[-shift:] + asks[:-shift] if shift else asks
    weights = _weights_before(ctx)
    made, graphs, skills, per_domain = [], [], [], {}
    for root, k in zip(roots, asks, strict=True):
        if k == 0:
            continue
        try:
            seed = _seed(ctx.config.seed, ctx.iteration, root.name)
            out = synthesize_domain(root, k, seed, sandbox, knobs, chat,
                                    skill_weights=weights.get(load_domain(root).name),
                                    analysis_cache=cache)  # fmt: skip
        except DomainError as exc:
            raise StageError(f"synthesize: executable domain {root}: {exc}") from exc
        except (SandboxError, ExecutionError) as exc:
            raise StageError(f"synthesize: reference runs for domain {root} failed: {exc}") from exc
        made += out.candidates
        graphs += out.graphs
        skills += [{"domain": out.domain, "skill": sk.name, "tools": list(sk.tools)}
                   for sk in out.skills]  # fmt: skip
        per_domain[out.domain] = out.summary()
        if weights.get(out.domain):
            per_domain[out.domain]["skill_weights"] = weights[out.domain]
    out_rows = list(rows)
    for i, cand in zip(reversed(train), made, strict=False):
        out_rows[i] = cand
    summary = {
        "domain_grounded": len(made),
        "domain_asked": n,
        "domain_share": round(len(made) / max(1, len(train)), 3),
        "domains": per_domain,
    }
    return out_rows, summary, graphs, skills
