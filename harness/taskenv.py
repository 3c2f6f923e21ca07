"""Open a Harbor task folder in a sandbox, run its reference solution, and grade it.

Equivalent to building `environment/Dockerfile` (FROM the base image, COPY workspace/ /workspace)
without a docker build per task: the sandbox starts from the base image and the workspace files
are uploaded. Used by verify (oracle, no-op) and by rollouts (grading an agent's episode). The
code that ran before grading is untrusted, so grading runs in a context it never wrote:
`prepare_grading` kills what it left running and empties /tests, /logs/verifier, /solution and
/tmp; the verifier then runs from fresh copies under the grading supervisor
(harness/grading_supervisor.py), with a fresh HOME and TMPDIR and isolated interpreters
(`grading_env`), and whatever it leaves running, or a non-zero exit, fails the grade. /tests
and the grading kit are sealed (Sandbox.upload_sealed: owned by another uid, read-only; on
Docker and on bubblewrap run as root), and the supervisor keeps every process of the verifier
from writing another's memory: code the verifier runs (the agent's program) can rewrite neither
the rest of the verifier nor the running test runner.

    with open_task(task_dir, SandboxConfig(backend="bwrap")) as sb:
        run_solution(sb, task_dir)
        grade = run_tests(sb, task_dir)
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawloop.harness import grading_supervisor
from clawloop.harness.sandbox.base import (
    GRADING_KIT,
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
from clawloop.harness.taskfolder.folder import TaskFolder
from clawloop.storage.cache_key import data_text

REWARD_FILE = f"{VERIFIER_LOGS}/reward.json"  # {"reward": float}: numbers only (Harbor's rule)
# Harbor's other reward file: one number as text; read only when reward.json is absent (as Harbor).
REWARD_TEXT_FILE = f"{VERIFIER_LOGS}/reward.txt"
DETAILS_FILE = f"{VERIFIER_LOGS}/details.json"  # {"reward", "passed", "checks", "reason"}
MAX_REWARD_BYTES = 1024 * 1024
MAX_DETAILS_BYTES = 8 * 1024 * 1024  # one entry per check, each detail capped by the grader
LOG_TAIL = 4000
# The folders emptied before grading: the verifier's, the kits of earlier gradings, and those the
# episode wrote apart from /workspace (/tmp is its HOME). sandbox/reset_dirs.sh says how.
GRADING_DIRS = (TESTS, VERIFIER_LOGS, GRADING_KIT, SOLUTION, "/tmp")
RESET_DIRS_SH = data_text(__file__, "sandbox/reset_dirs.sh")


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
    info = TaskFolder.read(task_dir).info
    return info.agent_timeout_sec, info.verifier_timeout_sec


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
    rewrite /tests or reward.json while or after the verifier runs — then empty /tests,
    /logs/verifier, /solution and /tmp (the old HOME: start-up hooks, a planted script, a folder
    made read-only) and the kits of earlier gradings. Through the backend's reset_dirs (from the
    host on bubblewrap; on Docker an exec as each dir's owner), else one exec. Returns "" when
    done, else why the sandbox cannot be graded."""
    if not sb.kill_strays():
        return "processes left running in the sandbox could not be killed; not graded"
    reset = getattr(sb, "reset_dirs", None)
    if reset is not None:
        why = reset(list(GRADING_DIRS))
    else:
        argv = ["sh", "-c", RESET_DIRS_SH, "reset_dirs", *GRADING_DIRS]
        res = sb.exec(argv, timeout=30.0, cwd="/")
        why = (
            ""
            if res.ok
            else "timed out"
            if res.timed_out
            else (res.stderr.strip()[-300:] or f"exit {res.exit_code}")
        )
    if why:
        return f"could not reset {', '.join(GRADING_DIRS)} before grading ({why}); not graded"
    return ""


def grading_env(kit: str, scratch_dir: str) -> dict[str, str]:
    """The verifier's environment (over the sandbox's base PATH, LANG, TERM): HOME and TMPDIR
    fresh under `scratch_dir`; Python never imports from the current folder (the workspace) nor
    a user site, writes no bytecode, and the sealed kit `kit`'s site/sitecustomize puts back only
    the folder of a script run by path."""
    return {
        "HOME": f"{scratch_dir}/home",
        "TMPDIR": f"{scratch_dir}/tmp",
        "PYTHONSAFEPATH": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": f"{kit}/site",
    }


def upload_kit(sb: Sandbox) -> tuple[str, str]:
    """Put a fresh grading kit (the supervisor and the sitecustomize) in a new folder of the
    sealed GRADING_KIT, where the sandbox's commands can neither write nor rename it (a kit
    under the writable /tmp could be swapped for the agent's while the verifier runs), and
    empty home/ and tmp/ for the verifier under the just-emptied /tmp. Returns (kit, scratch)."""
    name = f"clawloop-grading-{secrets.token_hex(8)}"
    kit, scratch_dir = f"{GRADING_KIT}/{name}", f"/tmp/{name}"
    with scratch("clawloop-kit-") as tmp:
        local = Path(tmp, "kit")
        (local / "site").mkdir(parents=True)
        (local / "supervise.py").write_bytes(Path(grading_supervisor.__file__).read_bytes())
        (local / "site/sitecustomize.py").write_text(grading_supervisor.SITECUSTOMIZE)
        sb.upload_sealed(local, kit)
        work = Path(tmp, "scratch")
        for sub in ("home", "tmp"):
            (work / sub).mkdir(parents=True)
        sb.upload(work, scratch_dir)
    return kit, scratch_dir


