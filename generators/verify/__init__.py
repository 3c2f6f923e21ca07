"""Agent-free verification of a forged task: every check is a row with its reason.

Checks (storage.schemas.CHECKS `check` names):
    determinism      two builds with one seed, in two interpreters, gave the same task digest
    leak             no non-trivial answer value appears in instruction.md or the contract (a
                     categorical one read from prose, or one in an unnamed data file, warns)
    decision_fields  every field a decision defines as code ("x = ...", "`x` is", "top_x counts")
                     is in some output; a plain word read from prose ("values are") only warns
    ablation         a built-in's reference solution skipping any one injected difficulty fails
    derivable        a domain task's (origin domain:...) every value its reference plan writes is
                     stated in instruction.md or read from a record it names (no row otherwise)
    oracle           solution/solve.sh then tests/test.sh in a fresh sandbox gives reward 1.0
    noop             tests/test.sh on the untouched workspace must not pass (else a false positive)
    trivial:<probe>  each probe from harness/taskfolder/probes.py (empty, copied, constant outputs) fails
    answer_file      no starting file, copied verbatim to the outputs, passes (an answer left in it)

A task is kept only if every check passes. A check that reads prose drops only on a certain
signal; on a guess its row passes with a reason opening "warning: " (is_warning). Sandbox
starts and interpreter starts dominate the cost, so the sandbox checks use as few of each as
their isolation allows:
  - solve: the reference solution runs before the answer key is in the sandbox, and in its
    interpreter afterwards the generator builds the seed again (determinism: another interpreter
    than forge's, so another hash seed). Each task's in a sandbox of its own (solve_in_sandbox),
    except built-in generators' (this project's code, not an LLM's): a batch of those is solved
    in one sandboxed interpreter (runner.solve_each), each under its own alarms.
  - grade: one Python process runs the canonical test.sh's grading of the solved workspace, then
    grades the pristine workspace (no-op) and every probe written over it. With verify_tasks,
    every task of a batch whose test side is ours is graded by one such process in one fresh
    sandbox (grade_jobs), its solved workspace copied there; any other in its own sandbox, after
    taskenv.prepare_grading (on bubblewrap: the same, from the host) has killed what solve.sh
    left running and emptied /tests and /logs/verifier, so a hostile solve() cannot rewrite its
    own verdict.
A task that falls out of a batch (a job past its alarm, a failed built-in solve, a solved
workspace holding links) is run again alone, so each task's rows are the ones verify_task gives
it alone. On bubblewrap the task's files go straight into the sandbox's folders (no tar).

Where each part lives: taskfiles.py (the task's files in memory, the CHECKS row), host_checks.py
(leak, decision_fields, ablation, derivable), sandboxed.py (the reference solution, determinism,
the sandbox verdicts), grading.py (the grading driver, one task or a batch in one sandbox),
orchestrate.py (verify_task / verify_tasks, VerifyConfig); leaks.py and derivable.py are the
signals the host checks read.

    checks, verdict = verify_task(forged_row, SandboxConfig(backend="bwrap"))
    results = verify_tasks(forged_rows, SandboxConfig(backend="bwrap"))  # [(checks, verdict)]
"""

from clawloop.generators.verify.grading import PROBE_DRIVER, GradeJob, grade_jobs
from clawloop.generators.verify.host_checks import (
    HOST_CHECKS,
    ablation_rewards,
    builtin_source,
    check_ablation,
    check_derivable,
    check_leak,
    hidden_answer,
    non_input_files,
)
from clawloop.generators.verify.leaks import undefined_decision_fields
from clawloop.generators.verify.orchestrate import VerifyConfig, verify_task, verify_tasks
from clawloop.generators.verify.sandboxed import solve_in_sandbox
from clawloop.generators.verify.taskfiles import TaskFiles, is_warning

__all__ = [
    "HOST_CHECKS",
    "PROBE_DRIVER",
    "GradeJob",
    "TaskFiles",
    "VerifyConfig",
    "ablation_rewards",
    "builtin_source",
    "check_ablation",
    "check_derivable",
    "check_leak",
    "grade_jobs",
    "hidden_answer",
    "is_warning",
    "non_input_files",
    "solve_in_sandbox",
    "undefined_decision_fields",
    "verify_task",
    "verify_tasks",
]
