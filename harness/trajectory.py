"""Trajectory records: one `storage.schemas.TRAJECTORIES` row per episode, and their Parquet files.

A row holds the whole conversation (OpenAI message format), the tools offered, per assistant turn
the prompt/completion token ids and sampling logprobs the server returned (or
`needs_retokenize`), timings, the verifier's reward and per-check detail, and the end reason.
Nested values are JSON text so pandas, DuckDB and HF datasets read them without clawloop.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from clawloop.harness.agent import Episode
from clawloop.harness.tools import TOOLS
from clawloop.storage import fs
from clawloop.storage.artifacts import read_rows, write_table
from clawloop.storage.schemas import TRAJECTORIES


def episode_id(task_id: str, policy_id: str, attempt: int, salt: str = "") -> str:
    """Stable per (task, policy, attempt, salt); the salt tells apart runs of the same policy."""
    key = f"{task_id}|{policy_id}|{attempt}|{salt}".encode()
    return hashlib.sha256(key).hexdigest()[:16]


def _json(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def trajectory_row(
    *,
    task_id: str,
    capability: str,
    split: str,
    attempt: int,
    policy_id: str,
    episode: Episode,
    reward: float,
    passed: bool,
    checks: Any,
    error: str = "",
    salt: str = "",
) -> dict[str, Any]:
    """Build one TRAJECTORIES row. `error` adds to the episode's own (e.g. a verifier fault)."""
    errors = "; ".join(e for e in (episode.error, error) if e)
    return {
        "episode_id": episode_id(task_id, policy_id, attempt, salt),
        "task_id": task_id,
        "capability": capability,
        "split": split,
        "attempt": attempt,
        "policy_id": policy_id,
        "messages_json": _json(episode.messages),
        "tools_json": _json(TOOLS),
        "turns_json": _json(episode.turns),
        "reward": float(reward),
        "passed": bool(passed),
        "checks_json": _json(checks),
        "end_reason": episode.end_reason,
        "n_turns": len(episode.turns),
        "n_tool_calls": episode.n_tool_calls,
        "duration_s": float(episode.duration_s),
        "error": errors,
    }


def write_trajectories(rows: list[dict[str, Any]], out_dir: str | Path) -> str:
    """Write `<out_dir>/trajectories.parquet` atomically, schema-checked; returns its path/URL."""
    write_table(str(out_dir), "trajectories.parquet", rows, TRAJECTORIES)
    return fs.join(str(out_dir), "trajectories.parquet")


def read_trajectories(out_dir: str | Path) -> list[dict[str, Any]]:
    return read_rows(str(out_dir), "trajectories.parquet")
