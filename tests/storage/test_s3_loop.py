"""The real six stages, K=1, with `storage.root` on moto's S3 server (conftest.py): every stage's
tables and manifest are objects in the bucket, train really trains (a scripted policy over HTTP
solves one attempt of each task in two) and its checkpoint is uploaded; `clawloop run --run-id`
then skips every stage, and `clawloop rerun` of diagnose on a machine whose local copy of the
checkpoint is gone fetches it back from the bucket and re-runs that stage alone.

Slow: bubblewrap sandboxes and SFT + GRPO steps of the tiny model on CPU (about a minute on 2
loaded cores)."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from doubles.fake_openai import FakeOpenAI, ToolStep, first_user_text, solution_steps, wrong_steps
from doubles.k2_loop import GENERATOR, MODEL  # the generator and model name of test_loop_trains

from clawloop.flows import cli, runs
from clawloop.flows.pipeline import STAGES
from clawloop.harness.prompts import task_message
from clawloop.harness.taskfolder.packing import unpack_tar
from clawloop.storage import artifacts, fs
from clawloop.storage.manifest import read_manifest, why_incomplete
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.training.tiny_model import ensure_tiny_model

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]

RUN = "s3-loop"


class HalfSolvingPolicy:
    """Solves the first attempt at each forged task and spoils the second (n=2: one pass and one
    fail per group, so the band keeps it and train has something to train on). Finds the tasks
    by reading forge's table from the bucket, as any consumer of the artifacts would."""

    def __init__(self, root: str, cache: Path) -> None:
        self.root, self.cache = root, cache
        self.tasks: dict[str, Path] = {}  # first user message -> task folder
        self.first_turns: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _find(self, message: str) -> Path | None:
        if message not in self.tasks:
            forge = fs.stage_url(self.root, RUN, 1, "forge")
            for row in artifacts.read_rows(forge, "tasks"):
                if row["status"] != "ok":
                    continue
                dest = self.cache / row["task_id"]
                if not (dest / "instruction.md").is_file():
                    unpack_tar(row["task_tar"], dest)
                self.tasks[task_message((dest / "instruction.md").read_text())] = dest
        return self.tasks.get(message)

    def __call__(self, messages: list[dict[str, Any]]) -> list[ToolStep] | str:
        message = first_user_text(messages)
        with self._lock:
            task = self._find(message)
            if task is None:
                return "I cannot tell what went wrong."  # failure-summary requests
            replies = [m for m in messages if m.get("role") == "assistant"]
            if replies:
                first_call = (replies[0].get("tool_calls") or [{}])[0]
                solve = first_call.get("function", {}).get("name") == "list_dir"
            else:
                self.first_turns[message] += 1
                solve = self.first_turns[message] % 2 == 1
        return solution_steps(task) if solve else wrong_steps(task)


def served_checkpoint(root: str, base: str) -> str:
    """What a vLLM server restarted on train's newest checkpoint reports as its root."""
    train = fs.stage_url(root, RUN, 1, "train")
    if read_manifest(train) is None:
        return base
    row = artifacts.read_rows(train, "checkpoint")[0]
    return base if row["kind"] == "base" else row["checkpoint_path"]


def _etags(s3, keys: list[str]) -> dict[str, str]:
    return {k: s3.client.head_object(Bucket=s3.bucket, Key=k)["ETag"] for k in keys}


@pytest.fixture
def frozen_code(monkeypatch):
    """Each module's code version as first computed: the tree may be edited while this runs (a
    stage whose code changed re-runs, by design), and this test is about storage, not that.
    Stage keys (tasks.stage.stage_code) and synthesize's step keys (tasks.source) read it."""
    from clawloop.storage import cache_key
    from clawloop.tasks import source, stage

    seen: dict[tuple[str, Path], str] = {}
    real = cache_key.code_version

    def frozen(module: str, root: Path = cache_key.PROJECT_ROOT) -> str:
        return seen.setdefault((module, root), real(module, root))

    for where in (stage, source):
        monkeypatch.setattr(where, "code_version", frozen)


