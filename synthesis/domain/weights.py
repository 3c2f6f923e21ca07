"""How the domain-grounded source shares its train candidates out (pure): which skills it draws
more of (the ones the policy failed), each domain's seed and share of the asks, and where its
candidates go among the candidates so far. The stage wiring is tasks/domain_source.py."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from clawloop.synthesis.synthesize import failure_rate_weights

Row = dict[str, Any]


def domain_seed(run_seed: int, iteration: int, name: str) -> int:
    """A domain's synthesis seed, fixed by (run seed, iteration, domain folder name)."""
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


def domain_asks(n: int, n_domains: int, iteration: int) -> list[int]:
    """How many of `n` candidates each of `n_domains` domains makes: an even share, the remainder
    to the first ones, shifted each iteration so the domains take turns at it."""
    asks = [n // n_domains + (i < n % n_domains) for i in range(n_domains)]
    shift = (iteration - 1) % n_domains
    return asks[-shift:] + asks[:-shift] if shift else asks


def builtin_train(rows: list[Row]) -> list[int]:
    """Indexes of the built-in library's train candidates: the slots domain tasks may take."""
    return [i for i, r in enumerate(rows) if r["split"] == "train" and r["origin"] == "builtin"]


def place_domain_tasks(rows: list[Row], made: list[Row]) -> list[Row]:
    """`rows` with the last built-in train candidates swapped for the domain tasks `made`."""
    out = list(rows)
    for i, cand in zip(reversed(builtin_train(rows)), made, strict=False):
        out[i] = cand
    return out
