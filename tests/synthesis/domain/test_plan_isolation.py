"""Reference plans at scale (runtime.py, execute.py): a plan's final state comes back as a delta
against the initial one, never whole; each plan runs in its own process bounded in memory and
time, so one that runs out is dropped with the reason while the others keep their results; a
missing result line is a failed plan, not a failed call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawloop.harness.sandbox.base import Limits, SandboxConfig
from clawloop.synthesis.domain import execute, runtime
from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.skills import cluster_skills
from clawloop.synthesis.domain.workspace import workspace_files

BASE = {
    "orders": [{"_key": f"o{i}", "qty": i, "status": "open"} for i in range(6)],
    "users": [{"id": "u1"}, {"id": "u2"}],
}


def _changed(table, i, **kw):
    return [dict(r, **kw) if j == i else r for j, r in enumerate(table)]


@pytest.mark.parametrize(
    "final",
    [
        dict(BASE),  # nothing changed
        {**BASE, "orders": _changed(BASE["orders"], 3, status="cancelled")},  # one in place
        {**BASE, "orders": _changed(BASE["orders"], 0, qty=99)},  # the first
        {**BASE, "orders": BASE["orders"] + [{"_key": "new", "qty": 1, "status": "open"}]},
        {**BASE, "orders": BASE["orders"][:2] + BASE["orders"][3:]},  # one removed
        {**BASE, "orders": BASE["orders"][::-1]},  # reordered
        {"orders": BASE["orders"]},  # a table gone
        {**BASE, "extra": [{"x": 1}]},  # a table added
    ],
)
def test_a_delta_rebuilds_the_final_state_exactly(final):
    d = json.loads(json.dumps(runtime.delta(BASE, final)))  # it travels as JSON
    assert runtime.apply_delta(BASE, d) == final


def test_a_delta_is_the_size_of_the_change_not_of_the_state():
    big = {"t": [{"_key": str(i), "v": "x" * 200} for i in range(5000)]}
    final = {"t": _changed(big["t"], 2500, v="changed")}
    d = runtime.delta(big, final)
    assert d["t"] == [[0, 2500], {"r": final["t"][2500]}, [2501, 5000]]
    assert len(json.dumps(d)) < 300 < len(json.dumps(final)) // 1000


TOOLS = '''
def set_qty(state, code: str, qty: int) -> dict:
    """Set an order's quantity."""
    for o in state["orders"]:
        if o["code"] == code:
            o["qty"] = qty
            return {"code": code, "qty": qty}
    return "Error: no order " + code


def spin(state, n: int) -> str:
    """Loop n times (forever, in practice)."""
    i = 0
    while i < n:
        i += 1
    return str(i + len(state["orders"]))


def hog(state, mb: int) -> str:
    """Hold mb megabytes."""
    block = bytearray(mb * 1024 * 1024)
    return str(len(block) + len(state["orders"]))