def test_k1_loop_on_s3_then_resume_skips_and_a_one_stage_rerun_fetches_the_checkpoint(
    s3, tmp_path, capsys, frozen_code
):
    gens = tmp_path / "gens"
    gens.mkdir()
    for cap, dom in [("tally", "apiary"), ("audit", "marina")]:
        (gens / f"{cap}_{dom}.py").write_text(GENERATOR.format(cap=cap, domain=dom))
    base = str(ensure_tiny_model())
    policy = HalfSolvingPolicy(s3.root, tmp_path / "policy-tasks")
    served = lambda: served_checkpoint(s3.root, base)  # noqa: E731
    fake = FakeOpenAI(
        "routed", router=policy, model=MODEL, served_root=served, vllm_tokens=True
    )  # token ids, as vLLM returns them: train needs what was sampled
    with fake:
        cfg = parse_config(
            {
                "iterations": 1,
                "storage": {"root": s3.root, "options": s3.options},
                "sandbox": {"backend": "bwrap"},
                # restart: diagnose asks the server which checkpoint it serves (train's upload)
                "llm": {
                    "base_url": fake.base_url,
                    "model": MODEL,
                    "api_key_env": "",
                    "reload": "restart",
                },
                "synthesize": {
                    "builtin": False,
                    "generator_paths": [str(gens)],
                    "n_train": 2,
                    "n_eval": 1,
                    "eval_fraction": 0.34,
                },
                "rollout": {"n": 2, "band": [1, 1], "max_turns": 8, "workers": 2},
                "train": {
                    "base_model": base,
                    "phases": "sft",
                    "sft_max_steps": 1,
                    "max_seq_len": 4096,
                    "per_device_batch_size": 2,
                },
                "diagnose": {"embedder": "hashed", "summary_attempts": 1},
            }
        )
        first = runs.run_loop(cfg, RUN, STAGES, thread_mapper(False))
        assert first.ok, [(o.stage, o.status, o.error[:800]) for o in first.outcomes]
        assert [o.status for o in first.outcomes] == ["ran"] * len(STAGES)

        # Everything is in the bucket, read back with boto3.
        keys = s3.objects(f"runs/{RUN}/")
        assert f"runs/{RUN}/run.json" in keys and f"runs/{RUN}/running.json" not in keys
        manifests = [f"runs/{RUN}/iter-1/{s.name}/manifest.json" for s in STAGES]
        for key in manifests:
            m = json.loads(s3.get(key))
            assert m["status"] == "complete" and m["inputs_hash"], key
            for f in m["files"]:
                assert key.replace("manifest.json", f["name"]) in keys, (key, f["name"])
        train_m = json.loads(s3.get(f"runs/{RUN}/iter-1/train/manifest.json"))
        weights = [f for f in train_m["files"] if f["name"].endswith(".safetensors")]
        assert weights, train_m["files"]
        assert not [k for k in keys if fs.TMP_PREFIX in k]
        (row,) = artifacts.read_rows(fs.stage_url(s3.root, RUN, 1, "train"), "checkpoint")
        assert row["status"] == "trained" and row["kind"] == "full", row
        local_ckpt = Path(row["checkpoint_path"])
        assert local_ckpt.is_relative_to(fs.cache_dir())  # trained in the local copy
        diag = json.loads(s3.get(f"runs/{RUN}/iter-1/diagnose/manifest.json"))
        assert f"checkpoint {local_ckpt}" in diag["summary"]["policy"]

        # `clawloop run --run-id` resumes from the bucket's run.json: every stage skips.
        before = _etags(s3, manifests)
        capsys.readouterr()
        argv = ["--run-id", RUN, "--root", s3.root]
        assert cli.main(["run", *argv, "--no-prefect"]) == 0
        assert _etags(s3, manifests) == before
        out = capsys.readouterr().out
        assert out.count("skipped") >= len(STAGES), out

        # A machine without the local copy re-runs one stage: the checkpoint comes back.
        shutil.rmtree(fs.cache_dir())
        from clawloop.tasks import policy as policy_mod

        policy_mod._FETCHED.clear()
        assert cli.main(["rerun", *argv, "--iteration", "1", "--stage", "diagnose"]) == 0
    for w in weights:
        copy = fs.local_path(fs.join(fs.stage_url(s3.root, RUN, 1, "train"), w["name"]))
        assert copy.is_file() and fs.file_sha256(copy) == w["sha256"], w["name"]
    after = _etags(s3, manifests)
    changed = {k for k in manifests if after[k] != before[k]}
    assert changed == {f"runs/{RUN}/iter-1/diagnose/manifest.json"}
    assert why_incomplete(fs.stage_url(s3.root, RUN, 1, "diagnose")) is None
    (info,) = runs.list_runs(s3.root, STAGES)
    assert info.status == "complete", (info.status, info.reason)
