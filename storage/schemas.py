"""One pyarrow schema per stage: the columns of the Parquet files each stage writes.

Stages build rows as plain dicts; `storage.artifacts` writes them with these schemas, so a missing
or mistyped column fails at the storage edge, loudly, instead of in the next stage. Everything here
is readable with plain pandas (`pd.read_parquet`).
"""

from __future__ import annotations

import pyarrow as pa

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
        ("origin", pa.string()),  # builtin | user:<path> | llm:<model>
    ]
)

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
        ("task_tar", pa.binary()),  # the Harbor-format folder, tar (uncompressed)
        ("capability", pa.string()),
        ("domain", pa.string()),
        ("split", pa.string()),
        ("duration_s", pa.float64()),
    ]
)

# verify -> checks.parquet: one row per (task, check).
CHECKS = pa.schema(
    [
        ("task_id", pa.string()),
        ("check", pa.string()),  # oracle | noop | leak | trivial:<probe> | determinism
        ("passed", pa.bool_()),
        ("reason", pa.string()),
        ("duration_s", pa.float64()),
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
        #   "finish_reason": str, "latency_s": float}
        ("turns_json", pa.string()),
        ("reward", pa.float64()),
        ("passed", pa.bool_()),
        ("checks_json", pa.string()),  # verifier's per-check detail
        ("end_reason", pa.string()),  # finished | max_turns | timeout | context_full | server_error
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
