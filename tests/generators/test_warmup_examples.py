"""examples/warmup (the tasks tasks/profiles/learning-cpu.yaml learns on): each generator forges and
verify keeps it, so the CPU learning run does not start from a set that verify would thin out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawloop.flows.cli import main

WARMUP = sorted((Path(__file__).resolve().parents[2] / "examples" / "warmup").glob("*.py"))


def test_six_groups_so_two_can_be_held_out():
    assert len(WARMUP) == 6


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
@pytest.mark.parametrize("generator", WARMUP, ids=lambda p: p.stem)
def test_a_warmup_generator_is_kept_by_verify(generator, tmp_path, capsys):
    out = tmp_path / "task"
    assert (
        main(["forge", str(generator), "--seed", "3", "--out", str(out), "--backend", "bwrap"]) == 0
    )
    capsys.readouterr()
    main(["verify", str(out), "--json", "--backend", "bwrap"])
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict["kept"], verdict["reason"]
