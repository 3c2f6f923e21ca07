"""The checks that run in a sandbox: the reference solution on the starting workspace (and after
it, in its interpreter, the determinism rebuild), then its grading (grading.py), from which
`sandbox_verdicts` reads oracle, noop, trivial:* and answer_file. `check_determinism` rebuilds in
a sandbox of its own when the solution cannot."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from clawloop.generators.candidates import ParsedGenerator, parse_meta
from clawloop.generators.contract import BuildResult, ContractError
from clawloop.generators.runner import (
    GeneratorError,
    build_in,
    solve_then_rebuild,
    stage_generator,
)
from clawloop.generators.verify.grading import (
    Graded,
    GradeJob,
    canonical_test_side,
    copied_job,
    grade_in,
    is_canonical,
    probe_verdict,
    put_entries,
)
from clawloop.generators.verify.taskfiles import TaskFiles, under
from clawloop.harness.sandbox.backend import open_sandbox
from clawloop.harness.sandbox.base import (
    SOLUTION,
    WORKSPACE,
    SandboxConfig,
)
from clawloop.harness.taskenv import (
    prepare_grading,
)
from clawloop.harness.taskfolder.folder import (
    SOLVE_SH,
    TaskFolderError,
    parse_harbor_task_info,
    parse_task_info,
)

REBUILD_TIMEOUT_S = 30.0  # the determinism check's second build (forge's build timeout)


def check_determinism(
    row: dict[str, Any], task: Path | TaskFiles, sandbox: SandboxConfig
) -> tuple[bool, str]:
    """Compare forge's two digests; a row without a second digest (imported) is rebuilt here."""
    first, second = row.get("task_sha256") or "", row.get("rebuild_sha256") or ""
    if not first:
        return False, "no build digest recorded for this task; cannot check determinism"
    if not second:
        task = TaskFiles.of(task)
        code = task.text("solution/generator.py", None)
        if code is None:
            return False, "no second build and no solution/generator.py to rebuild from"
        try:
            info = parse_task_info(task.text("task.toml", ""), task.name)
            gen = parse_meta(code)
            with open_sandbox(sandbox) as sb:
                stage_generator(sb, code)
                result, _ = build_in(sb, gen, info.seed, REBUILD_TIMEOUT_S, "rebuild.json")
            second = result.digest()
        except (GeneratorError, TaskFolderError) as exc:
            return False, f"rebuild failed: {exc}"
    return _agree(first, second)


def _agree(first: str, second: str) -> tuple[bool, str]:
    if first != second:
        return False, f"two builds with one seed differ (sha256 {first[:12]} vs {second[:12]})"
    return True, f"two builds with one seed agree (sha256 {first[:12]})"


def rebuilt_verdict(first: str, rebuild: BuildResult | GeneratorError | None) -> tuple[bool, str]:
    """The determinism check from the rebuild after the reference solution."""
    if rebuild is None:
        return False, "the second build never ran: the reference solution failed first"
    if isinstance(rebuild, GeneratorError):
        return False, f"the second build with the same seed failed ({rebuild.kind}): {rebuild}"
    return _agree(first, rebuild.digest())


@dataclasses.dataclass
class SolveStep:
    """A task after its sandbox's first exec: `out` holds the determinism verdict (or, with
    `final`, every sandbox verdict: the sandbox could not be graded in); then either its
    grading (`graded`, in its own sandbox) or the job that grades it in a batch's."""

    out: dict[str, tuple[bool, str]]
    solve_error: str | None = None
    final: bool = False
    graded: Graded | None = None
    job: GradeJob | None = None


def solve_driver(task: TaskFiles) -> ParsedGenerator | None:
    """The task's generator when solution/solve.sh is the canonical one (it runs that
    generator's solve() on /workspace): then verify runs that solve through the forge driver,
    which can build the generator's seed again in the same interpreter afterwards."""
    if task.text("solution/solve.sh", None) != SOLVE_SH:
        return None
    try:
        return parse_meta(task.text("solution/generator.py", ""))
    except ContractError:
        return None


