"""Add up the two amounts of an invoice."""

GENERATOR = {
    "capability": "add_two",
    "domain": "invoices",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random


def _amounts(seed):
    rng = random.Random(seed)
    return rng.randint(10, 499), rng.randint(10, 499)


def build(seed):
    a, b = _amounts(seed)
    return {
        "instruction": "invoice.txt holds two amounts, one per line. Write their sum to "
        'output/answer.json as {"total": <number>}.',
        "files": {"invoice.txt": f"{a}\n{b}\n"},
        "answer": {"output/answer.json": {"total": a + b}},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"total": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "invoice.txt")) as f:
        total = sum(int(line) for line in f if line.strip())
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump({"total": total}, f)
