"""Count the ERROR lines of an application log."""

GENERATOR = {
    "capability": "line_counting",
    "domain": "app_logs",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random


def _lines(seed):
    rng = random.Random(seed)
    msgs = ["request served", "cache miss", "retrying upstream", "disk at 80%", "user login"]
    lines = [
        f"2024-05-0{1 + i // 10} 10:{i % 60:02d} {rng.choice(['INFO', 'INFO', 'WARN', 'ERROR'])} {rng.choice(msgs)}"
        for i in range(rng.randint(8, 14))
    ]
    k = rng.randrange(len(lines))
    lines[k] = lines[k].replace("INFO", "ERROR").replace("WARN", "ERROR")  # at least one
    return lines


def _count(lines):
    return {"errors": sum(line.split()[2] == "ERROR" for line in lines)}


def build(seed):
    lines = _lines(seed)
    return {
        "instruction": "app.log is an application log, one event per line. Write how many lines "
        'have level ERROR to output/answer.json as {"errors": <count>}.',
        "files": {"app.log": "\n".join(lines) + "\n"},
        "answer": {"output/answer.json": _count(lines)},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"errors": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "app.log")) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump(_count(lines), f)
