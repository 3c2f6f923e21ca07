"""Count the open tickets in a CSV export."""

GENERATOR = {
    "capability": "row_counting",
    "domain": "helpdesk",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import csv
import json
import os
import random


def _rows(seed):
    rng = random.Random(seed)
    n = rng.randint(6, 12)
    rows = [
        {"id": f"T-{100 + i}", "status": rng.choice(["open", "closed", "closed"])} for i in range(n)
    ]
    rows[rng.randrange(n)]["status"] = "open"  # at least one
    return rows


def _count(rows):
    return {"open": sum(r["status"] == "open" for r in rows)}


def build(seed):
    rows = _rows(seed)
    text = "id,status\n" + "".join(f"{r['id']},{r['status']}\n" for r in rows)
    return {
        "instruction": "tickets.csv lists helpdesk tickets. Write how many have status open to "
        'output/answer.json as {"open": <count>}.',
        "files": {"tickets.csv": text},
        "answer": {"output/answer.json": _count(rows)},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"open": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "tickets.csv")) as f:
        rows = list(csv.DictReader(f))
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump(_count(rows), f)
