"""Count the guests on a list, one name per line."""

GENERATOR = {
    "capability": "line_count",
    "domain": "dinner_party",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random

NAMES = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea"]


def _guests(seed):
    rng = random.Random(seed)
    return rng.sample(NAMES, rng.randint(3, 9))


def build(seed):
    guests = _guests(seed)
    return {
        "instruction": "guests.txt lists the dinner guests, one name per line. Write how many "
        'guests there are to output/answer.json as {"guests": <number>}.',
        "files": {"guests.txt": "".join(f"{g}\n" for g in guests)},
        "answer": {"output/answer.json": {"guests": len(guests)}},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"guests": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "guests.txt")) as f:
        n = sum(1 for line in f if line.strip())
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump({"guests": n}, f)
