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
by a trainer at T=1 (no temperature scaling) and at T=0.7 (logits scaled by 1/T).
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
from clawloop.harness.tokens import TokenRoute
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
]


def trainer_logprobs(model, prompt: list[int], ids: list[int], temperature: float) -> list[float]:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].float() / temperature
    logp = torch.log_softmax(logits, -1)
    return [float(logp[len(prompt) - 1 + k, t]) for k, t in enumerate(ids)]


def stats(sampler: list[float], trainer: list[float], clip_eps: float, cap: float) -> dict:
    """Mismatch figures of paired logprobs (sampler's, trainer's) of the same sampled ids."""
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
            for _ in range(args.samples):
                body = route.request_body(server.name, prompt, args.max_tokens, temp, None)
                choice = client.post("/completions", cast_to=object, body=body | overrides)
                choice = choice["choices"][0]
                ids = choice["token_ids"]
                s_lp += [float(x) for x in choice["logprobs"]["token_logprobs"]]
                t_lp += trainer_logprobs(trainer, prompt, ids, trainer_temp)
            rows.append((label, stats(s_lp, t_lp, args.clip_eps, args.tis_cap)))
    print(f"model {model_dir}; clip [1-{args.clip_eps}, 1+{args.clip_eps}]; TIS cap {args.tis_cap}")
    print(
        f"{'setting':32} {'tokens':>6} {'mean|d|':>8} {'KL':>8} {'>clip':>6} {'TIS w':>6} {'cut':>5}"
    )
    for label, s in rows:
        print(
            f"{label:32} {s['tokens']:6d} {s['mean_abs']:8.4f} {s['kl']:8.4f} "
            f"{s['outside_clip']:6.1%} {s['tis_mean']:6.3f} {s['tis_truncated']:5.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
