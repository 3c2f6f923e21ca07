"""One pyarrow schema per stage: the columns of the Parquet files each stage writes.

Stages build rows as plain dicts; `storage.artifacts` writes them with these schemas, so a missing
or mistyped column fails at the storage edge, loudly, instead of in the next stage. Everything here
is readable with plain pandas (`pd.read_parquet`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

# Rows travel between stages as plain dicts, one per Parquet row; these names say which schema a
# dict follows (the schemas below are the definition; storage.artifacts checks rows against them).
Row = dict[str, Any]
Candidate = Row  # CANDIDATES: a generator + a seed, made by synthesize
Forged = Row  # FORGED: a task folder (tar) or why it failed, made by forge
Check = Row  # CHECKS: one agent-free check of one task, made by verify
Verdict = Row  # VERDICTS: kept or dropped, with the reason
Trajectory = Row  # TRAJECTORIES: one episode of the agent on one task
FailureSummary = Row  # FAILURE_SUMMARIES: why one failed episode failed

# TRAJECTORIES end reasons that say nothing about the policy (the server, the sandbox or the
# harness failed): such episodes are left out of pass counts, pass rates and GRPO groups.
INFRA_END_REASONS = frozenset({"server_error", "sandbox_error", "harness_error"})

# synthesize -> candidates.parquet: one row per candidate task (a generator + a seed).
CANDIDATES = pa.schema(
    [
        ("task_id", pa.string()),  # stable id: sha of (generator sha256, seed)[:16]
        ("generator_code", pa.string()),
        ("generator_sha256", pa.string()),
        ("seed", pa.int64()),
        ("capability", pa.string()),
        ("domain", pa.string()),
        ("multihop", pa.int8()),
        ("dirtiness", pa.int8()),
        ("output_format", pa.string()),
        ("split", pa.string()),  # train | eval
        ("origin", pa.string()),  # builtin | user:<path> | llm:<model> | domain:<n> | skill_graph
        ("skill_path", pa.string()),  # skill_graph only: the sampled path as JSON (else null)
    ]
)

# synthesize -> domain_graphs.parquet: one row per abstract task graph drawn for a domain-grounded
# task (issue 12): its structure, what it was grounded into, kept (task_id) or why not.
DOMAIN_GRAPHS = pa.schema(
    [
        ("graph_id", pa.string()),
        ("domain", pa.string()),
        ("nodes", pa.string()),  # JSON: the abstract nodes (kind, goal, inputs, arm)
        ("wanted", pa.string()),  # JSON: the features the sampler aimed for
        ("features", pa.string()),  # JSON: the features the grounded graph has
        ("kept", pa.bool_()),
        ("reason", pa.string()),
        ("task_id", pa.string()),
        ("plan", pa.string()),  # JSON: the reference plan's steps (skill, tool, params, expect)
        # JSON: the kept task's measured structure (synthesis/domain/structure.py: long_range,
        # error_recovery, subgoals, branch_from_state, unmet claims); "" or null when not kept
        # or written before issue 24 (older files lack the column; readers treat it as absent).
        ("structure", pa.string()),
    ]
)

# synthesize -> domain_skills.parquet: the skills each domain's tools were clustered into.
DOMAIN_SKILLS = pa.schema(
    [("domain", pa.string()), ("skill", pa.string()), ("tools", pa.list_(pa.string()))]
)

# synthesize -> skill_paths.parquet: SkillSynth's sampled paths and what became of each.
SKILL_PATHS = pa.schema(
    [
        ("path_id", pa.string()),
        ("steps", pa.string()),  # JSON: [{skill, pre, post, pre_text, post_text, ...}]
        ("length", pa.int16()),
        ("kept", pa.bool_()),
        ("task_id", pa.string()),  # the kept task ("" when dropped)
        ("attempts", pa.int16()),  # constructions tried (0: no plan)
        ("reason", pa.string()),  # the last attempt's reason
    ]
)

# synthesize -> skill_plans.parquet: the Planner's plan per path (files, steps, outputs, checks).
SKILL_PLANS = pa.schema([("path_id", pa.string()), ("plan", pa.string())])

# synthesize -> skill_attempts.parquet: every Constructor attempt, how far it got and why it stopped.
SKILL_ATTEMPTS = pa.schema(
    [
        ("path_id", pa.string()),
        ("attempt", pa.int16()),
        ("stage", pa.string()),  # plan | construct | static | forge | verify | rubric | kept
        ("passed", pa.bool_()),
        ("reason", pa.string()),
        ("generator_sha256", pa.string()),
        ("code", pa.string()),
        ("task_id", pa.string()),
        ("packages", pa.list_(pa.string())),  # extra packages the generator declared
        ("rubric", pa.string()),  # the judge's verdict as JSON, when asked
    ]
)

# synthesize -> skill_visits.parquet: the path sampler's visit counts ν, carried across iterations.
SKILL_VISITS = pa.schema([("kind", pa.string()), ("id", pa.string()), ("count", pa.int64())])

# forge -> tasks.parquet: one row per candidate; the Harbor task folder as a tar blob.
FORGED = pa.schema(
    [
        ("task_id", pa.string()),
        ("status", pa.string()),  # ok | failed
        ("error", pa.string()),  # empty when ok: which generator, which seed, what went wrong
        ("error_kind", pa.string()),  # "" | contract | timeout | crash | sandbox
        ("attempts", pa.int8()),
        ("build_log", pa.string()),
        ("task_sha256", pa.string()),  # digest of the build result (determinism)
        # digest of a second build with the seed, when the row has one (an imported folder's);
        # forge leaves it "": verify builds the seed again after the reference solution
        ("rebuild_sha256", pa.string()),
        ("task_tar", pa.binary()),  # the Harbor-format folder, tar (uncompressed)
        ("capability", pa.string()),
        ("domain", pa.string()),
        ("split", pa.string()),
    ]
)

# verify -> checks.parquet: one row per (task, check).
CHECKS = pa.schema(
    [
        ("task_id", pa.string()),
        ("check", pa.string()),  # oracle | noop | leak | trivial:<probe> | determinism
        ("passed", pa.bool_()),
        ("reason", pa.string()),  # a passing row's "warning: ..." kept the task on a guess
    ]
)

# verify -> verdicts.parquet: one row per task.
VERDICTS = pa.schema(
    [
        ("task_id", pa.string()),
        ("kept", pa.bool_()),
        ("reason", pa.string()),  # why dropped (first failed check), or "all checks passed"
        ("capability", pa.string()),
        ("domain", pa.string()),
        ("split", pa.string()),
    ]
)

# rollout -> trajectories.parquet: one row per episode (also diagnose's eval episodes).
# Nested data is JSON text so any tool (pandas, DuckDB, HF datasets) reads it without our code.
TRAJECTORIES = pa.schema(
    [
        ("episode_id", pa.string()),
        ("task_id", pa.string()),
        ("capability", pa.string()),
        ("split", pa.string()),  # train | eval
        ("attempt", pa.int16()),  # 0..N-1 within the task's group
        ("policy_id", pa.string()),  # model name / checkpoint path served
        # OpenAI-format chat: system, user, assistant (content + tool_calls), tool messages.
        ("messages_json", pa.string()),
        ("tools_json", pa.string()),  # the tool schemas offered (OpenAI "tools" list)
        # Per assistant turn: {"prompt_token_ids": [...] | null, "completion_token_ids": [...] | null,
        #   "logprobs": [...] | null (one per completion token), "needs_retokenize": bool,
        #   "finish_reason": str, "latency_s": float, "tool_calls_from_text": bool,
        #   "raw_content": str (the reply's content exactly as the server returned it),
        #   "reasoning_content": str | null, "tool_calls_native": bool (the server parsed the
        #   calls out of the sample, so its text is unknown), "tools": [{"name", "error",
        #   "duration_s"}]}
        ("turns_json", pa.string()),
        ("reward", pa.float64()),
        ("passed", pa.bool_()),
        ("checks_json", pa.string()),  # verifier's per-check detail
        # finished | max_turns | timeout | context_full | server_error | sandbox_error | harness_error
        ("end_reason", pa.string()),
        ("n_turns", pa.int32()),
        ("n_tool_calls", pa.int32()),
        ("duration_s", pa.float64()),
        ("error", pa.string()),
    ]
)

# rollout -> band.parquet: one row per task: pass count and whether the band filter kept it.
BAND = pa.schema(
    [
        ("task_id", pa.string()),
        ("capability", pa.string()),
        ("n", pa.int16()),
        ("passes", pa.int16()),
        ("kept", pa.bool_()),
        ("reason", pa.string()),
    ]
)

# rollout -> rollout_pass_rates.parquet: one row per capability over the stage's train episodes
# (diagnose's PASS_RATES is the eval-split table).
ROLLOUT_PASS_RATES = pa.schema(
    [
        ("capability", pa.string()),
        ("tasks", pa.int32()),
        ("episodes", pa.int32()),
        ("passes", pa.int32()),
        ("pass_rate", pa.float64()),
        ("mean_reward", pa.float64()),
        ("kept_tasks", pa.int32()),  # tasks the band filter kept
    ]
)

# ---- diagnose (iteration k's held-out evaluation; guidance feeds iteration k+1's synthesize) ----

# diagnose -> failure_summaries.parquet: one row per failed eval episode, written by the policy
# itself (or by the trajectory heuristic when its answer never validated: fallback=True).
FAILURE_SUMMARIES = pa.schema(
    [
        ("episode_id", pa.string()),
        ("task_id", pa.string()),
        ("capability", pa.string()),
        ("iteration", pa.int16()),
        ("failure_step", pa.int32()),  # index of the assistant turn where it went wrong (0-based)
        (
            "root_cause",
            pa.string(),
        ),  # task_misunderstanding | wrong_tool | bad_edit | early_stop | other
        ("missing_capability", pa.string()),
        ("evidence", pa.string()),
        ("fallback", pa.bool_()),  # True: heuristic summary, the policy's answer was unusable
        ("fallback_reason", pa.string()),  # why (last validation error, dead endpoint, ...)
        ("attempts", pa.int8()),  # LLM calls made (0 when no endpoint)
        ("summarizer", pa.string()),  # model name, or "heuristic"
        ("cluster_id", pa.string()),  # filled by clustering: <capability>/<root_cause>/<n>
    ]
)

# diagnose -> clusters.parquet: one row per recurring failure pattern.
CLUSTERS = pa.schema(
    [
        ("iteration", pa.int16()),
        ("cluster_id", pa.string()),
        ("capability", pa.string()),
        ("root_cause", pa.string()),
        ("size", pa.int32()),  # failed episodes in the cluster
        ("share", pa.float64()),  # size / failed episodes of this capability
        ("pattern", pa.string()),  # the medoid summary: missing capability + evidence
        ("example_task_ids_json", pa.string()),  # JSON list, up to 5 distinct task ids
        ("episode_ids_json", pa.string()),  # JSON list of every member episode
    ]
)

# diagnose -> pass_rates.parquet: one row per (iteration, capability) on the eval split.
PASS_RATES = pa.schema(
    [
        ("iteration", pa.int16()),
        ("capability", pa.string()),
        ("n_episodes", pa.int32()),
        ("n_passed", pa.int32()),
        ("n_tasks", pa.int32()),
        ("pass_rate", pa.float64()),
    ]
)

# diagnose -> external_pass_rates.parquet (diagnose.eval_tasks): one row per (iteration, eval set,
# capability); `external` marks every row, so a reader that concatenates pass-rate tables cannot
# take these for the own held-out split's.
EXTERNAL_PASS_RATES = pa.schema(
    [
        ("iteration", pa.int64()),
        ("eval_set", pa.string()),
        ("capability", pa.string()),
        ("n_tasks", pa.int64()),
        ("n_episodes", pa.int64()),
        ("n_passed", pa.int64()),
        ("pass_rate", pa.float64()),
        ("mean_reward", pa.float64()),
        ("external", pa.bool_()),
    ]
)

# diagnose -> guidance.parquet: one row per capability, what iteration k+1's synthesize should do.
# The same content as guidance.json (the dict synthesize takes).
GUIDANCE = pa.schema(
    [
        ("iteration", pa.int16()),  # the iteration diagnosed; the guidance applies to iteration + 1
        ("capability", pa.string()),
        ("weight", pa.float64()),  # sampling weight; the weights of one iteration sum to 1
        ("pass_rate", pa.float64()),  # NaN when the capability had no eval episodes
        ("mastered", pa.bool_()),
        ("multihop", pa.int8()),
        ("dirtiness", pa.int8()),
        (
            "patterns",
            pa.string(),
        ),  # recurring failure patterns, text for the generator-writer prompt
    ]
)

# ---- train (owned by training/) ------------------------------------------------------------
# train -> metrics.parquet: one row per logged optimizer step (training.stage.TrainResult).
TRAIN_METRICS = pa.schema(
    [
        ("step", pa.int64()),  # optimizer step within its phase
        ("phase", pa.string()),  # sft | grpo
        ("loss", pa.float64()),
        ("tokens", pa.int64()),  # non-pad tokens processed since the previous row
        ("action_tokens", pa.int64()),  # of which carried loss (tokens the policy sampled)
        ("kept_groups", pa.int32()),  # GRPO groups in the phase (0 for SFT)
        ("grad_norm", pa.float64()),
        ("lr", pa.float64()),
        ("clip_frac", pa.float64()),  # GRPO only (NaN for SFT): share of clipped action tokens
        ("ratio_mean", pa.float64()),  # GRPO only: mean pi/pi_sampling over action tokens
        ("kl", pa.float64()),  # GRPO only: mean k3 KL to the reference (0 when kl_beta=0)
        ("offpolicy_frac", pa.float64()),  # GRPO only: share of tokens with recorded logprobs
        # GRPO with train.tis_cap only (NaN otherwise), over tokens with recorded logprobs: mean
        # truncated importance weight min(exp(trainer - sampler), cap), share at the cap, and
        # mean |trainer - sampler| logprob (the sampler-trainer mismatch); all three NaN when no
        # token was weighted (tis_tokens 0: e.g. every turn under the tool-call grammar)
        ("tis_mean", pa.float64()),
        ("tis_capped_frac", pa.float64()),
        ("logp_diff_mean", pa.float64()),
        ("tis_tokens", pa.float64()),  # how many tokens those means are over (NaN: TIS off, SFT)
    ]
)

# train -> checkpoint.parquet: one row: the policy the next iteration serves.
CHECKPOINT = pa.schema(
    [
        ("status", pa.string()),  # trained | nothing_to_train
        ("reason", pa.string()),
        ("checkpoint_path", pa.string()),  # servable model folder (the base model if untrained)
        ("adapter_path", pa.string()),  # LoRA adapter folder, "" for full fine-tunes
        ("base_model", pa.string()),
        ("kind", pa.string()),  # full | lora | base
        ("phases", pa.string()),  # e.g. "sft,grpo"
        ("sft_episodes", pa.int64()),
        ("sft_samples", pa.int64()),
        ("grpo_samples", pa.int64()),
        ("kept_groups", pa.int64()),
        ("dropped_zero_variance", pa.int64()),
        ("steps", pa.int64()),
        ("dtype", pa.string()),  # what the checkpoint's weights hold: float32 | bfloat16 | ...
    ]
)
