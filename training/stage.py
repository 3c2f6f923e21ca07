"""The train stage: trajectories + band filter in, a servable checkpoint and metrics rows out.

    result = train_stage(trajectories, band, TrainConfig(), base_model, out_dir)
    result = train_stage(..., init_adapter=previous_adapter)  # LoRA: continue that adapter

Runs GRPO on the kept groups, then SFT on the successful episodes of kept tasks (or either alone,
per `cfg.phases`). Each phase starts from the previous phase's result and writes its own folder,
`out_dir/grpo`, `out_dir/sft`: with LoRA its `adapter` (the phases continue one adapter over the
stage's start model), and full weights in `model` (servable by vLLM or `transformers serve`) only
where they are needed: full fine-tuning writes them every phase and deletes an earlier phase's once
the last has written its own; LoRA merges only after the last phase (`cfg.merge_lora`, written in
`cfg.merged_dtype`). `result.checkpoint_dir` is the last one written, the one the next rollout
serves: one full model per stage on disk, not one per phase (7.1 GB each for the 1.5B in fp32).

Why GRPO runs first: its objective is an importance ratio pi_theta / pi_old over episodes that
pi_old sampled, and PPO's clip only keeps the step in a trust region when pi_old is the policy
being trained at the first step. Both phases train on the same episodes. SFT first moved the
policy far from the sampler on exactly those tokens (the demo's iteration 1: ratio_mean 166, max
594, loss 296.8, grad_norm 1.2e4 clipped to 1): the positive advantages were all clipped (no
gradient) and the negative ones were scaled by the ratio, so GRPO's step was a normalised push-down
of the failures, not the GRPO gradient. Taking the ratio against the post-SFT policy instead (as
TRL's old_per_token_logps) would need the sampler-to-start gap in the truncated IS weight
(`tis_cap`), where it saturates the cap and biases the step; that weight is meant for kernel-level
sampler/trainer mismatch (logp diffs ~1e-2), not a training phase. GRPO first is on-policy: its
start model is the rollout policy, its ratio is 1 at step 0 (up to the sampler's numerics, which
`tis_cap` corrects), and its frozen logprobs come from the model it already loaded
(`make_trainer`'s pass), so the rollout policy is never loaded twice. SFT is maximum likelihood on
the passed episodes: it needs no reference policy, so it is unaffected by running second.

Nothing to train on is an outcome, not an error: status "nothing_to_train", a reason, and the
base model as checkpoint. A phase that crashes raises TrainError (never a result), so the stage is
not committed as done and a resumed run trains it again.

With `cfg.lora` and `init_adapter` (the previous iteration's adapter when it was not merged), the
first phase continues training that adapter on `base_model` instead of starting a fresh one, so
LoRA learning accumulates across iterations; without LoRA, `init_adapter` is an error.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import pandas as pd

from clawloop.training.config import TrainConfig
from clawloop.training.result import METRIC_EXTRAS, TrainError, TrainResult  # noqa: F401 (re-exported)
from clawloop.training.sequences import EncodeReport, TokenSample, ToolCallParser
from clawloop.training.trainer_base import PolicyRef, load_tokenizer

log = logging.getLogger("clawloop.train")


def _lost_to_length(enc: EncodeReport, cfg: TrainConfig) -> str:
    """Why sequences were empty, when it was length: the fix is a larger train.max_seq_len."""
    if not enc.dropped_empty:
        return ""
    return (
        f"; {enc.dropped_empty} sequence(s) lost every action token to truncation at "
        f"max_seq_len={cfg.max_seq_len} ({enc.truncated} truncated): raise train.max_seq_len"
    )


def truncation_note(phase: str, enc: EncodeReport, cfg: TrainConfig) -> str:
    """A status fragment when the phase lost more than `cfg.max_truncated_share` of its supervised
    tokens to `max_seq_len`, with the length that would have kept them; else ""."""
    if not enc.action_tokens_lost:
        return ""
    share = enc.action_tokens_lost / max(1, enc.action_tokens)
    turns = enc.turns_from_ids + enc.turns_from_text + enc.turns_from_template
    note = (
        f"{phase}: {share:.1%} of supervised tokens ({enc.action_tokens_lost} of "
        f"{enc.action_tokens}) lost to train.max_seq_len={cfg.max_seq_len}: "
        f"{enc.turns_cut_away} of {turns} turns cut away, {enc.turns_cut_partly} cut short "
        f"(completions longer than max_seq_len; prompts are cut from the left first); raise "
        f"train.max_seq_len to {enc.longest_completion + 1} (the longest completion and one "
        "token of context) to keep them"
    )
    log.warning("%s", note)  # always said, whatever the share
    return note if share > cfg.max_truncated_share else ""


def template_note(counts: dict[str, int]) -> str:
    """One warning for the stage (logged once, and put in its reason) when turns were trained on
    the template's rendering instead of the sampled text: how many, per phase, and the switch."""
    parts = []
    for phase in ("sft", "grpo"):
        n = counts.get(f"{phase}_turns_from_template", 0)
        if n:
            total = sum(counts.get(f"{phase}_{k}", 0) for k in TURN_PATHS)
            parts.append(f"{phase} {n} of {total} ({n / max(1, total):.0%})")
    if not parts:
        return ""
    note = (
        f"turns from the chat template: {', '.join(parts)} (the server returned neither token "
        "ids nor the raw text; each rendering round-trips through the agent's tool-call parser; "
        "train.turn_source: sampled drops them instead)"
    )
    log.warning("%s", note)
    return note


