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

    checks, verdict = verify_task(forged_row, SandboxConfig(backend="bwrap"))
    results = verify_tasks(forged_rows, SandboxConfig(backend="bwrap"))  # [(checks, verdict)]
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clawloop.generators.candidates import ParsedGenerator, parse_meta
from clawloop.generators.contract import BuildResult, ContractError
from clawloop.generators.runner import (
    GeneratorError,
    SolveJob,
    build_in,
    code_blob,
    compiled,
    read_capped,
    run_pieces,
    solve_each,
    solve_then_rebuild,
    stage_generator,
)
from clawloop.generators.verify import probe_driver
from clawloop.generators.verify.derivable import DOMAIN_ORIGIN, GENERATOR, derivable_verdict
from clawloop.generators.verify.leaks import (
    CERTAIN,
    find_leak_signals,
    is_data,
    undefined_decision_fields,  # noqa: F401 (synthesis' tests ask it here)
    unheld_decision_fields,
)
from clawloop.harness.sandbox.base import (
    SOLUTION,
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
    parse_reward,
    parse_reward_text,
    prepare_grading,
)
from clawloop.harness.taskfolder.folder import (
    TaskFolderError,
    pack_dir,
    parse_task_header,
    parse_task_info,
    tar_files,
    write_files,
)


class VerifyConfig(BaseModel):
    """Settings of the verify stage (how its tasks are batched over `verify_tasks` calls); also the
    run YAML's `verify:` section, field for field."""

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(2, ge=1, le=256, description="batches of tasks verified concurrently")
    batch: int = Field(
        8,
        ge=1,
        le=64,
        description="tasks per batch: each task's reference solution runs in a sandbox of its "
        "own, then one grading interpreter grades the batch (the verdicts do not depend on it)",
    )


REBUILD_TIMEOUT_S = 30.0  # the determinism check's second build (forge's build timeout)
PROBE_STAGE_NAME = ".clawloop-probes"
PROBE_STAGE = f"{TESTS}/{PROBE_STAGE_NAME}"
PROBE_RESULTS = f"{VERIFIER_LOGS}/probes.json"

# Runs inside a sandbox after the reference solution, one forked child per job of STAGE/jobs.json
# (generators/verify/probe_driver.py, stdlib only); its source is read from the module imported
# here, so the cache keys follow edits to it.
PROBE_DRIVER = Path(str(probe_driver.__file__)).read_text()

# ---- the checks ----------------------------------------------------------------------------


# A passing CHECKS row whose reason opens with this is a warning: what the check read may be
# wrong (prose read as a field name), so it keeps the task and says what it saw.
WARNING = "warning: "


def warning(reason: str) -> str:
    return WARNING + reason


def is_warning(check: dict[str, Any]) -> bool:
    """A kept task's note: a passing row whose reason is a warning."""
    return bool(check.get("passed")) and str(check.get("reason", "")).startswith(WARNING)


def _check(task_id: str, name: str, passed: bool, reason: str) -> dict[str, Any]:
    """One CHECKS row: only what the check found, no timing, so a re-run writes the same bytes."""
    return {"task_id": task_id, "check": name, "passed": bool(passed), "reason": reason}


Entries = dict[str, tuple[bytes, bool] | None]
_MISSING: Any = object()


class TaskFiles:
    """A task folder's files in memory (folder.tar_files entries): what the host-side checks
    read, so verify never writes the folder it was handed as a tar to disk."""

    def __init__(self, entries: Entries, name: str = "task") -> None:
        self.entries = entries
        self.name = name

    @classmethod
    def of(cls, task: Path | TaskFiles) -> TaskFiles:
        """`task` itself, or the folder at that path read into memory."""
        return task if isinstance(task, TaskFiles) else cls(tar_files(pack_dir(task)), task.name)

    def text(self, rel: str, default: Any = _MISSING) -> str:
        entry = self.entries.get(rel)
        if entry is None:
            if default is _MISSING:
                raise FileNotFoundError(f"{self.name}/{rel}: no such file in the task folder")
            return default
        return entry[0].decode(errors="replace")

    def json(self, rel: str) -> Any:
        return json.loads(self.text(rel))

    @functools.cached_property
    def workspace(self) -> dict[str, str]:
        """The starting workspace's files' texts, by path relative to it, sorted."""
        top = "environment/workspace/"
        return {
            rel[len(top) :]: e[0].decode(errors="replace")
            for rel, e in sorted(self.entries.items())
            if rel.startswith(top) and e is not None
        }


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
            from clawloop.harness.sandbox.backend import open_sandbox

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


