"""The cheapest loop that trains, for the slow end-to-end tests: K=2 through the plain engine with
user generators, bubblewrap sandboxes, a scripted policy over HTTP that passes one attempt in two,
SFT + GRPO on the tiny offline model and a hashed-embedder diagnose (`run_k2`).

The policy (`HalfSolvingPolicy`) is a FakeOpenAI router over the forged tasks: of every task it
solves the first attempt (replays the reference solution) and spoils the second (right files,
wrong content), so each group of n=2 has one pass and one fail (band [1, 1] keeps it, GRPO sees
reward spread); the first train task of each iteration (by id) it always spoils, so the band drops
that group. The fake's /v1/models reports as `root` the newest checkpoint train has committed
(`newest_checkpoint`): a vLLM server the user restarts on each iteration's weights
(`llm.reload: restart`).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from safetensors.torch import load_file

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.harness.prompts import task_message
from clawloop.harness.taskfolder.packing import unpack_tar
from clawloop.storage import artifacts
from clawloop.storage.manifest import read_manifest
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.training.tiny_model import ensure_tiny_model
from doubles.fake_openai import (
    FakeOpenAI,
    ToolStep,
    first_user_text,
    solution_steps,
    wrong_steps,
)

MODEL = "policy"
NOT_A_TASK_REPLY = "I cannot tell what went wrong."  # failure-summary requests: plain text

# The generator, with domain and seed in the instruction so that every task has its own first
# user message (the fake policy tells tasks apart by it).
GENERATOR = '''"""Sum log entries per {domain} site."""
GENERATOR = {{"capability": "{cap}", "domain": "{domain}", "multihop": 0, "dirtiness": 0, "output_format": "json"}}
import json, os, random

def build(seed):
    rng = random.Random(seed)
    rows = [{{"site": rng.choice("ABCD"), "qty": rng.randint(1, 9)}} for _ in range(20)]
    total = {{}}
    for r in rows:
        total[r["site"]] = total.get(r["site"], 0) + r["qty"]
    return {{"instruction": f"Sum qty per {domain} site in log.json (batch {{seed}}); write output/totals.json mapping site to total.",
            "files": {{"log.json": json.dumps(rows)}},
            "answer": {{"output/totals.json": total}},
            "contract": {{"outputs": [{{"path": "output/totals.json", "format": "json", "schema": {{"type": "object"}}}}],
                         "tolerance": {{"abs": 0, "rel": 0}}, "decisions": ["Sum every row"]}}}}

def solve(workspace):
    rows = json.load(open(os.path.join(workspace, "log.json")))
    total = {{}}
    for r in rows:
        total[r["site"]] = total.get(r["site"], 0) + r["qty"]
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    json.dump(total, open(os.path.join(workspace, "output/totals.json"), "w"))
'''
GENERATORS = [("tally", "apiary"), ("tally", "orchard"), ("audit", "marina")]


@dataclass(frozen=True)
class Forged:
    task_id: str
    split: str
    folder: Path
    hopeless: bool  # the policy fails every attempt (the band drops the group)


class HalfSolvingPolicy:
    """Router: forged task (found by its first user message) -> solve or spoil it.

    The decision is taken on an episode's first request and is readable from every later one:
    a solution replay starts with list_dir, a spoiled one with run_shell (see solution_steps and
    wrong_steps), so the router stays a function of the conversation after its first turn."""

    def __init__(self, run_dir: Path, cache: Path) -> None:
        self.run_dir, self.cache = run_dir, cache
        self.tasks: dict[str, Forged] = {}  # task message -> its forged task
        self.first_turns: Counter[str] = Counter()  # task message -> episodes started
        self.solved: dict[str, list[bool]] = {}  # task_id -> solved?, per episode started
        self._lock = threading.Lock()

    def _find(self, message: str) -> Forged | None:
        if message not in self.tasks:  # a new iteration's forge wrote more tasks
            for parquet in sorted(self.run_dir.glob("iter-*/forge/tasks.parquet")):
                frame = pd.read_parquet(parquet, columns=["task_id", "status", "task_tar", "split"])
                ok = frame[frame["status"] == "ok"]
                hopeless = min(ok.loc[ok["split"] == "train", "task_id"], default="")
                for row in ok.itertuples():
                    dest = self.cache / row.task_id
                    if not (dest / "instruction.md").is_file():
                        unpack_tar(row.task_tar, dest)
                    text = task_message((dest / "instruction.md").read_text())
                    self.tasks[text] = Forged(row.task_id, row.split, dest, row.task_id == hopeless)
        return self.tasks.get(message)

    def __call__(self, messages: list[dict[str, Any]]) -> list[ToolStep] | str:
        message = first_user_text(messages)
        with self._lock:
            task = self._find(message)
            if task is None:
                return NOT_A_TASK_REPLY
            replies = [m for m in messages if m.get("role") == "assistant"]
            if replies:
                first_call = (replies[0].get("tool_calls") or [{}])[0]
                solve = first_call.get("function", {}).get("name") == "list_dir"
            else:
                self.first_turns[message] += 1
                solve = not task.hopeless and self.first_turns[message] % 2 == 1
                self.solved.setdefault(task.task_id, []).append(solve)
        return solution_steps(task.folder) if solve else wrong_steps(task.folder)


def newest_checkpoint(run_dir: Path, base: str) -> str:
    """The folder a server restarted after every train stage serves: the newest committed
    trained checkpoint, else the base model."""
    served = base
    for k in range(1, 100):
        stage = run_dir / f"iter-{k}" / "train"
        if read_manifest(str(stage)) is None:
            break
        row = artifacts.read_rows(str(stage), "checkpoint")[0]
        if row["kind"] != "base":
            served = row["checkpoint_path"]
    return served


def weights(model_dir: str | Path) -> dict[str, Any]:
    files = sorted(Path(model_dir).glob("*.safetensors"))
    assert files, f"no safetensors weights in {model_dir}"
    out: dict[str, Any] = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


@dataclass(frozen=True)
class K2Run:
    """What `run_k2` ran: the loop's summary and where it wrote, the base model it started from,
    the policy (which tasks it solved) and the fake server (stopped; its requests are kept)."""

    out: runs.RunSummary
    root: Path  # storage root
    run_dir: Path  # root / run id
    base: Path  # the tiny model iteration 1 trains
    policy: HalfSolvingPolicy
    fake: FakeOpenAI
    base_url: str  # the fake's URL while it ran


def run_k2(tmp_path: Path, run: str, *, text_tool_calls: bool, baseline: bool = False) -> K2Run:
    """Run the two iterations under tmp_path; assert every stage of both succeeded.

    `text_tool_calls=True`: the fake writes tool calls hermes-style in the sampled text (what
    train tokenises); False: native parsed `tool_calls` only (train falls back to the template).
    `baseline`: diagnose.baseline on (row "base", graded by iteration 1's rollout)."""
    gens = tmp_path / "gens"
    gens.mkdir()
    for cap, dom in GENERATORS:
        (gens / f"{cap}_{dom}.py").write_text(GENERATOR.format(cap=cap, domain=dom))
    base = ensure_tiny_model()
    root = tmp_path / "runs"
    run_dir = root / run
    policy = HalfSolvingPolicy(run_dir, tmp_path / "policy-tasks")
    with FakeOpenAI(
        "routed",
        router=policy,
        model=MODEL,
        served_root=lambda: newest_checkpoint(run_dir, str(base)),
        text_tool_calls=text_tool_calls,
    ) as fake:
        url = fake.base_url
        cfg = parse_config(
            {
                "iterations": 2,
                "storage": {"root": str(root)},
                "sandbox": {"backend": "bwrap"},
                "llm": {"base_url": url, "model": MODEL, "api_key_env": "", "reload": "restart"},
                "synthesize": {
                    "builtin": False,
                    "generator_paths": [str(gens)],
                    "n_train": 3,
                    "n_eval": 1,
                    "eval_fraction": 0.25,
                },
                # a solution replay is 5 replies, a spoiled one 7
                "rollout": {"n": 2, "band": [1, 1], "max_turns": 8, "workers": 2},
                "train": {
                    "base_model": str(base),
                    "phases": "grpo+sft",
                    "sft_max_steps": 1,
                    "grpo_max_steps": 1,
                    "max_seq_len": 4096,  # system prompt + tools alone: ~2k tiny-model tokens
                    "per_device_batch_size": 2,
                },
                "diagnose": {"embedder": "hashed", "summary_attempts": 1, "baseline": baseline},
            }
        )
        out = runs.run_loop(cfg, run, STAGES, thread_mapper(False))
    assert out.ok, [(o.iteration, o.stage, o.status, o.error[:800]) for o in out.outcomes]
    return K2Run(out, root, run_dir, base, policy, fake, url)
