"""Name the member who joined a club first."""

GENERATOR = {
    "capability": "record_lookup",
    "domain": "club_members",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random

NAMES = ["Ada Brook", "Ben Ortiz", "Chen Wei", "Dana Roy", "Eli Moss", "Fay Lund", "Gus Park"]


def _members(seed):
    rng = random.Random(seed)
    years = rng.sample(range(1995, 2024), 5)
    return [{"name": n, "joined": y} for n, y in zip(rng.sample(NAMES, 5), years, strict=True)]


def _first(members):
    return {"name": min(members, key=lambda m: m["joined"])["name"]}


def build(seed):
    members = _members(seed)
    return {
        "instruction": "members.json lists a club's members with the year each joined. Write the "
        'name of the member who joined first to output/answer.json as {"name": "<name>"}.',
        "files": {"members.json": json.dumps(members, indent=2) + "\n"},
        "answer": {"output/answer.json": _first(members)},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"name": {"type": "string"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "members.json")) as f:
        members = json.load(f)
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump(_first(members), f)
