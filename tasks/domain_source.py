"""The synthesize stage's domain-grounded source (tasks/source.py): a share of the train
candidates made from executable domains (synthesis/domain), the built-in ones and `synthesize.domain.paths`
(`synthesize.domains` already names the built-in library's long-tail domains it keeps).

Each domain's reference plans run in the run's sandbox (checked once, like forge's), so a dead
engine fails the stage with what to do rather than yielding no domain tasks quietly. A domain
folder that breaks the contract fails the stage with the file and the problem. How it shares the
candidates out (weights, seeds, slots) is synthesis/domain/weights.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.harness.sandbox.base import SandboxError
from clawloop.storage import schemas
from clawloop.synthesis.config import SynthesizeConfig
from clawloop.synthesis.domain.execute import ExecutionError
from clawloop.synthesis.domain.load import builtin_domains, load_domain
from clawloop.synthesis.domain.model import DomainError
from clawloop.synthesis.domain.synth import synthesize_domain
from clawloop.synthesis.domain.taskgraph import Knobs
from clawloop.synthesis.domain.weights import (
    builtin_train,
    domain_asks,
    domain_seed,
    failure_weights,
    place_domain_tasks,
)
from clawloop.synthesis.synthesize import share_of
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.source import Product, Source
from clawloop.tasks.stage import StageContext, StageError

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

Row = dict[str, Any]


def domain_roots(s: SynthesizeConfig) -> list[Path]:
    roots = builtin_domains() if s.domain.builtin else []
    return roots + [Path(p).expanduser() for p in s.domain.paths]


def domains_digest(s: SynthesizeConfig) -> dict[str, str]:
    """Content hashes of every domain folder's files: editing a tool or the state re-synthesizes."""
    out: dict[str, str] = {}
    for root in domain_roots(s) if s.domain.share > 0 else []:
        h = hashlib.sha256()
        for f in sorted(p for p in root.rglob("*") if p.is_file()):
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
        out[str(root)] = h.hexdigest()
    return out


def _weights_before(ctx: StageContext) -> dict[str, dict[str, float]]:
    k = ctx.iteration - 1
    if k < 1 or ctx.manifest("rollout", k) is None:
        return {}
    graphs = ctx.rows("synthesize", "domain_graphs", k)
    return failure_weights(graphs, ctx.rows("rollout", "trajectories", k))


TABLES = {"domain_graphs": schemas.DOMAIN_GRAPHS, "domain_skills": schemas.DOMAIN_SKILLS}


def enabled(cfg: RunConfig) -> bool:
    s = cfg.synthesize
    return s.domain.share > 0 and bool(domain_roots(s))


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    s = cfg.synthesize
    return {
        "seed": cfg.seed,
        "iteration": iteration,
        "domain": s.domain.model_dump(mode="json"),
        # a synthesis endpoint rewrites the instructions (the policy's never does)
        "writer_endpoint": s.writer.endpoint.model_dump(mode="json") if s.writer.endpoint else None,
        "cache_dir": s.cache_dir,
        "domains": domains_digest(s),
    }


def _none(why: str) -> Product:
    return Product([], {"domain_grounded": 0, "domain_note": why}, dict.fromkeys(TABLES, []))


def off(cfg: RunConfig) -> Product:
    return _none(
        "synthesize.domain.share is 0" if not cfg.synthesize.domain.share else "no domains"
    )


def ask(cfg: RunConfig, iteration: int, rows: list[Row]) -> int:
    """How many built-in train candidates there are: the share is of them, and they make way."""
    return len(builtin_train(rows))


def make(ctx: StageContext, n_train: int) -> Product:
    """`synthesize.domain.share` of the built-in train candidates' worth of domain-grounded candidates, the
    abstract-graph rows and the skill rows."""
    s = ctx.config.synthesize
    n = share_of(n_train, s.domain.share)
    roots = domain_roots(s)
    if n == 0 or not roots:
        return off(ctx.config)
    sandbox = sandbox_for(ctx)
    w = (
        s.writer.endpoint
    )  # a synthesis endpoint rewrites the instructions; without one they stay offline
    chat = (
        endpoint_chat(LLMEndpoint(w.base_url, w.model, w.api_key_env), max_tokens=800)
        if w
        else None
    )
    if chat is not None:
        chat.model = w.model  # type: ignore[attr-defined]  # the analysis cache key's model
    cache = Path(s.cache_dir).expanduser() / "domain-analysis"
    knobs = Knobs(s.domain.max_nodes, s.domain.subgoals, s.domain.error_recovery)
    asks = domain_asks(n, len(roots), ctx.iteration)
    weights = _weights_before(ctx)
    made, graphs, skills, per_domain = [], [], [], {}
    for root, k in zip(roots, asks, strict=True):
        if k == 0:
            continue
        try:
            seed = domain_seed(ctx.config.seed, ctx.iteration, root.name)
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
    summary = {
        "domain_grounded": len(made),
        "domain_asked": n,
        "domain_share": round(len(made) / max(1, n_train), 3),
        "domains": per_domain,
    }
    return Product(made, summary, {"domain_graphs": graphs, "domain_skills": skills})


SOURCE = Source(
    "domain",
    __name__,
    enabled=enabled,
    config_slice=config_slice,
    make=make,
    place=lambda rows, product: place_domain_tasks(rows, product.candidates),
    off=off,
    ask=ask,
    previous=("synthesize", "rollout"),  # the skills whose tasks the policy failed
    tables=TABLES,
)
