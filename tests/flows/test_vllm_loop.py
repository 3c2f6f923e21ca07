"""K=2 on the managed vLLM (llm.server: vllm) with the real train stage: iteration 2 samples
iteration 1's weights, on the restart path (a full checkpoint: vLLM restarted on it) and on the
LoRA path (the adapter loaded into the running server).

The tiny model solves nothing, so its rollout earns no reward spread and train would have nothing
to train: the stand-in rollout stage here runs the real episodes on vLLM and then labels attempt 0
of each group passed (the only thing it changes), so SFT and GRPO train on vLLM's own ids and
logprobs. Proof of the weights: the logprobs vLLM recorded in iteration 2 are those of iteration
1's checkpoint (the trainer's forward pass on the same ids), not the base model's.

The rollouts run under tool_choice auto: under `required` vLLM samples through the forced-call
grammar, whose token bitmask it applies to the logits before computing any logprob, so the
recorded logprobs are renormalised over the allowed tokens (log p - log Z) and sat 0.37-1.24 nats
from the checkpoint that served them (5.4 on the base model: benchmarks/sampler_mismatch.py; what
GRPO does about it: training/grpo.py). Without a grammar they are the model's own (GAP_SAME)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from clawloop.flows import runs
from clawloop.harness.rollout import band_filter, pass_rates, rollout_stage, task_row_from_folder
from clawloop.harness.sandbox.pool import with_host_column
from clawloop.harness.vllm import _SHARED
from clawloop.storage import artifacts, schemas
from clawloop.tasks import policy as pol
from clawloop.tasks import train
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageResult, StageSpec
from clawloop.training.tiny_model import ensure_tiny_model

pytestmark = [
    pytest.mark.vllm,
    # two vLLM starts and two train stages: ~10 min on a quiet 2-core host, 16-26 min at load 25
    pytest.mark.timeout(2700),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]
ECHO = Path(__file__).resolve().parents[1] / "fixtures" / "tasks" / "echo_violet"
SERVED: dict[int, str] = {}  # iteration -> the folder the managed vLLM served
# mean |dlogp| under which vLLM's recorded logprobs are the trainer's on the same weights, over
# which not (pinned T=1, no grammar; vLLM-CPU serves the fp32 model in bf16). Measured: the base
# 0.0006 (benchmarks/sampler_mismatch.py); restart path 0.0092 to the checkpoint vs 3.06 to the
# base; LoRA path 0.0007 to the adapter vs 0.19 to the base (lr 5e-2, 4 SFT + 2 GRPO steps)
GAP_SAME = 0.05


def _rollout(ctx):
    with pol.serve_policy(ctx, ctx.iteration - 1) as (policy, note):
        rows, _, _ = rollout_stage(
            [(ECHO, task_row_from_folder(ECHO))],
            policy,
            ctx.config.rollout,
            ctx.config.sandbox.to_sandbox_config(),
        )
        server = next(iter(_SHARED.values()), None)
        SERVED[ctx.iteration] = str(server.served_folder) if server else ""
    for row in rows:  # the reward spread the tiny model cannot earn: attempt 0 passes
        row["passed"], row["reward"] = row["attempt"] == 0, float(row["attempt"] == 0)
        row["sandbox_host"] = ""  # one local sandbox engine
    band = band_filter(rows, ctx.config.rollout.n, 1, 1)
    return StageResult(
        {
            "trajectories": (with_host_column(schemas.TRAJECTORIES), rows),
            "band": (schemas.BAND, band),
            "pass_rates": (schemas.ROLLOUT_PASS_RATES, pass_rates(rows, band)),
        },
        summary={"policy": note},
    )


STAGES = [
    StageSpec("rollout", _rollout, lambda c, k: {"k": k}, previous=("train",)),
    train.STAGE,
]


def _config(root: Path, lora: bool):
    return parse_config(
        {
            "iterations": 2,
            "storage": {"root": str(root)},
            "sandbox": {"backend": "bwrap"},
            # eager, the CPU default (llm.vllm_eager: auto): vLLM-CPU 0.32 fails to load its
            # torch.compile cache and compiles again at every start; the restart path starts twice
            "llm": {"server": "vllm", "token_ids": "on", "request_timeout_s": 300},
            "rollout": {
                "n": 2,
                "band": [1, 1],
                "max_turns": 2,
                "max_tokens": 32,
                "context_len": 4096,
                "tool_choice": "auto",  # the model's own logprobs (the module docstring)
                "workers": 2,
            },
            "train": {
                "lora": lora,
                "merge_lora": False,
                "sft_learning_rate": 5e-2,
                "grpo_learning_rate": 5e-2,
                "sft_max_steps": 4,
                "grpo_max_steps": 2,
            },
        }
    )


def _logprobs(model, turn: dict) -> list[float]:
    prompt, ids = turn["prompt_token_ids"], turn["completion_token_ids"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return [float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(ids)]


def _gap(model, turns: list[dict]) -> float:
    diffs = [
        abs(a - b) for t in turns for a, b in zip(_logprobs(model, t), t["logprobs"], strict=True)
    ]
    return sum(diffs) / len(diffs)


def _starts(run_dir: Path) -> int:
    return (run_dir / "vllm.log").read_text(errors="replace").count("== clawloop starts vLLM")


def _iteration_2_turns(run_dir: Path) -> list[dict]:
    traj = artifacts.read_table(str(run_dir / "iter-2" / "rollout"), "trajectories")
    turns = [t for r in traj["turns_json"] for t in json.loads(r)]
    assert turns and all(len(t["logprobs"]) == len(t["completion_token_ids"]) for t in turns)
    assert not any(t["logprobs_constrained"] for t in turns)  # no grammar: the model's logprobs
    return turns


def _run(tmp_path: Path, lora: bool):
    cfg = _config(tmp_path / "runs", lora)
    SERVED.clear()
    out = runs.run_loop(cfg, "r", STAGES, thread_mapper(False))
    assert out.ok, [o.error for o in out.outcomes if o.error]
    assert not _SHARED, "the managed vLLM outlived the run"
    run_dir = tmp_path / "runs" / "r"
    row = artifacts.read_table(str(run_dir / "iter-1" / "train"), "checkpoint").iloc[0]
    assert row["kind"] == ("lora" if lora else "full"), row.to_dict()
    assert (run_dir / "vllm.log").is_file()
    return run_dir, row


def test_restart_path_iteration_2_samples_iteration_1s_checkpoint(tmp_path):
    run_dir, row = _run(tmp_path, lora=False)
    ckpt = Path(row["checkpoint_path"])
    assert SERVED[2] == str(ckpt.resolve()) and _starts(run_dir) == 2  # restarted once, on it
    turns = _iteration_2_turns(run_dir)
    trained = AutoModelForCausalLM.from_pretrained(str(ckpt), dtype=torch.float32).eval()
    base = AutoModelForCausalLM.from_pretrained(str(ensure_tiny_model()), dtype=torch.float32)
    on_ckpt, on_base = _gap(trained, turns), _gap(base.eval(), turns)
    print(f"restart path: mean |dlogp| to the checkpoint {on_ckpt:.5f}, to the base {on_base:.5f}")
    assert on_ckpt < GAP_SAME < on_base, (on_ckpt, on_base)


def test_lora_path_iteration_2_samples_iteration_1s_adapter(tmp_path):
    from peft import PeftModel

    run_dir, row = _run(tmp_path, lora=True)
    assert _starts(run_dir) == 1  # one server: the adapter was loaded into it, no restart
    assert SERVED[2] == str(ensure_tiny_model().resolve())
    turns = _iteration_2_turns(run_dir)
    base_dir = str(ensure_tiny_model())
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32).eval()
    adapted = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32),
        str(row["adapter_path"]),
    ).eval()
    on_adapter, on_base = _gap(adapted, turns), _gap(base, turns)
    print(f"LoRA path: mean |dlogp| to the adapter {on_adapter:.5f}, to the base {on_base:.5f}")
    assert on_adapter < GAP_SAME < on_base, (on_adapter, on_base)
