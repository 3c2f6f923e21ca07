"""How the SkillSynth source shares its train candidates out (pure): which skills it draws more
of (the ones the policy failed), each path's seed, the graph cache's key, a path's row and where
its candidates go among the candidates so far. The stage wiring is tasks/skill_source.py."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

from clawloop.synthesis.skillgraph.graph import GRAPH_VERSION, GraphConfig
from clawloop.synthesis.skillgraph.instantiate import PATH_KEY, Instantiated
from clawloop.synthesis.skillgraph.model import SkillPath
from clawloop.synthesis.synthesize import failure_rate_weights, share_of

Row = dict[str, Any]


def failure_weights(candidates: list[Row], trajectories: list[Row]) -> dict[str, float]:
    """Skill -> 1 + the failure rate of the episodes on tasks whose path used it."""
    uses = {
        r["task_id"]: [st["skill"] for st in json.loads(r[PATH_KEY])["steps"]]
        for r in candidates
        if r.get(PATH_KEY)
    }
    return failure_rate_weights(uses, trajectories)


def path_seed(run_seed: int, iteration: int, path_id: str) -> int:
    return int(hashlib.sha256(f"{run_seed}:{iteration}:{path_id}".encode()).hexdigest()[:8], 16)


def graph_key(corpus_sha: str, scenarios_by: str) -> str:
    """The graph cache key: the corpus, who inferred the scenarios, the graph code's version."""
    config = json.dumps(asdict(GraphConfig()), sort_keys=True)
    text = f"{GRAPH_VERSION}\0{corpus_sha}\0{scenarios_by}\0{config}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def path_row(path: SkillPath, res: Instantiated) -> Row:
    last = res.attempts[-1] if res.attempts else {}
    return {
        "path_id": path.path_id,
        "steps": json.dumps([asdict(s) for s in path.steps], ensure_ascii=False, sort_keys=True),
        "length": len(path.steps),
        "kept": res.kept,
        "task_id": str((res.candidate or {}).get("task_id", "")),
        "attempts": sum(a["stage"] != "plan" for a in res.attempts),
        "reason": res.fault or str(last.get("reason", "")),
    }


def skill_slots(rows: list[Row]) -> tuple[int, list[int]]:
    """(train candidates, indexes of the built-in ones): the share is of all train candidates,
    the slots SkillSynth tasks may take are the built-in ones."""
    train = [i for i, r in enumerate(rows) if r["split"] == "train"]
    return len(train), [i for i in train if rows[i]["origin"] == "builtin"]


def skill_asks(n_train: int, n_slots: int, share: float) -> int:
    """How many SkillSynth tasks to make: the share of the train candidates, at most the slots."""
    return min(n_slots, share_of(n_train, share))


def place_skill_tasks(rows: list[Row], made: list[Row]) -> list[Row]:
    """`rows` with the first built-in train candidates swapped for the SkillSynth tasks `made`."""
    out = list(rows)
    for i, cand in zip(skill_slots(rows)[1], made, strict=False):
        out[i] = cand
    return out
