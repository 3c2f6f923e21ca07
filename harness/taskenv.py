"""Open a Harbor task folder in a sandbox, run its reference solution, and grade it.

Equivalent to building `environment/Dockerfile` (FROM the base image, COPY workspace/ /workspace)
without a docker build per task: the sandbox starts from the base image and the workspace files
are uploaded. Used by verify (oracle, no-op) and by rollouts (grading an agent's episode). The
code that ran before grading is untrusted: `prepare_grading` kills what it left running and
empties /tests and /logs/verifier before the verifier goes in.

    with open_task(task_dir, SandboxConfig(backend="bwrap")) as sb:
        run_solution(sb, task_dir)
        grade = run_tests(sb, task_dir)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawloop.harness.sandbox.base import (
    SOLUTION,
    TESTS,
    VERIFIER_LOGS,
    WORKSPACE,
    ExecResult,
    Sandbox,
    SandboxConfig,
    SandboxError,
)
from clawloop.harness.sandbox.scratch import scratch
from clawloop.harness.taskfolder.folder import read_task_header
from clawloop.storage.cache_key import data_text

REWARD_FILE = f"{VERIFIER_LOGS}/reward.json"  # {"reward": float}: numbers only (Harbor's rule)
# Harbor's other reward file: one number as text; read only when reward.json is absent (as Harbor).
REWARD_TEXT_FILE = f"{VERIFIER_LOGS}/reward.txt"
DETAILS_FILE = f"{VERIFIER_LOGS}/details.json"  # {"reward", "passed", "checks", "reason"}
MAX_REWARD_BYTES = 1024 * 1024
MAX_DETAILS_BYTES = 8 * 1024 * 1024  # one entry per check, each detail capped by the grader
LOG_TAIL = 4000
# Empties the dirs the verifier reads from and writes to (reset_grading.sh says how).
RESET_GRADING_SH = (
    data_text(__file__, "reset_grading.sh")
    .replace("__TESTS__", TESTS)
    .replace("__VERIFIER_LOGS__", VERIFIER_LOGS)
)


@dataclass
class Grade:
    """The verifier's outcome. A missing or garbled reward is reward 0 with `reason` saying why."""

    reward: float
    passed: bool
    checks: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    reason: str = ""


def task_timeouts(task_dir: Path) -> tuple[float, float]:
    """(agent timeout_sec, verifier timeout_sec) from task.toml, with Harbor's usual defaults."""
    header = read_task_header(Path(task_dir))
    return header.agent_timeout_sec, header.verifier_timeout_sec


def load_workspace(sb: Sandbox, task_dir: Path) -> None:
    """Put environment/workspace/* into /workspace (what the task's Dockerfile COPY does)."""
    ws = Path(task_dir, "environment", "workspace")
    if ws.is_dir() and any(ws.iterdir()):
        sb.upload(ws, WORKSPACE)


@contextmanager
def open_task(task_dir: Path, config: SandboxConfig) -> Iterator[Sandbox]:
    """A fresh sandbox holding the task's starting workspace; stopped on exit."""
    from clawloop.harness.sandbox.backend import open_sandbox

    with open_sandbox(config) as sb:
        load_workspace(sb, Path(task_dir))
        yield sb


def run_solution(sb: Sandbox, task_dir: Path, timeout: float | None = None) -> ExecResult:
    """Upload solution/ to /solution and run `bash /solution/solve.sh` in /workspace."""
    sb.upload(Path(task_dir, "solution"), SOLUTION)
    limit = timeout if timeout is not None else task_timeouts(task_dir)[0]
    return sb.exec(["bash", f"{SOLUTION}/solve.sh"], timeout=limit, cwd=WORKSPACE)


def parse_reward(text: str | None, details: str | None = None) -> Grade:
    """A Grade from reward.json's text (outcome and fraction) and details.json's (checks, reason);
    anything unusable in reward.json is reward 0 with the reason. Folders forged before
    details.json existed kept checks and error in reward.json itself: read there when details
    are missing. Details whose own reward disagrees with reward.json's are ignored (stale)."""
    if text is None:
        return Grade(0.0, False, reason="the verifier wrote no reward.json or reward.txt")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return Grade(0.0, False, reason=f"reward.json is not JSON ({exc})")
    if not isinstance(doc, dict) or "reward" not in doc:
        return Grade(0.0, False, reason="reward.json has no 'reward' field")
    # Our verifier writes the outcome as `reward` and the share of checks passed as `fraction`;
    # other Harbor tasks write `reward` alone (then it is both). Grade.reward is the fraction.
    outcome, why = _unit_number(doc["reward"], "reward")
    reward, why_f = _unit_number(doc.get("fraction", outcome), "fraction")
    if why or why_f:
        return Grade(0.0, False, reason=why or why_f)
    passed = min(outcome, reward) >= 1.0
    # A task graded by a score and a cut (ClawGym's reward.sh): passed when the score reaches it.
    threshold, why_t = _unit_number(doc.get("pass_threshold", 1.0), "pass_threshold")
    if why_t or threshold <= 0.0:
        return Grade(0.0, False, reason=why_t or "pass_threshold 0 passes everything")
    if "pass_threshold" in doc:
        passed = reward >= threshold
    info = _details(details, reward) or doc
    checks = info.get("checks") if isinstance(info.get("checks"), list) else []
    reason = str(info.get("error") or "") or (
        "" if passed else str(info.get("reason") or "")[:500] or _first_failed(checks)
    )
    return Grade(reward, passed, checks, reason=reason)


