"""The built-in domains' tools run (in a sandbox, like all domain code) and enforce their policy:
each error-recovery path errors first, a second tool fixes the precondition, the retry succeeds;
the same calls give the same results and the same state (deterministic: no clock, no random)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.synthesis.domain.load import builtin_domains, load_domain
from clawloop.synthesis.domain.state import load_tables

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")

# Runs inside the sandbox: the runtime semantics the skill CLIs use (json: tables mutated in place,
# kept only when the call succeeded; sqlite: commit after success, roll back after an error).
DRIVER = r"""
import copy, importlib, json, os, sqlite3, sys
root, spec = sys.argv[1], json.load(open(sys.argv[2]))
sys.path.insert(0, os.path.join(root, "tools"))
if spec["format"] == "sqlite":
    disk = sqlite3.connect(os.path.join(root, spec["path"]))
    state = sqlite3.connect(":memory:")
    disk.backup(state)
else:
    folder = os.path.join(root, spec["path"])
    state = {f[:-5]: json.load(open(os.path.join(folder, f))) for f in sorted(os.listdir(folder))}
out = []
for call in spec["calls"]:
    tool = spec["tools"][call["tool"]]
    mod = importlib.import_module(tool["file"][len("tools/"):-3])
    fn = getattr(mod, tool["symbol"])
    fn = fn.invoke if tool["shape"] == "class" else fn
    before = None if spec["format"] == "sqlite" else copy.deepcopy(state)
    try:
        result = fn(state, **call["args"])
    except Exception as exc:
        result = "Error: raised " + repr(exc)
    if isinstance(result, str) and result.startswith("Error"):
        if spec["format"] == "sqlite":
            state.rollback()
        else:
            state = before
    elif spec["format"] == "sqlite":
        state.commit()
    out.append(json.loads(result) if isinstance(result, str) and result[:1] in "[{" else result)
