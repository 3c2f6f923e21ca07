"""The structure table of domain-grounded synthesis, per domain: what `clawloop domain synth`
keeps and what its tasks measurably have (issue 36).

For each domain it runs `clawloop domain synth D --n N --seed S --json` (synthesis, then forge and
verify of every task made, in the sandbox, as a user would) and prints one row: kept / asked,
the measured shares (long_range, convergence, error_recovery, recovery with its fix told,
subgoals, branch_from_state; structure.py), the refusal kinds the domain showed and how many
became tasks, and the drop reasons by kind (numbers and ids folded, so one rule is one kind).
With --instructions K it also prints K kept instructions per domain that have long range or
error recovery (as the agent reads them).

    python benchmarks/domain_structure.py --n 6 --seed 1 [--domains D ...] [--json OUT]

Default domains: the two built-in ones and the tau-bench fixtures (tests/fixtures/domains/
tau_retail, tau_airline: third-party code no part of clawloop was written against).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOMAINS = [
    ROOT / "synthesis/domain/builtin/apiary_coop",
    ROOT / "synthesis/domain/builtin/seed_library",
    ROOT / "tests/fixtures/domains/tau_retail",
    ROOT / "tests/fixtures/domains/tau_airline",
]
COLUMNS = ("long_range", "convergence", "error_recovery", "error_recovery_fix_told", "subgoals",
           "branch_from_state")  # fmt: skip
ID = re.compile(r"#?\b[\w.-]*\d[\w.-]*\b")


def kind(reason: str) -> str:
    """A drop reason with its numbers, ids and warnings folded: one rule, one kind."""
    head = reason.split("; warning")[0]
    return ID.sub("N", head)[:90]


def run_one(domain: Path, n: int, seed: int, backend: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="clawloop-structure-") as tmp:
        cmd = [sys.executable, "-m", "clawloop.flows.cli", "domain", "synth", str(domain),
               "--n", str(n), "--seed", str(seed), "--out", f"{tmp}/out", "--json",
               "--backend", backend]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        if done.returncode not in (0, 1):
            raise SystemExit(f"{domain}: domain synth failed ({done.returncode}): {done.stderr}")
        report = json.loads(done.stdout)
        report["instructions"] = _instructions(Path(tmp, "out"), report)
        return report


def _instructions(out: Path, report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for m in report.get("measured", []):
        s = m["structure"]
        path = out / m["task_id"] / "instruction.md"
        if (s.get("long_range") or s.get("error_recovery")) and path.is_file():
            feats = [k for k in ("long_range", "convergence", "error_recovery") if s.get(k)]
            text = path.read_text()
            text = text.split("When you are done", 1)[-1].split("\nConstraints:", 1)[0]
            rows.append({"task_id": m["task_id"], "features": feats, "text": text.strip()})
    return rows


def row(report: dict[str, Any]) -> dict[str, Any]:
    s = report["structure"]
    drops = Counter(kind(d["reason"]) for d in report["dropped_graphs"]
                    if not d["reason"].startswith("not needed"))  # fmt: skip
    drops.update(kind(d["reason"]) for d in report["dropped_tasks"])
    return {
        "domain": report["domain"],
        "kept": f"{report['kept']}/{report['asked']}",
        **{c: s.get(c, 0.0) for c in COLUMNS},
        "claimed_unmet": {k: v for k, v in s.get("claimed_unmet", {}).items() if v},
        "refusals": report.get("refusals", {}),
        "short": report.get("short", ""),
        "absent": report.get("absent", {}),
        "drops": dict(drops.most_common()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--domains", nargs="*", type=Path, default=DOMAINS)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--instructions", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the rows and instructions here")
    args = ap.parse_args()
    rows, texts = [], {}
    head = ["domain", "kept", "LR", "conv", "recov", "fix told", "subgoals", "branch"]
    print(" | ".join(head))
    for d in args.domains:
        report = run_one(d, args.n, args.seed, args.backend)
        r = row(report)
        rows.append(r)
        texts[r["domain"]] = report["instructions"]
        print(" | ".join([r["domain"], r["kept"], *(f"{r[c]:.2f}" for c in COLUMNS)]), flush=True)
    for r in rows:
        print(f"\n{r['domain']}: claimed but unmet {r['claimed_unmet'] or '-'}; "
              f"refusals {json.dumps(r['refusals']) if r['refusals'] else '-'}")  # fmt: skip
        if r["short"]:
            print(f"  short: {r['short']}")
        for f, why in r["absent"].items():
            print(f"  no kept task has {f}: {why}")
        for k, v in r["drops"].items():
            print(f"  dropped {v} x {k}")
        for t in texts[r["domain"]][: args.instructions]:
            print(f"  --- kept {t['task_id']} ({', '.join(t['features'])}):")
            print("    " + t["text"].strip().replace("\n", "\n    "))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "instructions": texts}, indent=1))


if __name__ == "__main__":
    main()
