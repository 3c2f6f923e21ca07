"""engine.run_iteration: stages in order, force passed per stage, stop at the first failure."""

from __future__ import annotations

from clawloop.tasks import engine
from clawloop.tasks.stage import StageSpec


def test_run_iteration_forces_named_stages_and_stops_at_a_failure():
    specs = [StageSpec(n, lambda ctx: None, lambda c, k: {}) for n in ("a", "b", "c")]
    calls = []

    def runner(spec, k, force):
        calls.append((spec.name, k, force))
        return engine.StageOutcome(spec.name, k, "failed" if spec.name == "b" else "ran", "")

    out = engine.run_iteration(specs, 2, {"b"}, runner)
    assert calls == [("a", 2, False), ("b", 2, True)]
    assert [o.stage for o in out] == ["a", "b"] and not engine.iteration_ok(out)
    assert (
        "`force`" in engine.run_iteration.__doc__
        and "stop at the first" in engine.run_iteration.__doc__
    )
