"""Total the honey harvested per hive from an apiary harvest log."""

GENERATOR = {
    "capability": "domain_calculation",
    "domain": "apiculture",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import csv
import json
import os
import random


def _log(seed):
    rng = random.Random(seed)
    hives = sorted(rng.sample(range(100, 999), 4))
    rows = []
    for day in range(1, 13):
        hive = f"HV-{rng.choice(hives)}"
        rows.append(
            {"date": f"2024-07-{day:02d}", "hive": hive, "kg": f"{rng.uniform(1.5, 9.5):.2f}"}
        )
    return rows


def _totals(rows):
    totals = {}
    for r in rows:
        totals[r["hive"]] = totals.get(r["hive"], 0.0) + float(r["kg"])
    return {h: round(t, 2) for h, t in sorted(totals.items())}


def build(seed):
    rows = _log(seed)
    lines = ["date,hive,kg"] + [f"{r['date']},{r['hive']},{r['kg']}" for r in rows]
    return {
        "instruction": "harvest.csv logs each honey harvest. Report the total kilograms per hive.",
        "files": {"harvest.csv": "\n".join(lines) + "\n"},
        "answer": {"output/totals.json": _totals(rows)},
        "contract": {
            "outputs": [
                {
                    "path": "output/totals.json",
                    "format": "json",
                    "schema": {"type": "object", "additionalProperties": {"type": "number"}},
                }
            ],
            "tolerance": {"abs": 0.01, "rel": 0.0},
            "decisions": [
                "Key the object by hive id exactly as written in the log",
                "Round each total to 2 decimals",
            ],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "harvest.csv")) as f:
        rows = list(csv.DictReader(f))
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "totals.json"), "w") as f:
        json.dump(_totals(rows), f)