@dataclass
class Supervised:
    """How a supervised grading command ended (`supervised_grading`): `why` is "" when it ended
    cleanly (exit 0, nothing left running), else why its grade fails; `trusted` is False when
    nothing it wrote may be read at all (it ran past its limit, left processes running, or the
    supervisor reported nothing), True when only its exit failed it."""

    log: str
    why: str = ""
    trusted: bool = True


def supervised_run(
    sb: Sandbox, argv: list[str], limit: float, cwd: str = WORKSPACE, name: str = ""
) -> Supervised:
    """Run a verifier command under the supervisor in a fresh kit (after prepare_grading and the
    grading files put in): it fails when it ran past `limit`, exited non-zero, left processes
    running, or the supervisor reported nothing. `name` names the command in the reason."""
    try:
        kit, scratch_dir = upload_kit(sb)
    except (SandboxError, OSError, ValueError) as exc:
        return Supervised("", f"could not put the grading kit in place ({exc})", False)
    cmd = ["python3", "-I", f"{kit}/supervise.py", "--", *argv]
    res = sb.exec(cmd, timeout=limit, cwd=cwd, env=grading_env(kit, scratch_dir))
    log = res.stderr[-LOG_TAIL:]
    if res.timed_out:
        return Supervised(log, f"the verifier ran past {limit:g}s and was killed", False)
    verdict = _verdict(res.stdout)
    if verdict is None:
        tail = res.stderr.strip()[-300:] or f"exit {res.exit_code}"
        return Supervised(log, f"the grading supervisor reported nothing ({tail})", False)
    if verdict["left"]:
        ps = ", ".join(str(p) for p in verdict["left"][:5])
        how = " and some could not be killed" if verdict.get("unkillable") else ""
        why = f"the verifier left {len(verdict['left'])} process(es) running ({ps}){how}; "
        return Supervised(log, why + "not graded", False)
    if verdict.get("unconfined"):
        log = f"grading ran partly confined: {verdict['unconfined']}\n{log}"
    if verdict.get("unlinked"):
        log = f"removed links to grading folders: {', '.join(verdict['unlinked'][:10])}\n{log}"
    if verdict["exit"] != 0:
        tail = res.stderr.strip().splitlines()[-1:] or ["no output"]
        name = name or " ".join(argv[-1:])
        return Supervised(log, f"{name} exited {verdict['exit']}: {tail[0][:300]}; not graded")
    return Supervised(log)


def supervised_grading(
    sb: Sandbox,
    put_files: Callable[[Sandbox], None],
    argv: list[str],
    limit: float,
    cwd: str = WORKSPACE,
    name: str = "",
    prepared: bool = False,
) -> Supervised:
    """The one grading path, for rollouts and audits (run_tests) and for verify's oracle and
    probes (generators/verify/grading.py): prepare_grading (unless `prepared`: done already,
    with no exec since), `put_files` (the grading files, through Sandbox.upload_sealed), `argv`
    under the supervisor in a fresh kit (supervised_run), then whatever is still running
    killed. Read the verifier's files only when `why` is "" (or, for what it wrote before a
    failed exit, when `trusted`)."""
    if not prepared:
        unfit = prepare_grading(sb)
        if unfit:
            return Supervised("", unfit, False)
    try:
        put_files(sb)
    except (SandboxError, OSError, ValueError) as exc:
        return Supervised("", f"could not copy the grading files in ({exc}); not graded", False)
    ran = supervised_run(sb, argv, limit, cwd, name)
    if ran.trusted and not sb.kill_strays():
        why = "the verifier left processes that could not be killed"
        return Supervised(ran.log, why, False)
    return ran


def _verdict(stdout: str) -> dict[str, Any] | None:
    """The supervisor's last stdout line as its verdict, or None when it is not one."""
    lines = stdout.strip().splitlines()
    try:
        doc = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    ok = isinstance(doc, dict) and isinstance(doc.get("exit"), int)
    return doc if ok and isinstance(doc.get("left"), list) else None


def run_tests(sb: Sandbox, task_dir: Path, timeout: float | None = None) -> Grade:
    """Grade the sandbox's current state (supervised_grading): prepare_grading, tests/ sealed in
    /tests, `bash /tests/test.sh` under the supervisor (a fresh kit, an isolated environment,
    nothing left running), then /logs/verifier/reward.json and details.json read."""
    limit = timeout if timeout is not None else task_timeouts(task_dir)[1]
    tests = Path(task_dir, "tests")
    ran = supervised_grading(sb, lambda s: put_tests(s, tests), ["bash", f"{TESTS}/test.sh"], limit)
    if ran.why:
        return Grade(0.0, False, log=ran.log, reason=ran.why)
    grade = read_grade(sb)
    grade.log = ran.log
    return grade


def put_tests(sb: Sandbox, tests: Path) -> None:
    """The task's tests/ folder, sealed, at /tests; a missing one is a clear error."""
    if not tests.is_dir():
        raise FileNotFoundError(f"the task has no tests/ folder ({tests})")
    sb.upload_sealed(tests, TESTS)
