"""Grading in a sandbox: one Python process (probe_driver.py, stdlib only) grades a solved workspace
with the task's grader (the oracle), then the pristine workspace (no-op) and every trivial probe
written over it. `grade_in` grades one task in the sandbox its solution ran in; `grade_jobs` grades
several solved tasks (GradeJobs, their workspaces copied out) in one fresh sandbox and one
interpreter, each under its own alarm, and grades again alone a task the batch left without
results.

Both go the one grading path rollouts take (taskenv.supervised_grading): the sandbox reset
(prepare_grading), the answer keys, tests and driver sealed in /tests, the pristine workspaces
(which the driver writes probes over) under the just-emptied /tmp, the command under the grading
supervisor (an isolated environment, confined, nothing left running, its exit counted)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from pathlib import Path
from typing import Any

from clawloop.generators.runner import (
    code_blob,
    read_capped,
)
from clawloop.generators.verify import probe_driver
from clawloop.generators.verify.taskfiles import Entries, TaskFiles, under
from clawloop.harness.sandbox.backend import open_sandbox
from clawloop.harness.sandbox.base import (
    TESTS,
    VERIFIER_LOGS,
    WORKSPACE,
    SandboxConfig,
    SandboxError,
)
from clawloop.harness.sandbox.scratch import scratch
from clawloop.harness.taskenv import (
    DETAILS_FILE,
    MAX_DETAILS_BYTES,
    MAX_REWARD_BYTES,
    REWARD_FILE,
    REWARD_TEXT_FILE,
    Grade,
    Supervised,
    parse_reward,
    parse_reward_text,
    supervised_grading,
)
from clawloop.harness.taskfolder.folder import (
    GRADER_PATH,
    STATE_PREDICATES_PATH,
    TEST_SH,
    parse_harbor_task_info,
)
from clawloop.harness.taskfolder.packing import write_files
from clawloop.harness.taskfolder.probes import trivial_probes

PROBE_STAGE_NAME = ".clawloop-probes"
PROBE_STAGE = f"{TESTS}/{PROBE_STAGE_NAME}"
PROBE_RESULTS = f"{VERIFIER_LOGS}/probes.json"
# The pristine starting workspaces the driver writes each probe over (writable, unlike /tests).
PRISTINE = "/tmp/clawloop-probes"
# Runs inside a sandbox after the reference solution, one forked child per job of STAGE/jobs.json
# (generators/verify/probe_driver.py, stdlib only); its source is read from the module imported
# here, so the cache keys follow edits to it.
PROBE_DRIVER = Path(str(probe_driver.__file__)).read_text()
# A solved workspace graded in a batch's sandbox is copied there: at most this much.
MAX_BATCH_WORKSPACE_BYTES = 16 * 1024 * 1024
MAX_BATCH_WORKSPACE_ENTRIES = 4096


@dataclasses.dataclass
class GradeJob:
    """One task's grading once its reference solution ran, ready for a grading sandbox: its
    answer key (the tests/ files the grader reads), the probe stage (probes.json and the pristine
    starting workspace under workspace/), its workspace as the solution left it, and how long
    its grading may take."""

    tests: Entries
    stage: Entries
    workspace: Entries
    timeout: float


@dataclasses.dataclass
class Graded:
    """What a grading exec left for one task: the oracle's grade and the probes' results
    (probes.json's text; None when the exec ended before writing it, `why` says how)."""

    oracle: Grade
    probes: str | None
    why: str = ""


@functools.cache
def canonical_test_side() -> Entries:
    """The test-side files forge writes into every task (tests/test.sh, grader.py,
    state_predicates.py): a task holding exactly these is graded by our one grader module."""
    return {
        "test.sh": (TEST_SH.encode(), True),
        "grader.py": (GRADER_PATH.read_bytes(), False),
        "state_predicates.py": (STATE_PREDICATES_PATH.read_bytes(), False),
    }


def is_canonical(tests: Entries) -> bool:
    return all(
        (tests.get(rel) or (b"",))[0] == entry[0] for rel, entry in canonical_test_side().items()
    )


def _probe_stage(task: TaskFiles) -> Entries:
    """probes.json (harness/taskfolder/probes.py) and the pristine starting workspace."""
    probes = trivial_probes(task.json("tests/contract.json"), task.workspace)
    stage: Entries = {"probes.json": (json.dumps(probes).encode(), False), "workspace": None}
    for rel, entry in under(task.entries, "environment/workspace/").items():
        stage["workspace/" + rel] = entry
    return stage


def copied_job(sb: Any, remote: str, task: TaskFiles) -> GradeJob | None:
    """The GradeJob of `task` once its reference solution has run in the bubblewrap sandbox
    `sb`, its solved workspace at `remote` copied out; None when that workspace cannot be
    copied as it is (BwrapSandbox.read_tree): then it is graded where it is."""
    workspace = sb.read_tree(remote, MAX_BATCH_WORKSPACE_BYTES, MAX_BATCH_WORKSPACE_ENTRIES)
    if workspace is None:
        return None
    tests = under(task.entries, "tests/")
    keys = {k: tests[k] for k in ("contract.json", "answer.json") if k in tests}
    header = parse_harbor_task_info(task.text("task.toml", ""), Path(task.name))
    return GradeJob(keys, _probe_stage(task), workspace, 2 * header.verifier_timeout_sec)


def _driver_stage(grader: tuple[bytes, bool] | None, grader_path: str, jobs: list[dict]) -> Entries:
    """The driver, its jobs and the grader precompiled (here, never run, once per grader text;
    one that does not compile is left to the driver, which compiles it and reports)."""
    stage: Entries = {
        "driver.py": (PROBE_DRIVER.encode(), False),
        "jobs.json": (json.dumps({"grader": grader_path, "jobs": jobs}).encode(), False),
    }
    blob = None if grader is None else code_blob(grader[0], grader_path)
    if blob is not None:
        stage["grader.code"] = (blob, False)
    return stage


def _job(
    tests: str, workspace: str, logs: str, stage: str, pristine: str, oracle: bool, timeout: float
) -> dict:
    return {
        "tests": tests,
        "workspace": workspace,
        "logs": logs,
        "probes": f"{stage}/probes.json",
        "pristine": pristine,
        "results": f"{logs}/probes.json",
        "oracle": oracle,
        "alarm": max(1, math.ceil(timeout)),
    }


def _driver_argv() -> list[str]:
    return ["python3", "-I", "-S", f"{PROBE_STAGE}/driver.py", PROBE_STAGE]


def put_entries(sb: Any, remote: str, entries: Entries, sealed: bool = False) -> None:
    """Put entries under the sandbox folder `remote`: straight into a bubblewrap sandbox's files,
    else through a scratch folder and an upload; with `sealed` (under base.SEALED) read-only to
    the sandbox's commands where the backend can (Sandbox.upload_sealed)."""
    if not entries:
        return
    write = getattr(sb, "write_files", None)
    if write is not None:
        write(remote, entries)
        if sealed:
            sb.seal(remote)
        return
    with scratch("clawloop-verify-put-") as tmp:
        local = write_files(entries, Path(tmp, "put"))
        if sealed:
            sb.upload_sealed(local, remote)
        else:
            sb.upload(local, remote)


def _split_stage(stage: Entries) -> tuple[Entries, Entries]:
    """(the probe stage but its pristine workspace, that workspace: `workspace` and below)."""
    pristine = {k: e for k, e in stage.items() if k == "workspace" or k.startswith("workspace/")}
    return {k: e for k, e in stage.items() if k not in pristine}, pristine


def _graded(sb: Any, ran: Supervised, logs: str, results: str) -> Graded:
    """A job's Graded after a supervised grading: the oracle's grade (failed with the reason when
    the grading did), the probes' results unless nothing it wrote may be read."""
    oracle = Grade(0.0, False, log=ran.log, reason=ran.why) if ran.why else _read_grade(sb, logs)
    if not oracle.log:
        oracle.log = ran.log
    probes = _text(sb, results) if ran.trusted else None
    return Graded(oracle, probes, ran.why if not ran.trusted else _why(sb, logs, ran.why))


def _text(sb: Any, remote: str, cap: int = MAX_REWARD_BYTES) -> str | None:
    """One small file's text; None when it is missing, unreadable or over `cap`."""
    try:
        data = read_capped(sb, remote, cap)
    except (OverflowError, OSError, SandboxError):
        return None
    return None if data is None else data.decode(errors="replace")


def _read_grade(sb: Any, logs: str = VERIFIER_LOGS) -> Grade:
    """taskenv.read_grade without a download per file: reward.json and details.json, else (as
    Harbor reads them) reward.txt, from the folder `logs` (the verifier's)."""
    text = _text(sb, REWARD_FILE.replace(VERIFIER_LOGS, logs, 1))
    if text is None:
        plain = _text(sb, REWARD_TEXT_FILE.replace(VERIFIER_LOGS, logs, 1))
        if plain is not None:
            return parse_reward_text(plain)
    details = _text(sb, DETAILS_FILE.replace(VERIFIER_LOGS, logs, 1), MAX_DETAILS_BYTES)
    return parse_reward(text, details)


_SIGNALS = {
    9: "SIGKILL: a memory or process limit?",
    11: "SIGSEGV",
    14: "SIGALRM: past its alarm",
    24: "SIGXCPU: past its CPU time limit",
    25: "SIGXFSZ: past the file size limit",
}


def _why(sb: Any, logs: str, ended: str) -> str:
    """How a job's grading ended when it left no results: its child's wait status (the driver
    writes grading.status), else `ended` (how the whole grading ended)."""
    text = (_text(sb, f"{logs}/grading.status") or "").strip()
    if not text.isdigit():
        return ended or "the grading driver wrote no results"
    status = int(text)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"its grading was killed by signal {sig}" + (
            f" ({_SIGNALS[sig]})" if sig in _SIGNALS else ""
        )
    return f"its grading exited {os.WEXITSTATUS(status)}"


def grade_in(
    sb: Any, task: TaskFiles, tests: Entries, canonical: bool, timeout: float, prepared: bool
) -> Graded:
    """Grade `task` in the sandbox its reference solution ran in (`prepared`: prepare_grading
    done since), in one supervised command (taskenv.supervised_grading): tests/ sealed in, then
    tests/test.sh (the oracle's reward; its exit counts) and the grading of the pristine
    workspace (no-op) and of each probe over it with the task's own grader, in one process
    (test.sh too, in that process, when it is the canonical one: `canonical`)."""
    stage, pristine = _split_stage(_probe_stage(task))
    where = f"{PRISTINE}/workspace"
    job = _job(TESTS, WORKSPACE, VERIFIER_LOGS, PROBE_STAGE, where, canonical, timeout)
    stage.update(_driver_stage(tests.get("grader.py"), f"{TESTS}/grader.py", [job]))
    sealed = {**tests, **{f"{PROBE_STAGE_NAME}/{k}": e for k, e in stage.items()}}

    def put(sb: Any) -> None:
        put_entries(sb, TESTS, sealed, sealed=True)
        put_entries(sb, PRISTINE, pristine)

    cwd = "/"  # the driver's paths are absolute, and a solve may have locked /workspace
    name = "the grading driver"
    if canonical:
        argv = _driver_argv()
    else:
        cwd, name = WORKSPACE, f"{TESTS}/test.sh"
        # test.sh's own exit is the command's: a verifier that fails is no oracle's pass.
        grade = " ".join(_driver_argv())
        script = f"bash {TESTS}/test.sh >{VERIFIER_LOGS}/test.log 2>&1; s=$?; {grade}; exit $s"
        argv = ["sh", "-c", script]
    # The job's alarm ends it (as in a batch); the wall limit is only a backstop.
    ran = supervised_grading(sb, put, argv, job["alarm"] + 2, cwd, name, prepared=prepared)
    return _graded(sb, ran, job["logs"], job["results"])


def grade_jobs(jobs: list[GradeJob], sandbox: SandboxConfig) -> list[Graded | OSError | ValueError]:
    """Grade several solved tasks (GradeJobs) in one fresh sandbox and one interpreter: task i's
    solved workspace at /workspace/i, its answer key and probe stage at /tests/i, our grader (the
    one their test side holds) once at /tests; each graded as its own sandbox would (the oracle,
    then the no-op and every probe), under its own alarm. A task the exec left without results
    (its grading outlasted its alarm, or one before it did) is graded again alone, so its
    verdict is the one it would get alone."""
    tests = dict(canonical_test_side())
    workspaces: Entries = {}
    pristines: Entries = {}
    specs = []
    for i, job in enumerate(jobs):
        stage, pristine = _split_stage(job.stage)
        for rel, entry in {**job.tests, **stage}.items():
            tests[f"{i}/{rel}"] = entry
        pristines.update({f"{i}/{rel}": entry for rel, entry in pristine.items()})
        workspaces[str(i)] = None
        for rel, entry in job.workspace.items():
            workspaces[f"{i}/{rel}"] = entry
        where = f"{TESTS}/{i}"
        logs = f"{VERIFIER_LOGS}/{i}"
        fresh = f"{PRISTINE}/{i}/workspace"
        specs.append(_job(where, f"{WORKSPACE}/{i}", logs, where, fresh, True, job.timeout))
    stage = _driver_stage(tests["grader.py"], f"{TESTS}/grader.py", specs)
    tests.update({f"{PROBE_STAGE_NAME}/{k}": e for k, e in stage.items()})
    with open_sandbox(sandbox) as sb:
        try:
            put_entries(sb, TESTS, tests, sealed=True)
            put_entries(sb, PRISTINE, pristines)
            put_entries(sb, WORKSPACE, workspaces)
        except (OSError, ValueError):
            if len(jobs) == 1:
                raise
            # One task's files do not fit the batch's layout (a path at the length limit):
            # each is graded alone, and only that one's own setup fails.
            return [_alone(job, sandbox) for job in jobs]
        wall = sum(spec["alarm"] for spec in specs) + 2
        # A fresh sandbox where nothing ran yet: prepared, its files put in above.
        ran = supervised_grading(
            sb, lambda _: None, _driver_argv(), wall, "/", "the grading driver", prepared=True
        )
        out = [_graded(sb, ran, spec["logs"], spec["results"]) for spec in specs]
    if len(jobs) == 1:
        return out
    return [
        g if g.probes is not None else _alone(job, sandbox)
        for g, job in zip(out, jobs, strict=True)
    ]


def _alone(job: GradeJob, sandbox: SandboxConfig) -> Graded | OSError | ValueError:
    try:
        return grade_jobs([job], sandbox)[0]
    except (OSError, ValueError) as exc:
        return exc


def probe_verdict(result: dict[str, Any], what: str) -> tuple[bool, str]:
    reward = result.get("reward", 0.0)
    if "error" in result and not reward:
        return True, f"{what} not accepted (grader: {result['error'][:200]})"
    if isinstance(reward, int | float) and reward >= 1.0:
        return False, f"{what} scores {reward:.3f}: the verifier accepts it"
    return True, f"{what} scores {float(reward):.3f}, below 1.0"
