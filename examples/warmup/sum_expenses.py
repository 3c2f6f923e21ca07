"""Total the amounts of an expense list."""

GENERATOR = {
    "capability": "column_sum",
    "domain": "team_expenses",
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
    items = ["taxi", "lunch", "hotel", "train", "parking", "coffee", "books"]
    return [
        {"item": rng.choice(items), "amount": f"{rng.uniform(3, 120):.2f}"}
        for _ in range(rng.randint(4, 8))
    ]


def _total(rows):
    return {"total": round(sum(float(r["amount"]) for r in rows), 2)}


def build(seed):
    rows = _rows(seed)
    text = "item,amount\n" + "".join(f"{r['item']},{r['amount']}\n" for r in rows)
    return {
        "instruction": "expenses.csv lists a team's expenses. Write the sum of the amount column to "
        'output/answer.json as {"total": <number>}.',
        "files": {"expenses.csv": text},
        "answer": {"output/answer.json": _total(rows)},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"total": {"type": "number"}}},
                }
            ],
            "tolerance": {"abs": 0.01, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "expenses.csv")) as f:
        rows = list(csv.DictReader(f))
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump(_total(rows), f)
