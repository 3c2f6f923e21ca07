"""examples/warmup (the tasks tasks/profiles/learning-cpu.yaml learns on) and examples/firststeps
(the ones `make run`'s profile, tasks/profiles/demo.yaml, learns on): each generator forges and
verify keeps it, so a learning run does not start from a set that verify would thin out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawloop.flows.cli import main
from clawloop.synthesis.synthesize import split_groups, user_families
from clawloop.tasks.config import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WARMUP = sorted((EXAMPLES / "warmup").glob("*.py"))
FIRSTSTEPS = sorted((EXAMPLES / "firststeps").glob("*.py"))


def test_six_groups_so_two_can_be_held_out():
    assert len(WARMUP) == 6


def test_firststeps_holds_out_groups_whose_capability_also_trains():
    """The demo profile's split (seed 0, eval_fraction 0.34): two groups held out, each a
    capability that a train group has too, in another domain."""
    demo = load_config("demo")
    paths = [str(EXAMPLES.parent / p) for p in demo.synthesize.generator_paths]
    families, problems = user_families(paths)
    assert not problems and len(families) == len(FIRSTSTEPS) == 6
    held = split_groups(families, demo.seed, demo.synthesize.eval_fraction)
    train = {(f.capability, f.domain) for f in families} - held
    assert len(held) == 2
    assert {cap for cap, _ in held} <= {cap for cap, _ in train}


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
@pytest.mark.parametrize("generator", WARMUP + FIRSTSTEPS, ids=lambda p: p.stem)
def test_a_warmup_generator_is_kept_by_verify(generator, tmp_path, capsys):
    out = tmp_path / "task"
    assert (
        main(["forge", str(generator), "--seed", "3", "--out", str(out), "--backend", "bwrap"]) == 0
    )
    capsys.readouterr()
    main(["verify", str(out), "--json", "--backend", "bwrap"])
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict["kept"], verdict["reason"]
