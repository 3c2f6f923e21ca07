"""The smallest user generator a Prefect or vLLM test runs the stages on: count hives per apiary
(one JSON input, one JSON output, no dirt), and `run_through_verify`, which brings one run's first
iteration through synthesize -> forge -> verify in this process (seconds), so a test can re-run a
later stage, or verify again, through Prefect."""

from __future__ import annotations

from pathlib import Path

_GENERATOR = '''"""Count hives per apiary."""
GENERATOR = {"capability": "aggregation", "domain": "%(domain)s", "multihop": 0, "dirtiness": 0, "output_format": "json"}
import json, os, random

def build(seed):
    rng = random.Random(seed)
    hives = [{"apiary": rng.choice("ABCDE"), "hive": i} for i in range(%(rows)d)]
    counts = {}
    for h in hives:
        counts[h["apiary"]] = counts.get(h["apiary"], 0) + 1
    return {"instruction": "Count hives per apiary in hives.json; write output/counts.json mapping apiary to count.",
            "files": {"hives.json": json.dumps(hives)},
            "answer": {"output/counts.json": counts},
            "contract": {"outputs": [{"path": "output/counts.json", "format": "json", "schema": {"type": "object"}}],
                         "tolerance": {"abs": 0, "rel": 0}, "decisions": ["Count every row"]}}

def solve(workspace):
    hives = json.load(open(os.path.join(workspace, "hives.json")))
    counts = {}
    for h in hives:
        counts[h["apiary"]] = counts.get(h["apiary"], 0) + 1
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    json.dump(counts, open(os.path.join(workspace, "output/counts.json"), "w"))
'''


def hive_count_generator(domain: str = "apiculture", rows: int = 30) -> str:
    """A generator module's source: `rows` hives, each in one of five apiaries, tagged `domain`."""
    if not domain.isidentifier() or rows < 1:
        raise ValueError(
            f"hive_count_generator: domain {domain!r} / rows {rows} (want a name, >= 1)"
        )
    return _GENERATOR % {"domain": domain, "rows": rows}


def write_hive_generators(
    folder: Path, domains: tuple[str, ...] = ("apiculture",), rows: int = 30
) -> Path:
    """`folder`/<domain>.py for each domain (a `synthesize.generator_paths` entry); returns folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for domain in domains:
        (folder / f"{domain}.py").write_text(hive_count_generator(domain, rows))
    return folder


def run_through_verify(config: Path, run_id: str) -> None:
    """synthesize -> forge -> verify of iteration 1 of `run_id`, in this process without Prefect."""
    from clawloop.flows import runs
    from clawloop.flows.pipeline import STAGES
    from clawloop.tasks.mapping import thread_mapper

    cfg = runs.resolve_config(str(config), None)
    runs.save_run_config(cfg, run_id)
    for stage in ("synthesize", "forge", "verify"):
        out = runs.rerun_stage(cfg, run_id, 1, stage, STAGES, thread_mapper())
        assert out.status == "ran", (stage, out.reason, out.error)