def _rebuilt(first: str, rebuild: BuildResult | GeneratorError | None) -> tuple[bool, str]:
    """The determinism check from the rebuild after the reference solution."""
    if rebuild is None:
        return False, "the second build never ran: the reference solution failed first"
    if isinstance(rebuild, GeneratorError):
        return False, f"the second build with the same seed failed ({rebuild.kind}): {rebuild}"
    return _agree(first, rebuild.digest())


def hidden_answer(answer: dict[str, Any], contract: dict[str, Any]) -> dict[str, Any]:
    """The answer values the agent must not be told. Of a state output's predicates, those are
    the ones each lists as "hidden" (what the domain's tools derive): a value the instruction
    gives (a payment's amount) is the task itself, and the guard only restates the records."""
    out = dict(answer)
    for o in contract.get("outputs", []):
        if o.get("format") == "state" and isinstance(answer.get(o.get("path")), dict):
            preds = answer[o["path"]].get("predicates") or []
            out[o["path"]] = [p.get("hidden", []) for p in preds if isinstance(p, dict)]
        if o.get("format") == "report" and isinstance(answer.get(o.get("path")), dict):
            # A report's criteria: the values its text must state are the answer; the fields
            # and keys they name are what the contract's `covers` tells the agent to cover.
            facts = answer[o["path"]].get("facts") or []
            out[o["path"]] = [f.get("value") for f in facts if isinstance(f, dict)]
    return out


def contract_keys(contract: dict[str, Any]) -> frozenset[str]:
    """Every field the contract names as a row key (csv `key`, a schema's `key` at any depth)."""
    out: set[str] = set()

    def walk(v: Any, d: int = 0) -> None:
        if isinstance(v, dict) and d < 12:
            k = v.get("key")
            if isinstance(k, list):
                out.update(str(x) for x in k)
            for x in v.values():
                walk(x, d + 1)
        elif isinstance(v, list) and d < 12:
            for x in v:
                walk(x, d + 1)

    walk(contract.get("outputs", []))
    return frozenset(out)


def non_input_files(files: dict[str, str], texts: dict[str, str]) -> list[str]:
    """Starting files the task never points to: neither the instruction, the contract nor any
    other starting file names the file or a folder it is in (a README, a stray notes file)."""
    told = "\n".join(texts.values())
    out = []
    for rel in files:
        parts = rel.split("/")
        names = [rel] + ["/".join(parts[:i]) + "/" for i in range(1, len(parts))]
        others = "\n".join(t for r, t in files.items() if r != rel)
        if not any(n in told or n in others for n in names):
            out.append(rel)
    return out


def check_leak(task: Path | TaskFiles) -> tuple[bool, str]:
    """Drops a task on a certain leak; a guessed one (find_leak_signals), or any found only in a
    data file the task describes without naming its path (an input, not a note), warns."""
    task = TaskFiles.of(task)
    contract = task.json("tests/contract.json")
    answer = hidden_answer(task.json("tests/answer.json"), contract)
    files = task.workspace
    texts = {
        "instruction.md": task.text("instruction.md"),
        "the contract": json.dumps(contract, ensure_ascii=False),
    }
    strays = non_input_files(files, texts)
    inputs = "\n".join(t for r, t in files.items() if r not in strays)
    data = {f"workspace file {r}" for r in strays if is_data(files[r])}
    # Prose strays before data ones: a value a note and a data file both hold is the note's.
    for r in sorted(strays, key=lambda r: f"workspace file {r}" in data):
        texts[f"workspace file {r}"] = files[r]
    tolerance = contract.get("tolerance", {})
    found = find_leak_signals(answer, texts, inputs, tolerance, contract_keys(contract))
    certain = [what for what, where, how in found if how == CERTAIN and where not in data]
    if certain:
        return False, "answer values visible to the agent: " + "; ".join(certain[:5])
    if found:
        return True, warning(
            "answer values the agent may be told, read from prose or an unnamed data file: "
            + "; ".join(what for what, _, _ in found[:5])
            + "; kept, as the text may mean something else (a rule's parameter, an input). "
            "If it gives the answer away, reword it"
        )
    return True, (
        "no non-trivial answer value, nor a categorical one stated as the answer, appears in the "
        "instruction, the contract" + (" or a file the task never points to" if strays else "")
    )


# ---- ablation: every injected difficulty is load-bearing ----------------------------------------


BUILTIN_FORMATS = frozenset(("json", "csv", "report"))  # the contract outputs built-ins write


@functools.lru_cache(maxsize=256)  # the ablation check and verify_tasks both ask, per task
def builtin_source(code: str) -> bool:
    """Is `code` a built-in generator exactly as synthesis/library.py renders it? Then it is
    this project's own code and the ablation may run it here, outside a sandbox."""
    from clawloop.synthesis.library import RenderError, render_generator

    try:
        m = parse_meta(code).meta
        return code == render_generator(
            m.capability, m.domain, m.multihop, m.dirtiness, m.output_format
        )
    except (ContractError, RenderError, KeyError):
        return False


