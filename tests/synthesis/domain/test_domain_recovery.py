"""Error-recovery paths are found by execution, not guessed: a call a rule refuses, a fix on a
record the refusal names, then the call accepted; tasks with such a path are kept."""

from __future__ import annotations

import json
import shutil

import pytest

from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.synthesis.domain.ground import Index, mentioned
from clawloop.synthesis.domain.load import builtin_domains, load_domain
from clawloop.synthesis.domain.state import load_tables
from clawloop.synthesis.domain.synth import synthesize_domain
from clawloop.synthesis.domain.taskgraph import Knobs


def _domain(name: str):
    (root,) = [r for r in builtin_domains() if r.name == name]
    return root, load_domain(root)


def test_a_refusal_is_about_the_records_it_names_or_was_passed() -> None:
    _, domain = _domain("seed_library")
    tables = load_tables(domain)
    ix = Index.of(tables, domain.keys)
    member = tables["members"][0]
    key = domain.keys.get("members") or next(iter(ix.unique["members"]))
    text = f"Error: member {member[key]} is on hold (loan overdue)"
    about = mentioned(ix, text, {})
    assert ("members", member) in about
    assert all(t != "members" or row is member for t, row in about)
    assert mentioned(ix, "Error: no such thing", {}) == []


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
@pytest.mark.parametrize("name", ["apiary_coop", "seed_library"])
def test_tasks_with_an_error_recovery_path_are_kept(name: str) -> None:
    root, _ = _domain(name)
    out = synthesize_domain(root, 8, 3, SandboxConfig(backend="bwrap"), Knobs(6, 2, True))
    kept = [g for g in out.graphs if g["kept"]]
    recovering = [g for g in kept if "error_recovery" in json.loads(g["features"])]
    assert recovering, [g["reason"] for g in out.graphs if not g["kept"]]
    for g in recovering:  # refused, then fixed, then accepted: the plan says so step by step
        expects = [st["expect"] for st in json.loads(g["plan"])]
        assert "error" in expects and expects[-1] == "ok"