def _logprob_counts(samples: list[TokenSample]) -> dict[str, int]:
    """Action tokens whose sampling logprob the server recorded, and those GRPO must freeze from
    the phase's start model (`freeze_old_logprobs`) because it did not."""
    action = [(s, j) for s in samples for j, m in enumerate(s.action_mask) if m and j > 0]
    recorded = sum(math.isfinite(s.old_logprobs[j]) for s, j in action)
    return {"grpo_logprobs_recorded": recorded, "grpo_logprobs_frozen": len(action) - recorded}


def _dropped(phase: str, enc: EncodeReport) -> str:
    """A reason fragment when turns could not be trained on what was sampled."""
    if not enc.turns_dropped:
        return ""
    total = enc.turns_dropped + enc.turns_from_ids + enc.turns_from_text + enc.turns_from_template
    why = next((n for n in enc.notes if "dropped" in n), "")
    log.warning("%s: %d of %d turns dropped: %s", phase, enc.turns_dropped, total, why)
    return f"{phase}: {enc.turns_dropped} of {total} assistant turns dropped ({why})"


def _encode_counts(prefix: str, enc: EncodeReport) -> dict[str, int]:
    """Every count of the phase's encoding, e.g. `grpo_turns_from_ids`, `sft_eos_missing`."""
    return {f"{prefix}_{name}": value for name, value in enc.counts().items()}


TURN_PATHS = ("turns_from_ids", "turns_from_text", "turns_from_template", "turns_dropped")
TOKEN_FLAGS = (
    "logprobs_missing",
    "logprobs_mismatched",
    "logprobs_constrained",
    "forced_tokens",
    "eos_missing",
    "completions_cut",
    "prompts_cut_left",
    "turns_cut_away",
    "turns_cut_partly",
    "action_tokens_lost",
)


def token_summary(counts: dict[str, int]) -> dict[str, int]:
    """How the trained turns were built, for the stage summary: per path the turns of the phase
    that saw the most of them (GRPO encodes every episode SFT does and more), and the flags."""
    phases = [p for p in ("grpo", "sft") if f"{p}_turns_from_ids" in counts]
    if not phases:
        return {}
    best = max(phases, key=lambda p: sum(counts.get(f"{p}_{k}", 0) for k in TURN_PATHS))
    return {k: counts.get(f"{best}_{k}", 0) for k in TURN_PATHS + TOKEN_FLAGS}


def _autocast(args):
    """The training forward's precision (bf16 autocast over the fp32 weights, or none), so the
    logprobs taken before the first step are what step 0 computes: its ratio is 1."""
    import torch

    return torch.autocast(args.device.type, dtype=torch.bfloat16, enabled=bool(args.bf16))


