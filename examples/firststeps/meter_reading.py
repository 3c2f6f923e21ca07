"""Copy a water meter reading from a note into a JSON answer."""

GENERATOR = {
    "capability": "transcribe",
    "domain": "utility_meters",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random


def _reading(seed):
    rng = random.Random(seed)
    return rng.randint(10000, 99999)


def build(seed):
    reading = _reading(seed)
    return {
        "instruction": "meter.txt holds this month's water meter reading. Write that reading to "
        'output/answer.json as {"reading": <number>}.',
        "files": {"meter.txt": f"{reading}\n"},
        "answer": {"output/answer.json": {"reading": reading}},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"reading": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "meter.txt")) as f:
        reading = int(f.read().strip())
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump({"reading": reading}, f)
