"""Read one setting out of a JSON config file."""

GENERATOR = {
    "capability": "value_lookup",
    "domain": "service_config",
    "multihop": 0,
    "dirtiness": 0,
    "output_format": "json",
}

import json
import os
import random


def _config(seed):
    rng = random.Random(seed)
    return {
        "service": rng.choice(["billing", "search", "mailer", "uploads"]),
        "port": rng.randint(2000, 9000),
        "timeout_s": rng.randint(5, 120),
        "workers": rng.randint(2, 32),
    }


def build(seed):
    cfg = _config(seed)
    return {
        "instruction": "config.json configures a service. Write its timeout_s setting to "
        'output/answer.json as {"timeout_s": <number>}.',
        "files": {"config.json": json.dumps(cfg, indent=2) + "\n"},
        "answer": {"output/answer.json": {"timeout_s": cfg["timeout_s"]}},
        "contract": {
            "outputs": [
                {
                    "path": "output/answer.json",
                    "format": "json",
                    "schema": {"type": "object", "properties": {"timeout_s": {"type": "integer"}}},
                }
            ],
            "tolerance": {"abs": 0.0, "rel": 0.0},
            "decisions": [],
        },
    }


def solve(workspace):
    with open(os.path.join(workspace, "config.json")) as f:
        cfg = json.load(f)
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    with open(os.path.join(workspace, "output", "answer.json"), "w") as f:
        json.dump({"timeout_s": cfg["timeout_s"]}, f)