def make_trainer(
    phase: str,
    samples: list[TokenSample],
    start: PolicyRef,
    tokenizer,
    cfg: TrainConfig,
    out_dir: Path,
    kept_groups: int = 0,
):
    """The phase's Trainer, ready to `train()`: policy loaded from `start`, GRPO's unknown old
    logprobs (and with KL the reference's) frozen from it in one no-grad pass. Split from `run_phase` so a
    benchmark can time `train()` alone."""
    from transformers import set_seed

    from clawloop.training.batching import SampleCollator, SampleDataset
    from clawloop.training.grpo import GRPOGroupTrainer, freeze_old_logprobs
    from clawloop.training.progress import progress_callbacks
    from clawloop.training.sft import MaskedSFTTrainer
    from clawloop.training.trainer_base import load_policy, training_arguments

    set_seed(cfg.seed)
    args = training_arguments(cfg, phase, out_dir / phase)
    if args.device.type == "cuda":
        import torch

        from clawloop.training.memory import full_finetune_refusal

        gpu = torch.cuda.get_device_properties(args.device).total_memory
        problem = full_finetune_refusal(cfg, start.model_dir, gpu)
        if problem:
            raise TrainError(problem)
    model = load_policy(start, cfg)
    if phase == "grpo":
        with_ref = cfg.kl_beta > 0  # the KL reference: the phase's start model, frozen too
        with _autocast(args):
            filled = freeze_old_logprobs(
                model.to(args.device), samples, args.device, with_ref, cfg.tis_cap is not None
            )
        log.info("grpo: %d action-token logprobs frozen from the rollout policy", filled)
    common = {
        "model": model,
        "args": args,
        "train_dataset": SampleDataset(samples),
        "data_collator": SampleCollator(
            tokenizer.pad_token_id, with_rl=phase == "grpo", pack=cfg.pack
        ),
        "processing_class": tokenizer,
        "callbacks": progress_callbacks(phase),  # a bar on a terminal's stderr, else none
    }
    if phase == "sft":
        return MaskedSFTTrainer(**common)
    return GRPOGroupTrainer(**common, cfg=cfg, kept_groups=kept_groups)


def run_phase(
    phase: str,
    samples: list[TokenSample],
    start: PolicyRef,
    tokenizer,
    cfg: TrainConfig,
    out_dir: Path,
    kept_groups: int = 0,
    last: bool = True,
) -> tuple[PolicyRef, list[dict[str, Any]]]:
    """Train one phase from `start` on `samples`; returns the written policy and metrics rows.
    `last`: the stage's last phase, whose checkpoint is served next; with LoRA only it is merged
    (`train.merge_lora`), an earlier phase writes its adapter alone and the next continues it."""
    from clawloop.training.trainer_base import save_policy

    trainer = make_trainer(phase, samples, start, tokenizer, cfg, out_dir, kept_groups)
    trainer.train()
    policy = save_policy(trainer, tokenizer, out_dir / phase, cfg, merge=last)
    return policy, trainer.metric_rows


def drop_intermediate_models(out_dir: Path, keep: Path) -> None:
    """Delete the full-weight folders an earlier phase of this stage wrote (`out_dir/<phase>/
    model`, a full fine-tune's start model for the next phase) once the last phase has written
    `keep`: nothing serves or continues them, and each is a whole model on disk (6 GB for a 1.5B
    in fp32). One process deletes; the caller has already waited for every rank's save."""
    import shutil

    from accelerate import PartialState

    if not PartialState().is_main_process:
        return
    for phase in ("grpo", "sft"):
        folder = Path(out_dir) / phase / "model"
        if folder.is_dir() and folder.resolve() != Path(keep).resolve():
            shutil.rmtree(folder)
            log.info("dropped %s: an earlier phase's weights, not served", folder)


