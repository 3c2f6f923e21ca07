"""The whole loop, plain engine, tiny settings: every stage runs in two iterations, iteration 2's
synthesize is steered by iteration 1's guidance, and a second run skips everything.
Slow: serves the tiny offline model on CPU for rollout and diagnose."""

from __future__ import annotations

import json
import shutil

import pytest

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.storage import artifacts
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper

pytestmark = pytest.mark.slow

GENERATOR = '''"""Sum log entries per {domain} site."""
GENERATOR = {{"capability": "{cap}", "domain": "{domain}", "multihop": 0, "dirtiness": 0, "output_format": "json"}}
import json, os, random

def build(seed):
    rng = random.Random(seed)
    rows = [{{"site": rng.choice("ABCD"), "qty": rng.randint(1, 9)}} for _ in range(20)]
    total = {{}}
    for r in rows:
        total[r["site"]] = total.get(r["site"], 0) + r["qty"]
    return {{"instruction": "Sum qty per site in log.json; write output/totals.json mapping site to total.",
            "files": {{"log.json": json.dumps(rows)}},
            "answer": {{"output/totals.json": total}},
            "contract": {{"outputs": [{{"path": "output/totals.json", "format": "json", "schema": {{"type": "object"}}}}],
                         "tolerance": {{"abs": 0, "rel": 0}}, "decisions": ["Sum every row"]}}}}

def solve(workspace):
    rows = json.load(open(os.path.join(workspace, "log.json")))
    total = {{}}
    for r in rows:
        total[r["site"]] = total.get(r["site"], 0) + r["qty"]
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    json.dump(total, open(os.path.join(workspace, "output/totals.json"), "w"))
'''


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_two_iterations_of_every_stage_then_fully_cached(tmp_path):
    gens = tmp_path / "gens"
    gens.mkdir()
    for cap, dom in [("tally", "apiary"), ("tally", "orchard"), ("audit", "marina")]:
        (gens / f"{cap}_{dom}.py").write_text(GENERATOR.format(cap=cap, domain=dom))
    cfg = parse_config(
        {
            "iterations": 2,
            "storage": {"root": str(tmp_path / "runs")},
            "sandbox": {"backend": "bwrap"},
            "synthesize": {
                "builtin": False,
                "generator_paths": [str(gens)],
                "n_train": 2,
                "n_eval": 1,
                "eval_fraction": 0.34,
                "multihop": 1,  # user generators fix their own level; guidance starts here
            },
            "rollout": {"n": 1, "band": [0, 1], "max_turns": 1, "max_tokens": 8},
            "train": {"phases": "sft"},  # groups of one: GRPO is refused at load
            "diagnose": {"embedder": "hashed"},
        }
    )
    stages = STAGES
    names = [s.name for s in stages]
    first = runs.run_loop(cfg, "e2e", stages, thread_mapper(False))
    assert first.ok, [(o.stage, o.status, o.error[:500]) for o in first.outcomes]
    assert [(o.iteration, o.stage) for o in first.outcomes] == [
        (k, n) for k in (1, 2) for n in names
    ]
    if "diagnose" in names:
        synth2 = next(o for o in first.outcomes if o.iteration == 2 and o.stage == "synthesize")
        assert synth2.manifest.summary["guided"] is True
        assert any(k.startswith("iter-1/diagnose") for k in synth2.manifest.upstream)
        guidance = json.loads((tmp_path / "runs/e2e/iter-1/diagnose/guidance.json").read_text())
        candidates = artifacts.read_rows(str(tmp_path / "runs/e2e/iter-1/synthesize"), "candidates")
        synthesized = {r["capability"] for r in candidates}
        assert synthesized <= set(guidance["capability_weights"])  # user capabilities weighed
        assert all(d["multihop"] >= 1 for d in guidance["difficulty"].values())
    again = runs.run_loop(cfg, "e2e", stages, thread_mapper(False))
    assert {o.status for o in again.outcomes} == {"skipped"}