final = (
    {t: [list(r) for r in state.execute(f"SELECT * FROM {t} ORDER BY rowid")]
     for (t,) in state.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")}
    if spec["format"] == "sqlite" else state
)
print(json.dumps({"results": out, "final": final}))
"""


def _run(root: Path, calls: list[dict], tmp_path: Path) -> dict:
    from clawloop.harness.sandbox.backend import open_sandbox

    d = load_domain(root)
    spec = {
        "format": d.state_format,
        "path": d.state_path,
        "calls": calls,
        "tools": {t.name: {"file": t.file, "symbol": t.symbol, "shape": t.shape} for t in d.tools},
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "driver.py").write_text(DRIVER)
    with open_sandbox(SandboxConfig(backend="bwrap")) as sb:
        sb.upload(root, "/workspace/domain")
        sb.upload(tmp_path / "spec.json", "/workspace/spec.json")
        sb.upload(tmp_path / "driver.py", "/workspace/driver.py")
        r = sb.exec(["python3", "-I", "driver.py", "domain", "spec.json"], timeout=60)
    assert r.ok, r.stderr[-2000:]
    return json.loads(r.stdout)


def _ok(result) -> bool:
    return not (isinstance(result, str) and result.startswith("Error"))


def _root(name: str) -> Path:
    return next(p for p in builtin_domains() if p.name == name)


def test_apiary_recovery_paths(tmp_path):
    root = _root("apiary_coop")
    tables = load_tables(load_domain(root))
    held = next(b for b in tables["buyers"] if b["on_hold"])
    batch = max(
        (b for b in tables["harvests"] if b["status"] == "released"),
        key=lambda b: b["kg_available"],
    )
    calls = [
        # credit hold: refused, a payment lifts it, the retry is accepted
        {
            "tool": "place_order",
            "args": {
                "buyer_email": held["email"],
                "batch_code": batch["batch"],
                "kg": 2.0,
                "date": "2025-09-01",
            },
        },
        {
            "tool": "record_payment",
            "args": {"buyer_email": held["email"], "amount": 200.0, "date": "2025-09-01"},
        },
        {
            "tool": "place_order",
            "args": {
                "buyer_email": held["email"],
                "batch_code": batch["batch"],
                "kg": 2.0,
                "date": "2025-09-01",
            },
        },
        # quarantine: no harvest; a clean inspection and lifting it make the harvest possible
        {
            "tool": "record_harvest",
            "args": {"hive_code": "HV-0007", "date": "2025-09-02", "kg": 12.5, "variety": "lime"},
        },
        {
            "tool": "record_inspection",
            "args": {
                "hive_code": "HV-0007",
                "date": "2025-09-01",
                "inspector": "Ada Finch",
                "brood_frames": 6,
            },
        },
        {"tool": "lift_quarantine", "args": {"hive_code": "HV-0007", "inspection_code": "IN-0133"}},
        {
            "tool": "record_harvest",
            "args": {"hive_code": "HV-0007", "date": "2025-09-02", "kg": 12.5, "variety": "lime"},
        },
        # a batch waiting for the lab cannot be sold until it is released
        {
            "tool": "place_order",
            "args": {
                "buyer_email": held["email"],
                "batch_code": "HB-2025-041",
                "kg": 1.0,
                "date": "2025-09-03",
            },
        },
        {
            "tool": "record_lab_result",
            "args": {"batch_code": "HB-2025-041", "moisture_pct": 17.4, "date": "2025-09-03"},
        },
        {
            "tool": "place_order",
            "args": {
                "buyer_email": held["email"],
                "batch_code": "HB-2025-041",
                "kg": 1.0,
                "date": "2025-09-03",
            },
        },
        # capacity: AP-04 holds 5 of 6; the second move is refused until a place is freed
        {
            "tool": "move_hive",
            "args": {"hive_code": "HV-0001", "apiary_code": "AP-04", "date": "2025-09-04"},
        },
        {
            "tool": "move_hive",
            "args": {"hive_code": "HV-0002", "apiary_code": "AP-04", "date": "2025-09-04"},
        },
        {
            "tool": "retire_hive",
            "args": {
                "hive_code": "HV-0001",
                "date": "2025-09-04",
                "reason": "united with a weak colony",
            },
        },
        {
            "tool": "move_hive",
            "args": {"hive_code": "HV-0002", "apiary_code": "AP-04", "date": "2025-09-04"},
        },
    ]
    first = _run(root, calls, tmp_path)
    ok = [_ok(r) for r in first["results"]]
    assert ok == [
        False,
        True,
        True,
        False,
        True,
        True,
        True,
        False,
        True,
        True,
        True,
        False,
        True,
        True,
    ], first["results"]
    res = first["results"]
    assert "credit hold" in res[0] and "quarantined" in res[3] and "not released" in res[7]
    assert "at capacity (6/6)" in res[11]
    assert res[6]["batch"] == "HB-2025-041" and res[4]["code"] == "IN-0133"
    order = res[2]
    assert order["code"] == "ORD-0022" and order["total"] == round(2.0 * order["price_per_kg"], 2)
    hives = first["final"]["hives"]
    assert hives["HV-0007"]["status"] == "active" and hives["HV-0002"]["apiary"] == "AP-04"
    assert first == _run(root, calls, tmp_path)  # deterministic


def test_seed_library_recovery_paths(tmp_path):
    root = _root("seed_library")
    tables = load_tables(load_domain(root))
    day = "2025-11-01"
    overdue = sorted(
        ln["loan_code"]
        for ln in tables["loans"]
        if ln["member_no"] == "M-0001" and ln["returned_date"] is None and ln["due_date"] < day
    )
    assert overdue
    returns = [
        {
            "tool": "record_return",
            "args": {"loan_code": c, "date": day, "outcome": "grew-and-saved", "packets_back": 2},
        }
        for c in overdue
    ]
    lot = {"member_no": "M-0001", "lot_code": "LOT-2023-006", "packets": 1, "date": day}
    rare = {"member_no": "M-0004", "lot_code": "LOT-2022-002", "packets": 1, "date": day}
    calls = [
        {"tool": "checkout_packets", "args": lot},  # on hold
        {"tool": "reinstate_member", "args": {"member_no": "M-0001", "date": day}},  # overdue
        *returns,
        {"tool": "reinstate_member", "args": {"member_no": "M-0001", "date": day}},
        {"tool": "checkout_packets", "args": lot},  # the lot is untested
        {
            "tool": "record_germination_test",
            "args": {
                "lot_code": "LOT-2023-006",
                "date": day,
                "seeds_sown": 20,
                "seeds_sprouted": 17,
            },
        },
        {"tool": "checkout_packets", "args": lot},
        {"tool": "checkout_packets", "args": rare},  # rare variety, member not trained
        {"tool": "record_training", "args": {"member_no": "M-0004", "date": day}},
        {"tool": "checkout_packets", "args": rare},
    ]
    first = _run(root, calls, tmp_path)
    res = first["results"]
    n = len(returns)
    assert [_ok(r) for r in res] == [False, False] + [True] * n + [
        True,
        False,
        True,
        True,
        False,
        True,
        True,
    ], res
    assert "on hold" in res[0] and "overdue loans" in res[1]
    assert "germination test" in res[3 + n] and "rare variety" in res[6 + n]
    assert res[5 + n]["due_date"] == "2026-03-01"  # 120 days, from the date given
    assert all(r["new_lot"].startswith("LOT-2025-") for r in res[2 : 2 + n])
    members = {m[0]: m for m in first["final"]["members"]}
    assert members["M-0001"][4] == "active" and members["M-0004"][6] == 1
    assert first == _run(root, calls, tmp_path)  # deterministic
