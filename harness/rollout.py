"""The rollout stage: N fresh-sandbox episodes per task, graded, then the pass-band filter.

    rows = rollout_task(task_dir, task_row, policy, n=8, sandbox=SandboxConfig(), concurrency=4)
    band = band_filter(rows, n=8, lo=1, hi=5)
    traj, band, rates = rollout_stage(tasks, policy, RolloutConfig(), SandboxConfig())

Each episode opens the task folder in its own sandbox (`harness.taskenv.open_task`), runs the agent
loop, then the task's verifier in the same sandbox, once whatever the agent left running is
killed and the verifier's dirs are emptied (taskenv.run_tests), so no agent can grade itself.
Every episode yields a TRAJECTORIES row, also when the server or the sandbox fails (the row says
so), so a group is never silently short. The band filter keeps tasks the policy sometimes but not
always solves: lo <= passes <= hi.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, Field, model_validator

from clawloop.harness.agent import AgentConfig, Episode, episode_seed, run_episode
from clawloop.harness.llm import PolicyConfig, chat_token_counter, make_client
from clawloop.harness.prompts import initial_messages
from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
from clawloop.harness.taskenv import Grade, open_task, run_tests
from clawloop.harness.taskfolder.folder import TaskFolder
from clawloop.harness.tokens import TOOL_CHOICES
from clawloop.harness.tools import TOOLS
from clawloop.harness.trajectory import trajectory_row
from clawloop.storage.schemas import INFRA_END_REASONS

log = logging.getLogger(__name__)
SANDBOX_START_ATTEMPTS = 2  # a sandbox that fails to start is a transient fault: retry once


def _opt(default: Any, help: str, **extra: Any) -> Any:
    return Field(default, description=help, json_schema_extra=extra or None)


class RolloutConfig(BaseModel):
    """Settings of the rollout stage, with the library's defaults (the paper's N=8, band [1, 5],
    30 turns). It is also the run YAML's `rollout:` section, field for field (the help text is
    the YAML's), and `clawloop rollout`'s flags (flows/cli/config_flags.py)."""

    # a typo in the run YAML's rollout: is an error; a value never changes once made
    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = _opt(8, "rollouts per task (the GRPO group size)")
    max_turns: int = _opt(30, "assistant replies per episode")
    episode_timeout_s: float = _opt(600.0, "wall time per episode (capped by task.toml [agent])")
    max_tokens: int = _opt(1024, "completion tokens per reply")
    context_len: int = _opt(32768, "the served model's context window")
    temperature: float = _opt(1.0, "sampling temperature (1.0: on-policy)")
    salt: str = _opt("", "makes episode ids differ between runs of the same policy")
    seed: int | None = _opt(
        None,
        "sampling seed: each request sends a hash of (seed, task id, attempt, turn), so two runs "
        "of the same episodes on the same weights sample the same tokens; a run's rollouts take "
        "the run's seed unless this is set; null: no seed sent",
    )
    band: tuple[int, int] = _opt((1, 5), "keep tasks whose pass count is in [low, high]")
    workers: int = _opt(4, "episodes run concurrently across the whole stage")
    tool_choice: str = _opt(
        "auto",
        "auto: the model decides when to call a tool; required: every reply is a tool call "
        "(vLLM's forced-call JSON; the local server ignores it); one: every reply is exactly "
        "one tool call (the forced-call JSON capped at one item; on the token API, which the "
        "managed vLLM uses; the chat API gets required)",
        choices=TOOL_CHOICES,
    )

    @model_validator(mode="after")
    def _in_range(self) -> RolloutConfig:
        for name in ("n", "max_turns", "max_tokens", "context_len", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"RolloutConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.tool_choice not in TOOL_CHOICES:
            raise ValueError(
                f"RolloutConfig.tool_choice must be one of {TOOL_CHOICES}, got {self.tool_choice!r}"
            )
        if len(self.band) != 2:
            raise ValueError(f"RolloutConfig.band must be [low, high], got {list(self.band)}")
        if not 0 <= self.band_lo <= self.band_hi:
            raise ValueError(
                f"RolloutConfig band [{self.band_lo}, {self.band_hi}]: need 0 <= low <= high"
            )
        return self

    def replaced(self, **changes: Any) -> RolloutConfig:
        """This config with `changes`, checked as a new one is."""
        return RolloutConfig.model_validate({**self.model_dump(), **changes})

    # Derived, not settings: a run YAML that sets one is told (tasks/config.py) "set by ...".
    @property
    def band_lo(self) -> int:
        """set by band: [low, high]"""
        return self.band[0]

    @property
    def band_hi(self) -> int:
        """set by band: [low, high]"""
        return self.band[1]

    @property
    def concurrency(self) -> int:
        """set by workers"""
        return self.workers

    def agent_config(
        self,
        request_timeout_s: float = PolicyConfig.request_timeout_s,
        want_token_ids: bool = True,
    ) -> AgentConfig:
        """The agent loop's settings: this section's, with the policy's per-request timeout
        (the one place an AgentConfig is made)."""
        return AgentConfig(
            max_turns=self.max_turns,
            episode_timeout_s=self.episode_timeout_s,
            max_tokens=self.max_tokens,
            context_len=self.context_len,
            temperature=self.temperature,
            want_token_ids=want_token_ids,
            request_timeout_s=request_timeout_s,
        )


def task_row_from_folder(task_dir: Path) -> dict[str, Any]:
    """task_id / capability / split of a Harbor task folder, from task.toml ([task] name and
    [metadata.clawloop]); the folder name and empty values where task.toml does not say."""
    info = TaskFolder.read(task_dir).info
    return {"task_id": info.task_id, "capability": info.capability, "split": info.split}


def _instruction(task: TaskFolder) -> str:
    path = task.instruction_path
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: {task.root} is not a Harbor task folder")
    return path.read_text()


def run_attempt(
    task: TaskFolder,
    policy: PolicyConfig,
    client: openai.OpenAI,
    attempt: int,
    sandbox: SandboxConfig,
    cfg: RolloutConfig,
    count_tokens: Callable[[list[dict]], int] | None = None,
) -> dict[str, Any]:
    """One episode of `task` in a fresh sandbox, graded; always returns a TRAJECTORIES row."""
    task_dir = task.root
    instruction = _instruction(task)
    agent_cfg = replace(
        cfg.agent_config(request_timeout_s=policy.request_timeout_s),
        episode_timeout_s=min(cfg.episode_timeout_s, task.info.agent_timeout_sec),
        seed=episode_seed(cfg.seed, task.info.task_id, attempt),
    )
    episode: Episode | None = None
    grade = Grade(0.0, False, reason="not graded")
    verifier_error = ""
    for start_try in range(SANDBOX_START_ATTEMPTS):
        try:
            with open_task(task_dir, sandbox) as sb:
                episode = run_episode(
                    sb, instruction, client, policy.model, agent_cfg, count_tokens
                )
                grade = run_tests(sb, task_dir)
                if grade.reason and not grade.passed:
                    verifier_error = "" if grade.checks else f"verifier: {grade.reason}"
            break
        except SandboxError as exc:
            if episode is None and start_try + 1 < SANDBOX_START_ATTEMPTS:
                log.warning("sandbox start failed for %s (retrying): %s", task_dir, exc)
                continue
            if episode is None:
                episode = Episode(messages=initial_messages(instruction))
                episode.end_reason = "sandbox_error"
                episode.error = f"sandbox failed: {exc}"
            else:
                verifier_error = f"sandbox failed while grading: {exc}"
                grade = Grade(0.0, False, reason=verifier_error)
            break
    if episode is None:  # every loop path sets it; kept for type checkers
        raise RuntimeError(f"no episode recorded for {task_dir} attempt {attempt}")
    return _row(task, policy, attempt, cfg, episode, grade, verifier_error)


def _row(
    task: TaskFolder,
    policy: PolicyConfig,
    attempt: int,
    cfg: RolloutConfig,
    episode: Episode,
    grade: Grade,
    error: str = "",
) -> dict[str, Any]:
    """The TRAJECTORIES row of one episode and its grade."""
    return trajectory_row(
        task_id=task.info.task_id,
        capability=task.info.capability,
        split=task.info.split,
        attempt=attempt,
        policy_id=policy.id,
        episode=episode,
        reward=grade.reward,
        passed=grade.passed,
        checks={"checks": grade.checks, "reason": grade.reason, "log": grade.log},
        error=error,
        salt=cfg.salt,
    )


def safe_attempt(
    task: TaskFolder,
    policy: PolicyConfig,
    client: openai.OpenAI,
    attempt: int,
    sandbox: SandboxConfig,
    cfg: RolloutConfig,
    count_tokens: Callable[[list[dict]], int] | None = None,
) -> dict[str, Any]:
    """`run_attempt`, but an unexpected fault (a broken task folder, a bug) becomes a row with
    end_reason `harness_error` instead of taking the whole stage down."""
    try:
        return run_attempt(task, policy, client, attempt, sandbox, cfg, count_tokens)
    except Exception as exc:
        log.exception("episode %d of %s failed in the harness", attempt, task.root)
        episode = Episode(messages=[], end_reason="harness_error")
        episode.error = f"{type(exc).__name__}: {exc}"
        not_graded = Grade(0.0, False, reason="not graded")
        return _row(task, policy, attempt, cfg, episode, not_graded)


def rollout_task(
    task_dir: Path,
    task_row: dict[str, Any],
    policy: PolicyConfig,
    n: int,
    sandbox: SandboxConfig,
    concurrency: int,
    cfg: RolloutConfig | None = None,
) -> list[dict[str, Any]]:
    """N episodes of one task (attempts 0..n-1), at most `concurrency` at a time, in attempt order."""
    cfg = (cfg or RolloutConfig()).replaced(n=n, workers=concurrency)
    rows, _, _ = rollout_stage([(Path(task_dir), task_row)], policy, cfg, sandbox)
    return rows


def band_filter(
    trajectory_rows: list[dict[str, Any]], n: int, lo: int = 1, hi: int = 5
) -> list[dict[str, Any]]:
    """One BAND row per task: kept when lo <= passes <= hi over a complete, clean group of n."""
    if not 0 <= lo <= hi or n < 1:
        raise ValueError(f"band [{lo}, {hi}] with n={n} must satisfy 0 <= lo <= hi and n >= 1")
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in trajectory_rows:
        groups[row["task_id"]].append(row)
    out = []
    for task_id, rows in groups.items():
        passes = sum(bool(r["passed"]) for r in rows)
        infra = sum(r["end_reason"] in INFRA_END_REASONS for r in rows)
        if len(rows) != n:
            kept, reason = False, f"{len(rows)} episodes recorded, expected {n}"
        elif infra:
            # Failures of the server or sandbox say nothing about the policy: the count is unreliable.
            kept, reason = False, f"{infra} of {n} episodes hit server/sandbox errors"
        elif passes < lo:
            kept, reason = False, f"too hard: {passes}/{n} passes < {lo}"
        elif passes > hi:
            kept, reason = False, f"too easy: {passes}/{n} passes > {hi}"
        else:
            kept, reason = True, f"in band: {lo} <= {passes}/{n} <= {hi}"
        out.append(
            {
                "task_id": task_id,
                "capability": rows[0].get("capability", ""),
                "n": len(rows),
                "passes": passes,
                "kept": kept,
                "reason": reason,
            }
        )
    return out


def pass_rates(
    trajectory_rows: list[dict[str, Any]], band_rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """ROLLOUT_PASS_RATES rows: per capability, episodes, passes, pass rate, mean reward, tasks
    kept. Episodes that ended in an infrastructure fault (INFRA_END_REASONS) are not counted:
    they say nothing about the policy; a capability with none left has NaN rates."""
    by_cap: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in trajectory_rows:
        rows = by_cap[row.get("capability", "")]  # every capability gets a row
        if row.get("end_reason") not in INFRA_END_REASONS:
            rows.append(row)
    kept: dict[str, int] = defaultdict(int)
    tasks: dict[str, int] = defaultdict(int)
    for b in band_rows:
        tasks[b["capability"]] += 1
        kept[b["capability"]] += bool(b["kept"])
    out = []
    for cap in sorted(by_cap):
        rows = by_cap[cap]
        passes = sum(bool(r["passed"]) for r in rows)
        out.append(
            {
                "capability": cap,
                "tasks": tasks[cap],
                "episodes": len(rows),
                "passes": passes,
                "pass_rate": passes / len(rows) if rows else math.nan,
                "mean_reward": sum(float(r["reward"]) for r in rows) / len(rows)
                if rows
                else math.nan,
                "kept_tasks": kept[cap],
            }
        )
    return out


def rollout_stage(
    tasks: list[tuple[Path, dict[str, Any]]],
    policy: PolicyConfig,
    cfg: RolloutConfig,
    sandbox: SandboxConfig,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Roll out every task cfg.n times with at most cfg.concurrency episodes in flight.

    Returns (trajectory rows ordered by task then attempt, band rows, pass-rate rows)."""
    if cfg.n < 1 or cfg.concurrency < 1:
        raise ValueError(f"n={cfg.n} and concurrency={cfg.concurrency} must both be >= 1")
    client = make_client(policy.endpoint())
    count = chat_token_counter(policy.tokenizer, TOOLS) if policy.tokenizer else None
    jobs = [(TaskFolder.for_row(d, row), a) for d, row in tasks for a in range(cfg.n)]
    start = time.monotonic()
    log.info(
        "rollout: %d tasks x %d episodes, concurrency %d, policy %s at %s",
        len(tasks),
        cfg.n,
        cfg.concurrency,
        policy.id,
        policy.base_url,
    )
    with ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="rollout") as pool:
        futures = [
            pool.submit(safe_attempt, task, policy, client, a, sandbox, cfg, count)
            for task, a in jobs
        ]
        rows = [f.result() for f in futures]
    band = band_filter(rows, cfg.n, cfg.band_lo, cfg.band_hi)
    rates = pass_rates(rows, band)
    log.info(
        "rollout: %d episodes in %.1fs, %d passed, %d/%d tasks kept by band [%d, %d]",
        len(rows),
        time.monotonic() - start,
        sum(r["passed"] for r in rows),
        sum(b["kept"] for b in band),
        len(band),
        cfg.band_lo,
        cfg.band_hi,
    )
    return rows, band, rates


def write_rollout_tables(
    out_dir: str | Path,
    trajectory_rows: list[dict[str, Any]],
    band_rows: list[dict[str, Any]],
    rate_rows: list[dict[str, Any]] | None = None,
) -> dict[str, str]:
    """Write trajectories/band/rollout_pass_rates Parquet files atomically; returns name -> path."""
    from clawloop.storage import fs
    from clawloop.storage.artifacts import write_table
    from clawloop.storage.schemas import BAND, ROLLOUT_PASS_RATES, TRAJECTORIES

    out = str(out_dir)
    tables = [("trajectories", trajectory_rows, TRAJECTORIES), ("band", band_rows, BAND)]
    if rate_rows is not None:
        tables.append(("rollout_pass_rates", rate_rows, ROLLOUT_PASS_RATES))
    paths = {}
    for name, rows, schema in tables:
        write_table(out, name, rows, schema)
        paths[name] = fs.join(out, f"{name}.parquet")
    return paths
