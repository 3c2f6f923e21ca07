"""`domain synth --n N` keeps N tasks when some are dropped after they were made (issue 24, item
4): a task the structure check or `accept` (the CLI's forge + verify) refuses is replaced, first
by graphs already run but not yet needed, then by fresh rounds, up to 3 x N tasks made; fewer
than N come back only with the reason said. On the built-in apiary domain, in the sandbox."""

from __future__ import annotations

import json

import pytest
from _sabotage import DOMAINS

from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.synthesis.domain.synth import ATTEMPTS, synthesize_domain

SANDBOX = SandboxConfig(backend="auto")


@pytest.mark.slow
def test_tasks_refused_after_they_were_made_are_replaced_deterministically():
    def refuse_first_two():
        seen: list[str] = []

        def accept(cand):
            seen.append(cand["task_id"])
            return len(seen) > 2, "verify: refused by the test"

        return accept, seen

    accept, seen = refuse_first_two()
    out = synthesize_domain(DOMAINS["apiary_coop"], 2, 0, SANDBOX, accept=accept)
    assert len(out.candidates) == 2 and out.attempts == 4 and not out.short
    assert [c["task_id"] for c in out.candidates] == seen[2:]
    assert len(out.structure) == 2  # the refused tasks' measurements are gone with them
    refused = [g for g in out.graphs if g["reason"] == "verify: refused by the test"]
    assert [g["kept"] for g in refused] == [False, False]
    again, seen_again = refuse_first_two()
    assert synthesize_domain(DOMAINS["apiary_coop"], 2, 0, SANDBOX, accept=again).candidates
    assert seen_again == seen  # the same seed makes and replaces the same tasks


@pytest.mark.slow
def test_fewer_than_asked_only_with_the_reason_said():
    out = synthesize_domain(DOMAINS["apiary_coop"], 1, 0, SANDBOX,
                            accept=lambda cand: (False, "verify: refused by the test"))  # fmt: skip
    assert out.candidates == [] and out.attempts == ATTEMPTS
    assert out.short.startswith(
        f"0 of 1 kept: attempts ran out ({ATTEMPTS} made, at most {ATTEMPTS} x 1); "
        f"dropped after they were made: verify {ATTEMPTS}; "
    ), out.short
    wanted = {f for g in out.graphs if g["reason"].startswith("verify")
              for f in json.loads(g["wanted"])}  # fmt: skip
    for f in wanted:  # per feature: how many graphs wanted it and why they went
        assert f"no {f} task kept: " in out.short and "refused by the test" in out.short
    assert out.summary()["short"] == out.short
