"""Find the highest temperature in a sensor log."""

GENERATOR = {
    "capability": "extremum",
    "domain": "greenhouse_sensors",
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
    return [
        {"hour": f"{h:02d}:00", "celsius": f"{rng.uniform(12, 34):.1f}"}
        for h in range(rng.randint(6, 10))
    ]


def _max(rows):
    return {"max_celsius": max(float(r["celsius"]) for r in rows)}


def build(seed):
    rows = _rows(seed)
    text = "hour,celsius\n" + "".join(f"{r['hour']},{r['celsius']}\n" for r in rows)
    return {
        "instruction": "readings.csv logs a greenhouse's temperature every hour. Write the highest "
        'reading to output/answer.json as {"max_celsius": <number>}.',
        "files": {"readings.csv": text},
        "answer": {"output/answer.json": _max(rows)},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"max_celsius": {"type": "number"}}},
                }
            ],
            "tolerance": {"abs": 0.01, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "readings.csv")) as f:
        rows = list(csv.DictReader(f))
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump(_max(rows), f)
