"""Count the tasks on a to-do list, one task per line."""

GENERATOR = {
    "capability": "line_count",
    "domain": "todo_list",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random

TASKS = [
    "buy milk",
    "call the plumber",
    "water the plants",
    "pay rent",
    "renew passport",
    "fix the bike",
    "book dentist",
    "return library books",
    "clean the oven",
    "send invoices",
]


def _tasks(seed):
    rng = random.Random(seed)
    return rng.sample(TASKS, rng.randint(3, 9))


def build(seed):
    tasks = _tasks(seed)
    return {
        "instruction": "todo.txt is a to-do list, one task per line. Write how many tasks it "
        'holds to output/answer.json as {"tasks": <number>}.',
        "files": {"todo.txt": "".join(f"{t}\n" for t in tasks)},
        "answer": {"output/answer.json": {"tasks": len(tasks)}},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"tasks": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "todo.txt")) as f:
        n = sum(1 for line in f if line.strip())
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump({"tasks": n}, f)
