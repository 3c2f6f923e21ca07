"""Add up the steps walked on two days."""

GENERATOR = {
    "capability": "add_two",
    "domain": "step_counter",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random


def _steps(seed):
    rng = random.Random(seed)
    return rng.randint(1000, 9999), rng.randint(1000, 9999)


def build(seed):
    a, b = _steps(seed)
    return {
        "instruction": "steps.txt holds the steps walked on Saturday and on Sunday, one number "
        'per line. Write their sum to output/answer.json as {"steps": <number>}.',
        "files": {"steps.txt": f"{a}\n{b}\n"},
        "answer": {"output/answer.json": {"steps": a + b}},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"steps": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "steps.txt")) as f:
        total = sum(int(line) for line in f if line.strip())
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump({"steps": total}, f)