def ablation_rewards(
    code: str,
    contract: dict[str, Any],
    answer: dict[str, Any],
    workspace: Path | dict[str, str],
    levels: dict[str, tuple[str, int]] | None = None,
) -> dict[str, float]:
    """The reward of the reference solution run with each injection the generator declares
    (its injections()) skipped, on a copy of the starting workspace (a folder, or its files'
    texts). A skip that crashes the solution scores 0: the injection is needed to get any
    answer at all."""
    import shutil

    from clawloop.harness.taskfolder.grader import grade

    ns: dict[str, Any] = {"__name__": "clawloop_ablation"}
    # A built-in's source (see builtin_source), compiled once per text for forge and verify.
    run_pieces(compiled(code.encode()) or (compile(code, "generator.py", "exec"),), ns)
    out: dict[str, float] = {}
    if levels is not None:
        levels.update(ns.get("INJECTION_LEVELS", {}))
    names = ns["injections"]()
    if not names:
        return out
    with scratch("clawloop-ablation-") as tmp:
        ws = Path(tmp, "ws")
        if isinstance(workspace, dict):  # its files in memory: written once, no copy
            write_files({rel: (text.encode(), False) for rel, text in workspace.items()}, ws)
        else:
            shutil.copytree(workspace, ws)
        inputs = _tree_paths(str(ws))
        for name in names:
            try:
                ns["solve"](str(ws), skip=name)
            except Exception:  # noqa: BLE001 (the ablated reader failing is a changed answer)
                out[name] = 0.0
            else:
                out[name] = float(grade(contract, answer, str(ws)).get("reward", 0.0))
            # One copy for every skip: the built-in solve only adds its outputs, so removing
            # what it added restores the starting workspace.
            for p in sorted(_tree_paths(str(ws)) - inputs, reverse=True):
                os.rmdir(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
    return out


def _tree_paths(top: str) -> set[str]:
    """Every path below `top` (folders and files, symlinks not followed)."""
    out = set()
    for folder, dirs, files in os.walk(top):
        out.update(os.path.join(folder, n) for n in dirs + files)
    return out


def check_ablation(task: Path | TaskFiles) -> tuple[bool, str]:
    task = TaskFiles.of(task)
    code = task.text("solution/generator.py", "")
    if not builtin_source(code):
        return True, "not a built-in generator: it declares no injections to ablate"
    contract = task.json("tests/contract.json")
    answer = task.json("tests/answer.json")
    # This runs on the host: only outputs a built-in writes (parsed in plain Python), never a
    # task folder's other kinds (a state output's SQL is run by sqlite, C code).
    odd = sorted({str(o.get("format")) for o in contract.get("outputs", [])} - BUILTIN_FORMATS)
    if odd:
        return False, (
            f"the contract has {', '.join(odd)} outputs, which no built-in generator writes: "
            "not this generator's task"
        )
    levels: dict[str, tuple[str, int]] = {}
    rewards = ablation_rewards(code, contract, answer, task.workspace, levels)
    if not rewards:
        return True, "this knob level injects no difficulty"
    inert = [n for n, r in rewards.items() if r >= 1.0]
    if inert:
        lower: dict[str, int] = {}
        for n in inert:  # the level an inert injection's knob really reaches
            if n in levels:
                knob, level = levels[n]
                lower[knob] = min(lower.get(knob, level), level - 1)
        acts = ", ".join(f"{k} {v}" for k, v in sorted(lower.items()))
        return False, (
            f"the reference solution skipping {', '.join(inert)} still scores 1.0: injected, "
            "but the answer does not depend on it (the task is easier than its knobs say"
            + (f"; it acts as {acts}" if acts else "")
            + ")"
        )
    return True, f"skipping any of {', '.join(rewards)} changes the answer"


def check_decision_fields(task: Path | TaskFiles) -> tuple[bool, str]:
    """Drops a task only when a decision names, as code, a field no output holds; a plain word
    read as a field from prose ("values are sums") may be English: a passing row that warns."""
    task = TaskFiles.of(task)
    contract = task.json("tests/contract.json")
    answer = task.json("tests/answer.json")
    unheld = unheld_decision_fields(contract, answer, task.workspace)
    certain = [f for f, how in unheld.items() if how == CERTAIN]
    if certain:
        return False, (
            f"the decisions define {', '.join(certain[:5])}, which no output holds: a rule for "
            "nothing the agent writes (drop the rule or add the field)"
        )
    if unheld:
        return True, warning(
            f"the decisions may define {', '.join(list(unheld)[:5])}, which no output holds; "
            "kept, as each is a plain word opening a rule (maybe prose) or a step another rule "
            "uses. If it is a field, add it to an output; to be checked, write it as code "
            "(`name`, name = ...)"
        )
    return True, "every field the decisions define is in some output"


def _under(files: Entries, prefix: str) -> Entries:
    """The entries below `prefix` (a folder of the task), relative to it."""
    return {rel[len(prefix) :]: e for rel, e in files.items() if rel.startswith(prefix)}


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


@functools.cache
def canonical_test_side() -> Entries:
    """The test-side files forge writes into every task (tests/test.sh, grader.py,
    state_predicates.py): a task holding exactly these is graded by our one grader module."""
    from clawloop.harness.taskfolder.folder import (
        GRADER_PATH,
        STATE_PREDICATES_PATH,
        TEST_SH,
    )

    return {
        "test.sh": (TEST_SH.encode(), True),
        "grader.py": (GRADER_PATH.read_bytes(), False),
        "state_predicates.py": (STATE_PREDICATES_PATH.read_bytes(), False),
    }


def _canonical(tests: Entries) -> bool:
    return all(
        (tests.get(rel) or (b"",))[0] == entry[0] for rel, entry in canonical_test_side().items()
    )


def _probe_stage(task: TaskFiles) -> Entries:
    """probes.json (harness/taskfolder/probes.py) and the pristine starting workspace."""
    from clawloop.harness.taskfolder.probes import trivial_probes

    probes = trivial_probes(task.json("tests/contract.json"), task.workspace)
    stage: Entries = {"probes.json": (json.dumps(probes).encode(), False), "workspace": None}
    for rel, entry in _under(task.entries, "environment/workspace/").items():
        stage["workspace/" + rel] = entry
    return stage


def _copied_job(sb: Any, remote: str, task: TaskFiles) -> GradeJob | None:
    """The GradeJob of `task` once its reference solution has run in the bubblewrap sandbox
    `sb`, its solved workspace at `remote` copied out; None when that workspace cannot be
    copied as it is (BwrapSandbox.read_tree): then it is graded where it is."""
    workspace = sb.read_tree(remote, MAX_BATCH_WORKSPACE_BYTES, MAX_BATCH_WORKSPACE_ENTRIES)
    if workspace is None:
        return None
    tests = _under(task.entries, "tests/")
    keys = {k: tests[k] for k in ("contract.json", "answer.json") if k in tests}
    header = parse_task_header(task.text("task.toml", ""), Path(task.name))
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


def _job(tests: str, workspace: str, logs: str, stage: str, oracle: bool, timeout: float) -> dict:
    return {
        "tests": tests,
        "workspace": workspace,
        "logs": logs,
        "probes": f"{stage}/probes.json",
        "pristine": f"{stage}/workspace",
        "results": f"{logs}/probes.json",
        "oracle": oracle,
        "alarm": max(1, math.ceil(timeout)),
    }


def _driver_argv() -> list[str]:
    return ["python3", "-I", "-S", f"{PROBE_STAGE}/driver.py", PROBE_STAGE]


def _put(sb: Any, remote: str, entries: Entries) -> None:
    """Put entries under the sandbox folder `remote`: straight into a bubblewrap sandbox's files,
    else through a scratch folder and an upload."""
    if not entries:
        return
    write = getattr(sb, "write_files", None)
    if write is not None:
        write(remote, entries)
        return
    with scratch("clawloop-verify-put-") as tmp:
        sb.upload(write_files(entries, Path(tmp, "put")), remote)


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


def _ended(res: Any) -> str:
    return "timed out" if res.timed_out else f"exited {res.exit_code}: {res.stderr.strip()[-300:]}"


_SIGNALS = {
    9: "SIGKILL: a memory or process limit?",
    11: "SIGSEGV",
    14: "SIGALRM: past its alarm",
    24: "SIGXCPU: past its CPU time limit",
    25: "SIGXFSZ: past the file size limit",
}


def _why(sb: Any, logs: str, res: Any) -> str:
    """How a job's grading ended when it left no results: its child's wait status (the driver
    writes grading.status), else how the whole exec ended."""
    text = (_text(sb, f"{logs}/grading.status") or "").strip()
    if not text.isdigit():
        return _ended(res)
    status = int(text)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"its grading was killed by signal {sig}" + (
            f" ({_SIGNALS[sig]})" if sig in _SIGNALS else ""
        )
    return f"its grading exited {os.WEXITSTATUS(status)}"


def _prepare(sb: Any) -> str:
    """taskenv.prepare_grading; on bubblewrap the two folders are emptied from the host (no exec:
    when an exec returns, nothing it started is alive to race the host)."""
    reset = getattr(sb, "reset_dirs", None)
    if reset is None:
        return prepare_grading(sb)
    if not sb.kill_strays():
        return "processes left running in the sandbox could not be killed; not graded"
    # /tmp and /solution too: a grading in a batch's fresh sandbox finds them empty, and a
    # solve that filled the sandbox's disk there must not fail this one.
    why = reset([TESTS, VERIFIER_LOGS, "/tmp", SOLUTION])
    if why:
        return f"could not reset {TESTS} and {VERIFIER_LOGS} before grading ({why}); not graded"
    return ""


def solve_driver(task: TaskFiles) -> ParsedGenerator | None:
    """The task's generator when solution/solve.sh is the canonical one (it runs that
    generator's solve() on /workspace): then verify runs that solve through the forge driver,
    which can build the generator's seed again in the same interpreter afterwards."""
    from clawloop.harness.taskfolder.folder import SOLVE_SH

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
       taskenv.prepare_grading (its leftover processes killed, /tests and /logs/verifier
       emptied, on bubblewrap /tmp and /solution too);
    2. with `defer`, when the task's test side is ours and the solved workspace is plain files:
       that workspace is copied out as a GradeJob, for grade_jobs to grade with other tasks';
       else, here: tests/ put in, then in one exec tests/test.sh (the oracle's reward) and the
       grading of the pristine workspace (no-op) and of each probe over it with the task's own
       grader, in one process (test.sh too, in that process, when it is the canonical one).
    Raises SandboxError when the sandbox itself fails."""
    from clawloop.harness.sandbox.backend import open_sandbox

    files = task.entries
    header = parse_task_header(task.text("task.toml", ""), Path(task.name))
    agent_timeout, timeout = header.agent_timeout_sec, 2 * header.verifier_timeout_sec
    out: dict[str, tuple[bool, str]] = {}
    tests = _under(files, "tests/")
    canonical = tests.get("test.sh") == canonical_test_side()["test.sh"]
    gen = solve_driver(task)
    with open_sandbox(sandbox) as sb:
        _put(sb, WORKSPACE, _under(files, "environment/workspace/"))
        _put(sb, SOLUTION, _under(files, "solution/"))
        if gen is not None:
            stage_generator(sb, task.text("solution/generator.py"))
            seed = None if rebuild is None else rebuild[0]
            solved = solve_then_rebuild(
                sb, gen, WORKSPACE, agent_timeout, seed, build_timeout=REBUILD_TIMEOUT_S
            )
            solve_error = solved.error
            if rebuild is not None:
                out["determinism"] = _rebuilt(rebuild[1], solved.rebuild)
        else:
            res = sb.exec(["bash", f"{SOLUTION}/solve.sh"], timeout=agent_timeout, cwd=WORKSPACE)
            why = "timed out" if res.timed_out else f"exited {res.exit_code}"
            tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-4:])
            solve_error = None if res.ok else f"{why}: {tail}".strip()
        # solve() is LLM-written: whatever it left running dies before the answer key and
        # the verifier arrive, and nothing it planted in /tests or /logs/verifier counts.
        unfit = _prepare(sb)
        if unfit:
            return SolveStep(_unfit(unfit), final=True)
        if defer and getattr(sb, "read_tree", None) is not None and _canonical(tests):
            job = _copied_job(sb, WORKSPACE, task)
            if job is not None:
                return SolveStep(out, solve_error, job=job)
        stage = _probe_stage(task)
        job = _job(TESTS, WORKSPACE, VERIFIER_LOGS, PROBE_STAGE, canonical, timeout)
        stage.update(_driver_stage(tests.get("grader.py"), f"{TESTS}/grader.py", [job]))
        _put(sb, TESTS, {**tests, **{f"{PROBE_STAGE_NAME}/{k}": e for k, e in stage.items()}})
        cwd = "/"  # the driver's paths are absolute, and a solve may have locked /workspace
        if canonical:
            argv = _driver_argv()
        else:
            cwd = WORKSPACE
            # `sh -c`, not a string (which runs under `bash -lc`): a login shell's profile
            # costs a few ms per task and nothing here needs it.
            grade = " ".join(_driver_argv())
            argv = ["sh", "-c", f"bash {TESTS}/test.sh >{VERIFIER_LOGS}/test.log 2>&1; {grade}"]
        # The job's alarm ends it (as in a batch); the wall limit is only a backstop.
        res = sb.exec(argv, timeout=job["alarm"] + 2, cwd=cwd)
        graded = Graded(_read_grade(sb), _text(sb, job["results"]), _why(sb, job["logs"], res))
    return SolveStep(out, solve_error, graded=graded)


def grade_jobs(jobs: list[GradeJob], sandbox: SandboxConfig) -> list[Graded | OSError | ValueError]:
    """Grade several solved tasks (GradeJobs) in one fresh sandbox and one interpreter: task i's
    solved workspace at /workspace/i, its answer key and probe stage at /tests/i, our grader (the
    one their test side holds) once at /tests; each graded as its own sandbox would (the oracle,
    then the no-op and every probe), under its own alarm. A task the exec left without results
    (its grading outlasted its alarm, or one before it did) is graded again alone, so its
    verdict is the one it would get alone."""
    from clawloop.harness.sandbox.backend import open_sandbox

    tests = dict(canonical_test_side())
    workspaces: Entries = {}
    specs = []
    for i, job in enumerate(jobs):
        for rel, entry in {**job.tests, **job.stage}.items():
            tests[f"{i}/{rel}"] = entry
        workspaces[str(i)] = None
        for rel, entry in job.workspace.items():
            workspaces[f"{i}/{rel}"] = entry
        where = f"{TESTS}/{i}"
        logs = f"{VERIFIER_LOGS}/{i}"
        specs.append(_job(where, f"{WORKSPACE}/{i}", logs, where, True, job.timeout))
    stage = _driver_stage(tests["grader.py"], f"{TESTS}/grader.py", specs)
    tests.update({f"{PROBE_STAGE_NAME}/{k}": e for k, e in stage.items()})
    with open_sandbox(sandbox) as sb:
        try:
            _put(sb, TESTS, tests)
            _put(sb, WORKSPACE, workspaces)
        except (OSError, ValueError):
            if len(jobs) == 1:
                raise
            # One task's files do not fit the batch's layout (a path at the length limit):
            # each is graded alone, and only that one's own setup fails.
            return [_alone(job, sandbox) for job in jobs]
        wall = sum(spec["alarm"] for spec in specs) + 2
        res = sb.exec(_driver_argv(), timeout=wall, cwd="/")
        out = [
            Graded(
                _read_grade(sb, spec["logs"]),
                _text(sb, spec["results"]),
                _why(sb, spec["logs"], res),
            )
            for spec in specs
        ]
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
    ok, reason = _probe_verdict(results.pop("noop", {}), "the untouched workspace")
    out["noop"] = (ok, reason if ok else "false positive: " + reason)
    copies = {n: r for n, r in results.items() if n.startswith("trivial:copy:")}
    for name, result in sorted(results.items()):
        if name not in copies:
            out[name] = _probe_verdict(result, f"probe {name.split(':', 1)[1]!r}")
    passing = [
        n.removeprefix("trivial:copy:")
        for n, r in sorted(copies.items())
        if not _probe_verdict(r, "")[0]
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


def _probe_verdict(result: dict[str, Any], what: str) -> tuple[bool, str]:
    reward = result.get("reward", 0.0)
    if "error" in result and not reward:
        return True, f"{what} not accepted (grader: {result['error'][:200]})"
    if isinstance(reward, int | float) and reward >= 1.0:
        return False, f"{what} scores {reward:.3f}: the verifier accepts it"
    return True, f"{what} scores {float(reward):.3f}, below 1.0"


def _rebuild_of(row: dict[str, Any], task: TaskFiles) -> tuple[int, str] | None:
    """(seed, forge's digest) when the determinism rebuild can follow the reference solution:
    forge recorded one digest and the task's solve.sh runs its generator."""
    first, second = row.get("task_sha256") or "", row.get("rebuild_sha256") or ""
    if not first or second or solve_driver(task) is None:
        return None
    try:
        return parse_task_info(task.text("task.toml", ""), task.name).seed, first
    except (TaskFolderError, FileNotFoundError):
        return None


@dataclasses.dataclass
class _Verifying:
    """A task between verify's two halves: the host checks' rows and its sandbox's first exec."""

    row: dict[str, Any]
    task: TaskFiles | None
    checks: list[dict[str, Any]]
    verdict: dict[str, Any]
    rebuild: tuple[int, str] | None = None
    solved: SolveStep | None = None
    error: str = ""  # why the sandbox part could not run


def check_derivable(task: Path | TaskFiles) -> tuple[bool, str] | None:
    """Drops a domain task whose reference writes a value the agent cannot know (neither stated
    in instruction.md nor read from a record it names), the value named; None (no row) for a
    task of another origin, which has no reference plan to read."""
    task = TaskFiles.of(task)
    try:
        origin = parse_task_info(task.text("task.toml"), Path(task.name)).origin
    except (OSError, TaskFolderError):  # not a clawloop task.toml: no origin, so not a domain's
        return None
    if not origin.startswith(DOMAIN_ORIGIN):
        return None
    return derivable_verdict(
        task.text(GENERATOR), task.json("tests/answer.json"), task.text("instruction.md")
    )


# The checks verify runs on the host, in the order of their rows. Before them: forge (a row
# without a task folder) and unpack fail alone; determinism, when the solve cannot rebuild
# (_rebuild_of is None: check_determinism), runs first (else it comes from the solve and its row
# is moved first). After them, from the sandbox (sandbox_verdicts): oracle, noop, trivial:*,
# answer_file.
# A check that returns None does not apply to the task: it writes no row.
HOST_CHECKS: tuple[tuple[str, Callable[[TaskFiles], tuple[bool, str] | None]], ...] = (
    ("leak", check_leak),
    ("decision_fields", check_decision_fields),
    ("ablation", check_ablation),
    ("derivable", check_derivable),
)


def _start(forged_row: dict[str, Any], sandbox: SandboxConfig) -> _Verifying:
    task_id = str(forged_row.get("task_id", ""))
    verdict = {
        "task_id": task_id,
        "kept": False,
        "reason": "",
        "capability": forged_row.get("capability", ""),
        "domain": forged_row.get("domain", ""),
        "split": forged_row.get("split", ""),
    }
    state = _Verifying(forged_row, None, [], verdict)
    if forged_row.get("status") != "ok" or not forged_row.get("task_tar"):
        err = forged_row.get("error") or "no task folder"
        state.checks.append(_check(task_id, "forge", False, f"forge failed: {err}"))
        verdict["reason"] = f"forge: {err}"
        return state
    try:
        # Read once, into memory: the host-side checks read it there and the sandbox gets it
        # from there (no folder on disk in between).
        task = TaskFiles(tar_files(forged_row["task_tar"]), task_id or "task")
    except TaskFolderError as exc:
        state.checks.append(_check(task_id, "unpack", False, str(exc)))
        verdict["reason"] = f"unpack: {exc}"
        return state
    state.task = task
    # Forge builds once: the second build runs after the reference solution, in its interpreter
    # (check_determinism rebuilds in a sandbox of its own when that solution is not the
    # generator's, or compares the digests of a row that has two).
    state.rebuild = _rebuild_of(forged_row, task)
    if state.rebuild is None:
        _run(state, "determinism", lambda: check_determinism(forged_row, task, sandbox))
    for name, check in HOST_CHECKS:
        _run(state, name, functools.partial(check, task))
    return state


def _task_of(state: _Verifying) -> TaskFiles:
    """The task folder of a task that reached the sandbox checks (only unpacked ones do)."""
    if state.task is None:
        raise RuntimeError(
            f"verify: task {state.verdict['task_id']!r} reached the sandbox checks without an "
            "unpacked task folder (a bug in verify's orchestration: only unpacked tasks go on)"
        )
    return state.task


def _solve_alone(state: _Verifying, sandbox: SandboxConfig, defer: bool) -> None:
    task = _task_of(state)
    try:
        state.solved = solve_in_sandbox(task, sandbox, state.rebuild, defer)
    except (OSError, ValueError, ImportError) as exc:
        state.error = f"could not run: {type(exc).__name__}: {exc}"


def _together(state: _Verifying) -> bool:
    """Can the task's reference solution run in one interpreter with other tasks'? Only a
    built-in generator's (this project's code) with the canonical solve.sh and test side."""
    task = state.task
    return (
        task is not None
        and solve_driver(task) is not None
        and _canonical(_under(task.entries, "tests/"))
        and builtin_source(task.text("solution/generator.py", ""))
    )


def _solve_together(states: list[_Verifying], sandbox: SandboxConfig) -> None:
    """The reference solutions (and determinism rebuilds) of built-in tasks in one fresh
    sandbox and one interpreter (runner.solve_each), task i's starting workspace at
    /workspace/i; each solved workspace is copied out as its GradeJob. A task this leaves
    without one (a failed solve or rebuild, a job the interpreter never reached, a workspace
    that cannot be copied) is left for solve_in_sandbox, alone."""
    from clawloop.harness.sandbox.backend import open_sandbox

    box = open_sandbox(sandbox)  # not started yet
    if getattr(box, "read_tree", None) is None:
        return  # a backend without direct file access (docker): each alone
    jobs, files = [], {}
    for i, state in enumerate(states):
        task = _task_of(state)
        header = parse_task_header(task.text("task.toml", ""), Path(task.name))
        gen = solve_driver(task)
        if gen is None:
            raise RuntimeError(
                f"verify: task {task.name!r} was batched with built-in solves but its "
                "solution/solve.sh is not the canonical one (a bug in verify's _together)"
            )
        files[str(i)] = None
        for rel, entry in _under(task.entries, "environment/workspace/").items():
            files[f"{i}/{rel}"] = entry
        seed = None if state.rebuild is None else state.rebuild[0]
        jobs.append(
            SolveJob(
                gen,
                task.text("solution/generator.py"),
                f"{WORKSPACE}/{i}",
                header.agent_timeout_sec,
                seed,
                REBUILD_TIMEOUT_S,
            )
        )
    with box as sb:
        _put(sb, WORKSPACE, files)
        solved = solve_each(sb, jobs)
        for i, (state, done) in enumerate(zip(states, solved, strict=True)):
            if done is None:
                continue
            job = _copied_job(sb, f"{WORKSPACE}/{i}", _task_of(state))
            if job is None:
                continue
            out = (
                {}
                if state.rebuild is None
                else {"determinism": _rebuilt(state.rebuild[1], done.rebuild)}
            )
            state.solved = SolveStep(out, None, job=job)


def _run(state: _Verifying, name: str, fn: Any) -> None:
    try:
        result = fn()
        if result is None:  # the check does not apply to this task: no row
            return
        ok, reason = result
    except (OSError, ValueError) as exc:  # a SandboxError is the engine's: it propagates
        ok, reason = False, f"could not run: {type(exc).__name__}: {exc}"
    state.checks.append(_check(state.verdict["task_id"], name, ok, reason))


def _finish(state: _Verifying, sandbox: SandboxConfig) -> tuple[list[dict], dict[str, Any]]:
    checks, verdict, task_id = state.checks, state.verdict, state.verdict["task_id"]
    if state.task is None:
        return checks, verdict
    results: dict[str, tuple[bool, str]] = {}
    if state.error:
        checks.append(_check(task_id, "oracle", False, state.error))
    elif state.solved is not None:
        try:
            results = sandbox_verdicts(state.solved)
        except (OSError, ValueError) as exc:
            checks.append(
                _check(task_id, "oracle", False, f"could not run: {type(exc).__name__}: {exc}")
            )
    if state.rebuild is not None:
        if "determinism" not in results:
            row, task = state.row, state.task
            _run(state, "determinism", lambda: check_determinism(row, task, sandbox))
        else:
            checks.append(_check(task_id, "determinism", *results.pop("determinism")))
        checks.insert(0, checks.pop())  # the determinism row first, as always
    for name, (ok, reason) in results.items():
        checks.append(_check(task_id, name, ok, reason))
    failed = [c for c in checks if not c["passed"]]
    verdict["kept"] = not failed
    verdict["reason"] = (
        f"{failed[0]['check']}: {failed[0]['reason']}" if failed else "all checks passed"
    )
    return checks, verdict


def verify_tasks(
    forged_rows: list[dict[str, Any]], sandbox: SandboxConfig
) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """verify_task for each row, the same rows it would give, batched: the built-in tasks'
    reference solutions run in one sandboxed interpreter (_solve_together), every other task's
    in a sandbox of its own, and then one sandbox and one interpreter grade every task whose
    test side is ours (grade_jobs) instead of one each. A fault of the sandbox itself raises
    SandboxError (retry the rows)."""
    batch = len(forged_rows) > 1
    states = [_start(row, sandbox) for row in forged_rows]
    together = [s for s in states if batch and _together(s)]
    if len(together) > 1:
        # What this leaves unsolved is solved alone below, and a fault reported there.
        with contextlib.suppress(OSError, ValueError, ImportError):
            _solve_together(together, sandbox)
    for s in states:
        if s.task is not None and s.solved is None:
            _solve_alone(s, sandbox, defer=batch)
    waiting = [s for s in states if s.solved is not None and s.solved.job is not None]
    if waiting:
        try:
            graded = grade_jobs([s.solved.job for s in waiting], sandbox)  # type: ignore[union-attr]
        except (OSError, ValueError) as exc:
            for s in waiting:
                s.error = f"could not run: {type(exc).__name__}: {exc}"
        else:
            for s, g in zip(waiting, graded, strict=True):
                if isinstance(g, Graded):
                    s.solved.graded = g  # type: ignore[union-attr]
                else:
                    s.error = f"could not run: {type(g).__name__}: {g}"
    return [_finish(s, sandbox) for s in states]


def verify_task(
    forged_row: dict[str, Any], sandbox: SandboxConfig
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """CHECKS rows and one VERDICTS row for a FORGED row; the verdict names the first failed
    check. A fault of the sandbox itself raises SandboxError: it says nothing about the task, so
    the caller retries it rather than record it as a verdict."""
    return verify_tasks([forged_row], sandbox)[0]
