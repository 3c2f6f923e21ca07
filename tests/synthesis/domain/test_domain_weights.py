"""Diagnosis weights skills by failure rate: the loop turns the previous rollout into per-skill
weights (1 + failure rate), and domain synthesis makes the graphs that call heavy skills first."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.synthesis.domain.load import builtin_domains
from clawloop.synthesis.domain.synth import synthesize_domain
from clawloop.synthesis.domain.weights import failure_weights


def test_failure_rates_per_domain_skill_ignore_infrastructure_ends() -> None:
    plan = json.dumps([{"skill": "hives"}, {"skill": "buyers"}, {"skill": "hives"}])
    graphs = [
        {"task_id": "t1", "domain": "apiary", "kept": True, "plan": plan},
        {"task_id": "", "domain": "apiary", "kept": False, "plan": ""},
    ]
    trajs = [
        {"task_id": "t1", "passed": False, "end_reason": "finished"},
        {"task_id": "t1", "passed": False, "end_reason": "max_turns"},
        {"task_id": "t1", "passed": True, "end_reason": "finished"},
        {"task_id": "t1", "passed": False, "end_reason": "sandbox_error"},
        {"task_id": "other", "passed": False, "end_reason": "finished"},
    ]
    want = {"apiary": {"buyers": pytest.approx(1 + 2 / 3), "hives": pytest.approx(1 + 2 / 3)}}
    assert failure_weights(graphs, trajs) == want


def _skills_used(out) -> Counter:
    used: Counter = Counter()
    for g in out.graphs:
        if g["kept"]:
            used.update({st["skill"] for st in json.loads(g["plan"])})
    return used


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_failed_skill_is_in_more_of_the_next_tasks() -> None:
    (root,) = [r for r in builtin_domains() if r.name == "apiary_coop"]
    box = SandboxConfig(backend="bwrap")
    plain = _skills_used(synthesize_domain(root, 2, 1, box))
    weighted = _skills_used(synthesize_domain(root, 2, 1, box, skill_weights={"hives": 2.0}))
    assert weighted["hives"] > plain["hives"]
