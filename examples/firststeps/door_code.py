"""Copy a door code from a note into a JSON answer."""

GENERATOR = {
    "capability": "transcribe",
    "domain": "door_codes",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random


def _code(seed):
    rng = random.Random(seed)
    return rng.randint(1000, 9999)


def build(seed):
    code = _code(seed)
    return {
        "instruction": "code.txt holds the door code of the storeroom. Write that code to "
        'output/answer.json as {"code": <number>}.',
        "files": {"code.txt": f"{code}\n"},
        "answer": {"output/answer.json": {"code": code}},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"code": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "code.txt")) as f:
        code = int(f.read().strip())
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump({"code": code}, f)
