"""Sampler-trainer mismatch on the same tokens: the logprobs vLLM records while sampling against
the trainer's own forward pass over those ids, for the sampling settings that matter to GRPO.

    .venv/bin/python benchmarks/sampler_mismatch.py [--model DIR] [--samples 8] [--max-tokens 48]
        [--tis-cap 2.0] [--clip-eps 0.2] [--vllm-arg=--dtype=float32 ...]

Starts the managed vLLM (harness/vllm.py; `make vllm`) on the model (default: the tiny offline
model), samples completions after the agent's first prompt on the echo task (token in, token out,
as rollouts do) under each setting, and scores every sampled id with the trainer's fp32 forward
pass (log-softmax of logits / T_trainer). Per setting it prints: tokens, mean |dlogp|, the KL of
sampler to trainer (Monte-Carlo, mean of logp_sampler - logp_trainer over the sampled ids), the
share of tokens whose ratio exp(logp_trainer - logp_sampler) lies outside GRPO's clip range
[1 - eps, 1 + eps], and the truncated importance-sampling weights min(ratio, cap) (TRL's
vllm_importance_sampling_cap): their mean and the share truncated.

Settings: pinned T=1 (what clawloop sends: top_p 1, top_k -1, min_p 0, repetition_penalty 1);
unpinned (top_k 20, top_p 0.95: what vLLM fills in from a Qwen3 generation_config.json when a
request leaves them out; its processed logprobs are renormalised over the kept ids); T=0.7 scored
by a trainer at T=1 (no temperature scaling) and at T=0.7 (logits scaled by 1/T); pinned T=1
under `rollout.tool_choice: required` (the forced-call grammar, `structured_outputs`): vLLM
applies the grammar's bitmask to the logits before its sampler, so every logprobs mode is
renormalised over the tokens the grammar allows (log p - log Z, Z = the allowed mass).

Two more columns separate the grammar from the weights: `forced`, the share of sampled tokens
vLLM gave logprob 0 (the only token the grammar allowed, or p rounding to 1), and `vllm|d|`, the
mean |dlogp| between the trainer and vLLM rescoring the same prompt + completion with no grammar
(`prompt_logprobs`, one request per sample): near 0 says the served weights are the trainer's and
the whole gap is the sampler's settings.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from clawloop.harness.llm import LLMEndpoint, make_client
from clawloop.harness.prompts import initial_messages
from clawloop.harness.tokens import TokenRoute, required_tools_schema
from clawloop.harness.tools import TOOLS
from clawloop.harness.vllm import ManagedVLLM, model_len
from clawloop.training.tiny_model import ensure_tiny_model

ROOT = Path(__file__).resolve().parents[1]
ECHO = ROOT / "tests" / "fixtures" / "tasks" / "echo_violet"
# (label, sampler temperature, request overrides, trainer temperature)
SETTINGS: list[tuple[str, float, dict[str, Any], float]] = [
    ("pinned T=1", 1.0, {}, 1.0),
    ("unpinned top_k=20 top_p=0.95", 1.0, {"top_k": 20, "top_p": 0.95}, 1.0),
    ("pinned T=0.7, trainer T=1", 0.7, {}, 1.0),
    ("pinned T=0.7, trainer T=0.7", 0.7, {}, 0.7),
    ("pinned T=1, tool_choice required", 1.0, {"structured_outputs": "required"}, 1.0),
]


def trainer_logprobs(model, prompt: list[int], ids: list[int], temperature: float) -> list[float]:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].float() / temperature
    logp = torch.log_softmax(logits, -1)
    return [float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(ids)]


def vllm_rescored(client, name: str, prompt: list[int], ids: list[int]) -> list[float]:
    """vLLM's own logprobs of `ids` after `prompt`, with no grammar and no sampler settings:
    `prompt_logprobs` of prompt + ids (raw log-softmax of the served weights)."""
    body = {"model": name, "prompt": prompt + ids, "max_tokens": 1, "prompt_logprobs": 0,
            "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0}  # fmt: skip
    choice = client.post("/completions", cast_to=object, body=body)["choices"][0]
    rows = choice["prompt_logprobs"][len(prompt) :]
    return [float(row[str(t)]["logprob"]) for row, t in zip(rows, ids, strict=True)]


def stats(
    sampler: list[float],
    trainer: list[float],
    clip_eps: float,
    cap: float,
    rescored: list[float] | None = None,
    trainer_t1: list[float] | None = None,
) -> dict:
    """Mismatch figures of paired logprobs (sampler's, trainer's) of the same sampled ids; with
    `rescored` (vLLM's logprobs of the same ids at T=1, no grammar) and `trainer_t1` (the
    trainer's at T=1) also their gap: the served weights against the trainer's."""
    d = [t - s for s, t in zip(sampler, trainer, strict=True)]
    ratio = [math.exp(x) for x in d]
    weights = [min(r, cap) for r in ratio]
    n = len(d)
    return {
        "tokens": n,
        "mean_abs": sum(abs(x) for x in d) / n,
        "kl": sum(-x for x in d) / n,
        "outside_clip": sum(not (1 - clip_eps <= r <= 1 + clip_eps) for r in ratio) / n,
        "tis_mean": sum(weights) / n,
        "tis_truncated": sum(r > cap for r in ratio) / n,
        "forced": sum(x == 0.0 for x in sampler) / n,
        "sampler_above": sum(x > 1e-3 for x in (-y for y in d)) / n,
        "vllm_abs": (
            sum(abs(a - b) for a, b in zip(rescored, trainer_t1, strict=True)) / n
            if rescored is not None and trainer_t1 is not None
            else math.nan
        ),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, help="model folder (default: the tiny offline model)")
    p.add_argument("--samples", type=int, default=8, help="completions per setting")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--clip-eps", type=float, default=0.2, help="GRPO's clip range (train.clip_eps)")
    p.add_argument("--tis-cap", type=float, default=2.0, help="truncated IS cap (train.tis_cap)")
    p.add_argument("--vllm-arg", action="append", default=[], help="extra vLLM flag (repeatable)")
    p.add_argument("--log", type=Path, help="vLLM log (default: a temp file)")
    args = p.parse_args()
    model_dir = args.model or ensure_tiny_model()
    route = TokenRoute(str(model_dir))
    prompt = route.prompt_ids(initial_messages((ECHO / "instruction.md").read_text()), TOOLS)
    trainer = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    log = args.log or Path(tempfile.mkdtemp(prefix="clawloop-mismatch-")) / "vllm.log"
    rows = []
    with ManagedVLLM(
        log, context_len=model_len(model_dir, 4096), extra_args=tuple(args.vllm_arg)
    ) as server:
        t0 = time.monotonic()
        server.serve(model_dir)
        print(
            f"vLLM up on {model_dir} in {time.monotonic() - t0:.0f}s (log {log})", file=sys.stderr
        )
        client = make_client(LLMEndpoint(server.base_url, server.name, max_retries=0))
        for label, temp, overrides, trainer_temp in SETTINGS:
            s_lp: list[float] = []
            t_lp: list[float] = []
            v_lp: list[float] = []
            t1_lp: list[float] = []  # the trainer at T=1: what vLLM's rescoring computes
            if overrides.get("structured_outputs") == "required":  # what TokenRoute sends then
                overrides = {"structured_outputs": {"json": required_tools_schema(TOOLS)}}
            for _ in range(args.samples):
                body = route.request_body(server.name, prompt, args.max_tokens, temp, None)
                choice = client.post("/completions", cast_to=object, body=body | overrides)
                choice = choice["choices"][0]
                ids = choice["token_ids"]
                s_lp += [float(x) for x in choice["logprobs"]["token_logprobs"]]
                own = trainer_logprobs(trainer, prompt, ids, trainer_temp)
                t_lp += own
                t1_lp += own if trainer_temp == 1.0 else trainer_logprobs(trainer, prompt, ids, 1.0)
                v_lp += vllm_rescored(client, server.name, prompt, ids)
            rows.append((label, stats(s_lp, t_lp, args.clip_eps, args.tis_cap, v_lp, t1_lp)))
    print(f"model {model_dir}; clip [1-{args.clip_eps}, 1+{args.clip_eps}]; TIS cap {args.tis_cap}")
    print(
        f"{'setting':34} {'tokens':>6} {'mean|d|':>8} {'KL':>8} {'>clip':>6} {'TIS w':>6} "
        f"{'cut':>5} {'forced':>6} {'s>t':>6} {'vllm|d|':>8}"
    )
    for label, s in rows:
        print(
            f"{label:34} {s['tokens']:6d} {s['mean_abs']:8.4f} {s['kl']:8.4f} "
            f"{s['outside_clip']:6.1%} {s['tis_mean']:6.3f} {s['tis_truncated']:5.1%} "
            f"{s['forced']:6.1%} {s['sampler_above']:6.1%} {s['vllm_abs']:8.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
