"""Domain-grounded synthesis on the built-in domains: grounded plans run in the sandbox, the
tasks they make forge and pass verify (oracle = replaying the reference, no-op and state probes
fail), and the instruction names no tool and states no derived value."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from clawloop.generators.forge import forge_candidate
from clawloop.generators.verify import verify_task
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.packing import unpack_tar
from clawloop.synthesis.domain.ground import Grounded, Step, coverage_problems, ground
from clawloop.synthesis.domain.load import builtin_domains, load_domain
from clawloop.synthesis.domain.skills import cluster_skills
from clawloop.synthesis.domain.state import load_tables
from clawloop.synthesis.domain.synth import synthesize_domain
from clawloop.synthesis.domain.taskgraph import Knobs, TaskGraph, features_of, sample_task_graph

DOMAINS = {p.name: p for p in builtin_domains()}


def test_sampled_graphs_have_the_features_they_aim_for():
    rng = random.Random(0)
    seen: set[str] = set()
    for _ in range(40):
        g = sample_task_graph(rng, Knobs(subgoals=2))
        assert set(g.wanted) <= features_of(g) | {"long_range"}  # long range needs >= 3 hops
        seen |= features_of(g)
        assert TaskGraph.from_dict(g.to_dict()) == g
    assert {"branching", "convergence", "error_recovery", "subgoals", "long_range"} <= seen


def test_grounded_plans_pass_the_coverage_check_and_a_foreign_step_does_not():
    domain = load_domain(DOMAINS["apiary_coop"])
    skills = cluster_skills(domain)
    graph = sample_task_graph(random.Random(3), Knobs())
    variants, _ = ground(domain, graph, load_tables(domain), random.Random(3))
    assert variants and all(not coverage_problems(v, domain, skills) for v in variants)
    v = variants[0]
    producer = v.steps[0].tool
    bad = Grounded(
        graph, [Step(producer, {}), Step(v.steps[-1].tool, {"x": {"$ref": [0, "nope"]}})]
    )
    assert coverage_problems(bad, domain, skills)


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_domain_tasks_forge_and_pass_verify(name, tmp_path):
    sandbox = SandboxConfig()
    made = synthesize_domain(DOMAINS[name], 1, 7, sandbox)
    assert made.candidates, [g["reason"] for g in made.graphs]
    assert all(g["reason"] for g in made.dropped)  # every drop says why
    cand = made.candidates[0]
    assert cand["output_format"] == "state" and cand["origin"] == f"domain:{name}"
    forged = forge_candidate(cand, sandbox)
    assert forged["status"] == "ok", forged["error"]
    checks, verdict = verify_task(forged, sandbox)
    assert verdict["kept"], verdict["reason"]
    names = {c["check"] for c in checks}
    assert {"oracle", "noop", "leak", "trivial:state_delete_all"} <= names
    domain = load_domain(DOMAINS[name])
    task_dir = unpack_tar(forged["task_tar"], tmp_path / "task")
    instruction = (task_dir / "instruction.md").read_text()
    assert not [t.name for t in domain.tools if t.name in instruction]


@pytest.mark.slow
def test_the_cli_writes_verifiable_folders(tmp_path):
    out = tmp_path / "tasks"
    res = subprocess.run(
        [sys.executable, "-m", "clawloop.flows.cli", "domain", "synth", str(DOMAINS["seed_library"]),
         "--n", "2", "--seed", "3", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["kept"] >= 1 and report["features"]
    for folder in out.iterdir():
        ok = subprocess.run(
            [sys.executable, "-m", "clawloop.flows.cli", "verify", str(folder)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert ok.returncode == 0, ok.stdout + ok.stderr