def _unit_number(value: Any, name: str) -> tuple[float, str]:
    """(value, "") for a finite number in [0, 1], else (0.0, why not)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0, f"{name} {value!r} is not a finite number"
    if not 0.0 <= value <= 1.0:
        return 0.0, f"{name} {value} is outside [0, 1]"
    return float(value), ""


def _details(text: str | None, reward: float) -> dict[str, Any] | None:
    """details.json as a dict, or None when absent, garbled or about another reward."""
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    theirs = doc.get("reward")
    numeric = isinstance(theirs, int | float) and not isinstance(theirs, bool)
    if numeric and not math.isclose(float(theirs), reward, rel_tol=0.0, abs_tol=1e-9):
        return None
    return doc


def parse_reward_text(text: str) -> Grade:
    """A Grade from reward.txt (Harbor: the file holds one number); unusable text is reward 0."""
    try:
        reward = float(text.strip())
    except ValueError:
        return Grade(0.0, False, reason=f"reward.txt holds {text.strip()[:80]!r}, not a number")
    if not math.isfinite(reward) or not 0.0 <= reward <= 1.0:
        return Grade(0.0, False, reason=f"reward {reward} in reward.txt is not in [0, 1]")
    passed = reward >= 1.0  # as a lone reward.json: the verifier's output is the Grade's log
    return Grade(reward, passed, reason="" if passed else "reward below 1.0")


def read_grade(sb: Sandbox) -> Grade:
    """The verifier's outcome in a sandbox: /logs/verifier/reward.json and details.json, else
    (as Harbor reads them) reward.txt."""
    text = read_remote_text(sb, REWARD_FILE)
    if text is None:
        plain = read_remote_text(sb, REWARD_TEXT_FILE)
        if plain is not None:
            return parse_reward_text(plain)
    details = read_remote_text(sb, DETAILS_FILE, cap=MAX_DETAILS_BYTES)
    return parse_reward(text, details)


def _first_failed(checks: list[Any]) -> str:
    for c in checks:
        if isinstance(c, dict) and not c.get("passed", True):
            return str(c.get("detail") or c.get("reason") or c.get("name") or c)[:500]
    return "reward below 1.0"


def read_remote_text(sb: Sandbox, remote: str, cap: int = MAX_REWARD_BYTES) -> str | None:
    """Download one small file; None when it does not exist, is unreadable or is over `cap`."""
    with scratch("clawloop-dl-") as tmp:
        local = Path(tmp, Path(remote).name)
        try:
            sb.download(remote, local)
        except (SandboxError, OSError):
            return None
        if not local.is_file() or local.stat().st_size > cap:
            return None
        return local.read_text(errors="replace")


def prepare_grading(sb: Sandbox) -> str:
    """Make a sandbox fit to grade in after untrusted code ran there (an agent's episode, a
    generated solve.sh): kill every process it left behind — a background loop could otherwise
    rewrite /tests or reward.json while or after the verifier runs — then empty /tests and
    /logs/verifier. Returns "" when done, else why the sandbox cannot be graded."""
    if not sb.kill_strays():
        return "processes left running in the sandbox could not be killed; not graded"
    res = sb.exec(["sh", "-c", RESET_GRADING_SH], timeout=30.0, cwd="/")
    if not res.ok:
        why = "timed out" if res.timed_out else res.stderr.strip()[-300:] or f"exit {res.exit_code}"
        return f"could not reset {TESTS} and {VERIFIER_LOGS} before grading ({why}); not graded"
    return ""


def run_tests(sb: Sandbox, task_dir: Path, timeout: float | None = None) -> Grade:
    """Grade the sandbox's current state: prepare_grading, upload tests/ to /tests, run
    `bash /tests/test.sh`, kill whatever it left running (code the verifier ran, e.g. the
    agent's own scripts, may fork), then read /logs/verifier/reward.json and details.json."""
    unfit = prepare_grading(sb)
    if unfit:
        return Grade(0.0, False, reason=unfit)
    sb.upload(Path(task_dir, "tests"), TESTS)
    limit = timeout if timeout is not None else task_timeouts(task_dir)[1]
    res = sb.exec(["bash", f"{TESTS}/test.sh"], timeout=limit, cwd=WORKSPACE)
    log = (res.stdout + res.stderr)[-LOG_TAIL:]
    if res.timed_out:
        return Grade(0.0, False, log=log, reason=f"the verifier ran past {limit:g}s and was killed")
    if not sb.kill_strays():
        return Grade(
            0.0, False, log=log, reason="the verifier left processes that could not be killed"
        )
    grade = read_grade(sb)
    grade.log = log
    return grade