def train_stage(
    trajectories: pd.DataFrame,
    band: pd.DataFrame,
    cfg: TrainConfig,
    base_model: str | Path,
    out_dir: Path,
    init_adapter: Path | None = None,
    tool_call_parser: ToolCallParser | None = None,
) -> TrainResult:
    """SFT and/or GRPO on one iteration's rollouts; see the module docstring for the outcomes.

    `init_adapter`: a peft LoRA adapter folder trained on `base_model` to continue (needs cfg.lora).
    `tool_call_parser`: the agent's (tasks.train.agent_tool_call_parser()); with
    cfg.turn_source template_ok it lets turns whose sampled text is unknown train on the chat
    template's rendering where that round-trips; None drops them.

    With `cfg.num_processes > 1`, `cfg.deepspeed` or `cfg.accelerate_config` (and not already
    in a launched process) the stage runs under `accelerate launch`/`torchrun` as a subprocess
    on this host and returns the result it wrote (training/launch.py); the launched processes
    parse tool calls with the agent's parser."""
    from clawloop.training.grpo import grpo_samples
    from clawloop.training.launch import inside_launcher, launched_train_stage, needs_launcher
    from clawloop.training.sft import sft_samples

    if needs_launcher(cfg) and not inside_launcher():
        return launched_train_stage(trajectories, band, cfg, base_model, out_dir, init_adapter)

    t0 = time.monotonic()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    from clawloop.training.gguf import model_folder

    base = str(model_folder(base_model))  # a GGUF file: its converted folder (training/gguf.py)
    result = TrainResult("nothing_to_train", "", Path(base), None, base, "base")
    if init_adapter is not None:
        init_adapter = Path(init_adapter)
        if not cfg.lora:
            raise ValueError(
                f"train_stage got init_adapter={init_adapter} but cfg.lora is false: set lora "
                "to continue the adapter, or pass init_adapter=None to train all weights"
            )
        if not (init_adapter / "adapter_config.json").is_file():
            raise FileNotFoundError(
                f"init_adapter {init_adapter} has no adapter_config.json: pass the `adapter` "
                "folder a LoRA train stage wrote"
            )
    tokenizer = load_tokenizer(Path(base))
    policy = PolicyRef(Path(base), init_adapter)
    reasons: list[str] = []
    phase = "grpo"
    try:
        # Both phases' sequences first, so the phase that runs last is known before any runs:
        # only its checkpoint is merged (with LoRA) and kept as full weights.
        grpo_run: tuple[list[TokenSample], int] | None = None
        if cfg.run_grpo:
            samples, grep = grpo_samples(trajectories, band, tokenizer, cfg, tool_call_parser)
            result.counts.update(
                grpo_samples=grep.samples,
                kept_groups=grep.kept_groups,
                dropped_zero_variance=grep.dropped_zero_variance,
                groups_not_kept=grep.dropped_not_kept,
                groups_of_one=grep.dropped_singletons,
            )
            result.counts.update(_encode_counts("grpo", grep.encode))
            reasons += [r for r in [_dropped("grpo", grep.encode)] if r]
            reasons += [r for r in [truncation_note("grpo", grep.encode, cfg)] if r]
            result.counts.update(_logprob_counts(samples))
            if samples:
                grpo_run = (samples, grep.kept_groups)
            else:
                lost = _lost_to_length(grep.encode, cfg)
                reasons.append(
                    f"grpo: {grep.kept_groups} kept group(s) but no trainable sequence{lost}"
                    if grep.kept_groups
                    else f"grpo: no kept group with reward spread ({grep.groups_seen} groups: "
                    f"{grep.dropped_not_kept} not kept by the band, "
                    f"{grep.dropped_zero_variance} with equal rewards, "
                    f"{grep.dropped_singletons} of one rollout (rollout.n >= 2 makes groups), "
                    f"train.reward={grep.reward})"
                )
        phase = "sft"
        sft_run: list[TokenSample] | None = None
        if cfg.run_sft:
            samples, rep = sft_samples(trajectories, band, tokenizer, cfg, tool_call_parser)
            result.counts.update(sft_episodes=rep.episodes, sft_samples=rep.samples)
            result.counts.update(_encode_counts("sft", rep.encode))
            reasons += [r for r in [_dropped("sft", rep.encode)] if r]
            reasons += [r for r in [truncation_note("sft", rep.encode, cfg)] if r]
            if samples:
                sft_run = samples
            else:
                reasons.append(
                    f"sft: no trainable sequence ({rep.episodes} passed episodes of kept tasks "
                    f"in split {cfg.split!r}{_lost_to_length(rep.encode, cfg)})"
                )
        # GRPO first, on the policy that sampled the episodes (on-policy); SFT on its result.
        if grpo_run is not None:
            phase = "grpo"
            policy, rows = run_phase(
                "grpo", grpo_run[0], policy, tokenizer, cfg, out_dir, grpo_run[1],
                last=sft_run is None,
            )  # fmt: skip
            result.metrics += rows
            result.phases_run.append("grpo")
        if sft_run is not None:
            phase = "sft"
            policy, rows = run_phase("sft", sft_run, policy, tokenizer, cfg, out_dir, last=True)
            result.metrics += rows
            result.phases_run.append("sft")
        drop_intermediate_models(out_dir, policy.model_dir)
    except Exception as exc:  # a crash is never a trained (or untrained) policy
        detail = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise TrainError(
            f"train stage: the {phase} phase crashed with {type(exc).__name__}: {detail} "
            f"(output folder {out_dir}); fix the cause and resume the run: the train stage "
            "is not marked done, so it runs again"
        ) from exc
    reasons += [r for r in [template_note(result.counts)] if r]
    if result.phases_run:
        from accelerate import PartialState

        result.counts["processes"] = PartialState().num_processes  # > 1: trained as one group
        result.status = "trained"
        result.checkpoint_dir = policy.model_dir
        result.adapter_dir = policy.adapter_dir
        if cfg.lora:
            result.adapter_dir = out_dir / result.phases_run[-1] / "adapter"
        result.kind = "lora" if cfg.lora else "full"
        reasons.insert(0, f"trained {'+'.join(result.phases_run)}")
    result.reason = "; ".join(reasons)
    from clawloop.training.trainer_base import held_dtypes

    held = held_dtypes(result.checkpoint_dir)
    result.dtype = next(iter(held)) if len(held) == 1 else ("mixed" if held else "")
    result.duration_s = time.monotonic() - t0
    return result