def solve_in_sandbox(
    task: TaskFiles, sandbox: SandboxConfig, rebuild: tuple[int, str] | None, defer: bool
) -> SolveStep:
    """The sandbox part of verify, in one fresh sandbox:
    1. the reference solution on the starting workspace (the answer key is not in the sandbox
       yet): the canonical solve.sh's solve() through the forge driver, which with `rebuild`
       (seed, forge's digest) then builds that seed again (the determinism check: another
       interpreter than forge's, so another hash seed), else `bash solution/solve.sh`; then
       taskenv.prepare_grading (its leftover processes killed; /tests, /logs/verifier, the
       grading kits, /tmp and /solution emptied), as before a rollout's grading;
    2. with `defer`, when the task's test side is ours and the solved workspace is plain files:
       that workspace is copied out as a GradeJob, for grade_jobs to grade with other tasks';
       else, here (grading.grade_in, the rollouts' grading path: sealed tests, the grading
       supervisor): tests/test.sh (the oracle's reward) and the grading of the pristine
       workspace (no-op) and of each probe over it with the task's own grader, in one process
       (test.sh too, in that process, when it is the canonical one).
    Raises SandboxError when the sandbox itself fails."""
    files = task.entries
    header = parse_harbor_task_info(task.text("task.toml", ""), Path(task.name))
    agent_timeout, timeout = header.agent_timeout_sec, 2 * header.verifier_timeout_sec
    out: dict[str, tuple[bool, str]] = {}
    tests = under(files, "tests/")
    canonical = tests.get("test.sh") == canonical_test_side()["test.sh"]
    gen = solve_driver(task)
    with open_sandbox(sandbox) as sb:
        put_entries(sb, WORKSPACE, under(files, "environment/workspace/"))
        put_entries(sb, SOLUTION, under(files, "solution/"))
        if gen is not None:
            stage_generator(sb, task.text("solution/generator.py"))
            seed = None if rebuild is None else rebuild[0]
            solved = solve_then_rebuild(
                sb, gen, WORKSPACE, agent_timeout, seed, build_timeout=REBUILD_TIMEOUT_S
            )
            solve_error = solved.error
            if rebuild is not None:
                out["determinism"] = rebuilt_verdict(rebuild[1], solved.rebuild)
        else:
            res = sb.exec(["bash", f"{SOLUTION}/solve.sh"], timeout=agent_timeout, cwd=WORKSPACE)
            why = "timed out" if res.timed_out else f"exited {res.exit_code}"
            tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-4:])
            solve_error = None if res.ok else f"{why}: {tail}".strip()
        # solve() is LLM-written: whatever it left running dies before the answer key and
        # the verifier arrive, and nothing it planted in /tests or /logs/verifier counts.
        unfit = prepare_grading(sb)
        if unfit:
            return SolveStep(_unfit(unfit), final=True)
        if defer and getattr(sb, "read_tree", None) is not None and is_canonical(tests):
            job = copied_job(sb, WORKSPACE, task)
            if job is not None:
                return SolveStep(out, solve_error, job=job)
        graded = grade_in(sb, task, tests, canonical, timeout, prepared=True)
    return SolveStep(out, solve_error, graded=graded)


def sandbox_verdicts(solved: SolveStep) -> dict[str, tuple[bool, str]]:
    """Every sandbox check's verdict (determinism, oracle, no-op, probes, answer file) from a
    task's solve and grading; a grading that left no results fails the no-op check, saying how
    it ended."""
    if solved.final or solved.graded is None:
        return solved.out
    out = dict(solved.out)
    graded = solved.graded
    if solved.solve_error is not None:
        out["oracle"] = (False, f"solution/solve.sh {solved.solve_error}")
    elif graded.oracle.passed:
        out["oracle"] = (True, "reference solution scores 1.0")
    else:
        oracle = graded.oracle
        out["oracle"] = (False, f"reference solution scores {oracle.reward:.3f}: {oracle.reason}")
    if graded.probes is None:  # alone too: its own grading ended early (a limit, an alarm)
        out["noop"] = (False, f"grading the no-op and probes produced no results ({graded.why})")
        return out
    results = json.loads(graded.probes)
    ok, reason = probe_verdict(results.pop("noop", {}), "the untouched workspace")
    out["noop"] = (ok, reason if ok else "false positive: " + reason)
    copies = {n: r for n, r in results.items() if n.startswith("trivial:copy:")}
    for name, result in sorted(results.items()):
        if name not in copies:
            out[name] = probe_verdict(result, f"probe {name.split(':', 1)[1]!r}")
    passing = [
        n.removeprefix("trivial:copy:")
        for n, r in sorted(copies.items())
        if not probe_verdict(r, "")[0]
    ]
    out["answer_file"] = (
        (
            False,
            f"copying {passing[0]} to the outputs passes the verifier: an answer in the workspace",
        )
        if passing
        else (True, f"none of the {len(copies)} starting files passes as the outputs")
    )
    return out


def run_sandbox_checks(
    task: Path | TaskFiles, sandbox: SandboxConfig, rebuild: tuple[int, str] | None = None
) -> dict[str, tuple[bool, str]]:
    """Oracle, no-op and trivial probes (and, with `rebuild`, determinism) in one fresh sandbox
    with two execs (solve_in_sandbox). Raises SandboxError when the sandbox itself fails."""
    return sandbox_verdicts(solve_in_sandbox(TaskFiles.of(task), sandbox, rebuild, defer=False))


def _unfit(reason: str) -> dict[str, tuple[bool, str]]:
    """Every sandbox check failed for one reason: the sandbox could not be graded in."""
    return {"oracle": (False, reason), "noop": (False, reason)}