'''


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "dom"
    (root / "tools").mkdir(parents=True)
    (root / "state").mkdir()
    (root / "domain.toml").write_text(
        '[domain]\nname = "shop"\n\n[state]\nformat = "json"\npath = "state"\n'
    )
    orders = [{"code": f"A{i}", "qty": i} for i in range(4)]
    (root / "state" / "orders.json").write_text(json.dumps(orders))
    (root / "tools" / "shop.py").write_text(TOOLS)
    domain = load_domain(root)
    return workspace_files(domain, cluster_skills(domain))


def _write(files: dict[str, str], where: Path) -> Path:
    for rel, text in files.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text)
    return where


def _plan(tool, expect="ok", **params):
    return {"steps": [{"tool": tool, "params": params, "expect": expect}]}


def test_a_plan_over_its_memory_is_dropped_with_the_reason_and_the_others_run(workspace, tmp_path):
    # Runs the runtime's own plan runner in this process (the tools are this test's own code):
    # one bounded process per plan, so the hog's 2 GiB fails that plan alone.
    ws = _write(workspace, tmp_path / "ws")
    plans = [_plan("set_qty", code="A1", qty=7), _plan("hog", mb=2048), _plan("hog", mb=1)]
    (tmp_path / "plans.json").write_text(json.dumps({"plans": plans, "memory_mb": 64}))
    runtime.run_plans(str(tmp_path / "plans.json"), str(tmp_path / "out.jsonl"), root=str(ws))
    initial = execute.initial_state(workspace)
    runs = execute.parse_results((tmp_path / "out.jsonl").read_text(), 3, initial, "none")
    assert runs[0].ok and [r["qty"] for r in runs[0].final["orders"]] == [0, 7, 2, 3]
    assert not runs[1].ok and "memory" in runs[1].why and "64 MiB" in runs[1].why
    assert runs[2].ok and runs[2].final == initial  # after the hog, a plan still runs
    assert all(0 < r.peak_mb < 64 + 2048 for r in runs)  # each plan's own peak, measured
    # the snapshot on disk is never changed by a plan
    assert json.loads((ws / "state" / "orders.json").read_text())[1]["qty"] == 1


def test_a_plan_over_its_time_is_killed_and_named(workspace, tmp_path):
    ws = _write(workspace, tmp_path / "ws")
    plans = [_plan("spin", n=10**12), _plan("set_qty", code="A0", qty=3)]
    (tmp_path / "plans.json").write_text(json.dumps({"plans": plans, "seconds": 1}))
    runtime.run_plans(str(tmp_path / "plans.json"), str(tmp_path / "out.jsonl"), root=str(ws))
    initial = execute.initial_state(workspace)
    runs = execute.parse_results((tmp_path / "out.jsonl").read_text(), 2, initial, "none")
    assert not runs[0].ok and "killed by SIG" in runs[0].why and "1 s" in runs[0].why
    assert runs[1].ok


def test_a_missing_or_unreadable_line_fails_that_plan_only():
    initial = {"t": [{"a": 1}]}
    text = (
        json.dumps({"plan": 0, "ok": True, "trace": [], "final": {"t": "same"}})
        + '\n{"plan": 1, "ok"'
    )
    runs = execute.parse_results(text, 3, initial, "the executor stopped")
    assert runs[0].ok and runs[0].final == initial
    assert [r.ok for r in runs[1:]] == [False, False]
    assert runs[2].why == "the executor stopped"


def test_plan_memory_is_stated_and_fits_the_sandbox():
    assert execute.plan_memory_mb(SandboxConfig()) == runtime.PLAN_MEMORY_MB
    small = SandboxConfig(limits=Limits(memory_mb=512))
    assert execute.plan_memory_mb(small) == 256


def test_through_the_sandbox_the_initial_state_is_the_hosts_and_a_failure_is_one_plan(workspace):
    plans = [_plan("set_qty", code="A2", qty=5), _plan("set_qty", code="ZZ", qty=1)]
    initial, runs = execute.run_plans(workspace, plans, SandboxConfig())
    assert initial == {"orders": [{"code": f"A{i}", "qty": i} for i in range(4)]}
    assert runs[0].ok and runs[0].final["orders"][2] == {"code": "A2", "qty": 5}
    assert not runs[1].ok and "no order ZZ" in runs[1].why


@pytest.mark.slow
def test_the_code_built_airline_domain_yields_tasks_through_several_write_tools(tmp_path):
    # benchmarks/domain_scale.py runs the full size (6 MB, --n 6); this is the same path small
    import importlib.util

    from clawloop.synthesis.domain.synth import synthesize_domain

    path = Path(__file__).parents[3] / "benchmarks" / "airline_domain.py"
    spec = importlib.util.spec_from_file_location("airline_domain", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = mod.build(tmp_path / "airline", 60, 40, 300)
    made = synthesize_domain(root, 4, 1, SandboxConfig())
    assert len(made.candidates) >= 3, [g["reason"] for g in made.dropped]
    domain = load_domain(root)
    writes = {t.name for t in domain.tools if t.writes}
    used = {s["tool"] for g in made.graphs if g["kept"] for s in json.loads(g["plan"])}
    assert len(used & writes) >= 2, used
