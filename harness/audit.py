"""Audit a task data set without reference solutions: what a task's own verifier gives for work
nobody did, and what its instruction gives away.

Per task (ClawGym folders; Harbor folders with the no-op only, since a foreign Harbor task names
no outputs to probe): the verifier's score for the untouched workspace (noop), for each trivial
probe (clawgym.probes: empty outputs, the query echoed, a starting file copied), and flags:

- `noop_passes` / `noop_scores`: the untouched workspace passes / scores above 0;
- `probe_passes:<name>` / `probe_scores:<name>`: a probe passes / scores above the no-op;
- `answer_file:<path>`: a starting file named like an answer key (expected, answer, solution,
  golden, ...): an agent may copy it instead of working;
- `instruction_leak:<value>`: a value the checker compares against (a literal in a comparison
  or in an `expected*` assignment of check.py) spelled out in the instruction. A guess: a flag,
  never a drop.

Every score is the task's own verifier's (harness.taskenv.run_tests over its Harbor folder:
`grade_files`); `reference_score` runs a ClawGym task's reward.sh by itself, as ClawGym does, to
check that our grading equals the task's own.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from clawloop.harness.sandbox.base import WORKSPACE
from clawloop.harness.sandbox.bwrap_layout import find_rootfs, system_binds
from clawloop.harness.taskenv import open_task, run_tests
from clawloop.harness.taskfolder.clawgym import (
    DEFAULT_THRESHOLD,
    ClawGymTask,
    is_clawgym_folder,
    probes,
    read_task,
    write_files,
    write_harbor_folder,
)
from clawloop.harness.taskfolder.foreign import prepare_task

ANSWER_NAME = re.compile(
    r"(expected|answer|solution|golden|gold|reference_output|ground_?truth)", re.I
)


class AuditConfig(BaseModel):
    """The settings of an audit of many tasks (`clawloop audit`'s flags are its fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(DEFAULT_THRESHOLD, description="ClawGym pass threshold")
    sample: int = Field(0, description="audit this many tasks, drawn at random")
    seed: int = Field(0, description="seed of --sample")
    workers: int = Field(2, description="tasks audited at once")
    backend: Literal["auto", "bwrap", "docker"] = Field("auto", description="sandbox backend")


@dataclass
class TaskAudit:
    """One task's audit: scores by its own verifier, and flags."""

    task_id: str
    path: str
    noop: float
    probes: dict[str, float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    error: str = ""  # why the task could not be audited ("" when it was)

    def as_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "noop": self.noop, "probes": self.probes,
                "flags": self.flags}  # fmt: skip


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float):
        return None if isinstance(node.value, bool) else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand)
        return -inner if isinstance(inner, int | float) else None
    return None


def compared_values(check_py: str) -> set[str]:
    """Literals the checker compares outputs against, as text: the constants of `==`/`!=`/`in`
    comparisons and of `expected*`/`EXPECTED*` assignments (inside lists, dicts, sets too)."""
    try:
        tree = ast.parse(check_py)
    except SyntaxError:
        return set()
    found: set[Any] = set()

    def collect(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if (v := _literal(sub)) is not None:
                found.add(v)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Eq | ast.NotEq | ast.In) for op in node.ops
        ):
            for side in [node.left, *node.comparators]:
                if (v := _literal(side)) is not None:
                    found.add(v)
                elif isinstance(side, ast.List | ast.Tuple | ast.Set):
                    collect(side)
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id.lower().startswith("expected") for t in targets):
            collect(node.value)  # type: ignore[attr-defined]
    return {str(v) for v in found}


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?$")
_PATHLIKE = re.compile(r"/|\.[A-Za-z]{1,5}$")


def answer_like(text: str) -> bool:
    """Whether a compared literal looks like a computed answer rather than part of the spec (a
    path, a field name, a phrase to use, a date the query sets): a number with a fraction, an
    integer of 3+ digits that is no year, or a short string holding such a number."""
    if not text or not text[0].isalnum() or _PATHLIKE.search(text) or _DATE.match(text):
        return False
    for token in re.findall(r"-?\d+(?:\.\d+)?", text):
        if "." in token:
            return True
        digits = token.lstrip("-")
        if len(digits) >= 3 and not (len(digits) == 4 and 1900 <= int(digits) <= 2100):
            return True
    return False


def leaks(values: set[str], instruction: str, inputs_text: str) -> list[str]:
    """The answer-like compared values (answer_like) the instruction spells out that the
    starting files do not hold (a value in the inputs is data the agent reads); longest first."""
    out = []
    for v in values:
        text = v.strip()
        if len(text) > 40 or not answer_like(text) or text in inputs_text:
            continue
        if re.search(rf"(?<![\w.]){re.escape(text)}(?![\w])", instruction):
            out.append(text)
    return sorted(out, key=lambda s: (-len(s), s))


def _inputs_text(task: ClawGymTask) -> str:
    root = task.task_dir / "input_files"
    parts = []
    for p in sorted(root.rglob("*")) if root.is_dir() else []:
        if p.is_file() and p.stat().st_size <= 1 << 20:
            parts.append(p.read_text(errors="replace"))
    return "\n".join(parts)


def audit_clawgym(task_dir: Path, sandbox: Any, threshold: float = DEFAULT_THRESHOLD) -> TaskAudit:
    """Audit one ClawGym task folder on sandbox config `sandbox`."""
    task = read_task(task_dir)
    with tempfile.TemporaryDirectory(prefix="clawloop-audit-") as tmp:
        harbor = write_harbor_folder(task, Path(tmp) / task.task_id, threshold)
        noop, passed, reason = grade_files(harbor, {}, sandbox, Path(tmp) / "work")
        res = TaskAudit(task.task_id, str(task_dir), noop)
        if reason.startswith("reward.sh printed no score"):
            res.error = reason
        if passed:
            res.flags.append("noop_passes")
        elif noop > 0:
            res.flags.append("noop_scores")
        for name, files in probes(task).items():
            if name == "partial":  # a scripted partial solution (parity), not a lazy agent
                continue
            score, ok, _ = grade_files(harbor, files, sandbox, Path(tmp) / "work")
            res.probes[name] = score
            if ok:
                res.flags.append(f"probe_passes:{name}")
            elif score > noop:
                res.flags.append(f"probe_scores:{name}")
    root = task.task_dir / "input_files"
    for p in sorted(root.rglob("*")) if root.is_dir() else []:
        if p.is_file() and ANSWER_NAME.search(p.name):
            res.flags.append(f"answer_file:{p.relative_to(root).as_posix()}")
    checker = "\n".join(
        p.read_text(errors="replace") for p in sorted((task.task_dir / "reward").glob("*.py"))
    )
    res.flags += [
        f"instruction_leak:{v}"
        for v in leaks(compared_values(checker), task.user_query, _inputs_text(task))
    ]
    return res


def audit_harbor(task_dir: Path, sandbox: Any) -> TaskAudit:
    """Audit one Harbor task folder: its verifier on the untouched workspace."""
    from clawloop.harness.taskfolder.folder import read_instruction, strict_harbor_task_info
    from clawloop.harness.taskfolder.packing import check_folder_size

    check_folder_size(Path(task_dir))
    header = strict_harbor_task_info(task_dir)
    read_instruction(task_dir)
    with tempfile.TemporaryDirectory(prefix="clawloop-audit-") as tmp:
        prepared = prepare_task(Path(task_dir), sandbox, Path(tmp))
        with open_task(prepared.task_dir, prepared.sandbox) as sb:
            grade = run_tests(sb, prepared.task_dir)
    res = TaskAudit(header.task_id, str(task_dir), grade.reward)
    if grade.passed:
        res.flags.append("noop_passes")
    elif grade.reward > 0:
        res.flags.append("noop_scores")
    return res


# ---- grading: the task's own verifier, ours and ClawGym's ------------------------------------------------------------------------------------


def grade_files(
    harbor_dir: Path, files: dict[str, bytes], sandbox: Any, work: Path
) -> tuple[float, bool, str]:
    """(reward, passed, reason) of the task's own verifier on its starting workspace with
    `files` written over it: the Harbor folder `harbor_dir` (write_harbor_folder, or unpacked
    from an imported row) prepared and graded as an episode is (harness.taskenv.run_tests)."""
    prepared = prepare_task(Path(harbor_dir), sandbox, Path(work))
    with open_task(prepared.task_dir, prepared.sandbox) as sb:
        if files:
            with tempfile.TemporaryDirectory(prefix="clawloop-probe-") as tmp:
                write_files(files, Path(tmp))
                sb.upload(Path(tmp), WORKSPACE)
        grade = run_tests(sb, prepared.task_dir)
    return grade.reward, grade.passed, grade.reason


def reference_score(task: ClawGymTask, files: dict[str, bytes], timeout: float = 300.0) -> str:
    """What the task's reward.sh prints as its last line when run by itself, as ClawGym runs it:
    the starting files and `files` at the mount dir, reward/ copied there, `bash reward.sh`,
    in a bare bubblewrap box over the same system (no clawloop harness, no test.sh). For
    checking that our grading equals the task's own ("" when it printed nothing)."""
    with tempfile.TemporaryDirectory(prefix="clawloop-clawgym-ref-") as tmp:
        ws = Path(tmp, "ws")
        if (task.task_dir / "input_files").is_dir():
            shutil.copytree(task.task_dir / "input_files", ws)
        ws.mkdir(exist_ok=True)
        write_files(files, ws)
        shutil.copytree(task.task_dir / "reward", ws / "reward", dirs_exist_ok=True)
        Path(tmp, "tmp").mkdir()
        # a fresh tmpfs over the mount dir's top folder (/root): the system stays read-only
        top = "/" + task.mount_dir.strip("/").split("/")[0]
        over = ["--tmpfs", top] if top != task.mount_dir else []
        argv = [
            "bwrap", *system_binds(find_rootfs()), "--proc", "/proc", "--dev", "/dev",
            "--bind", str(Path(tmp, "tmp")), "/tmp", *over,
            "--bind", str(ws), task.mount_dir,
            "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
            "--chdir", task.mount_dir,
            "bash", f"{task.mount_dir}/reward/reward.sh",
        ]  # fmt: skip
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line.strip() for line in res.stdout.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def audit_task(task_dir: Path, sandbox: Any, threshold: float = DEFAULT_THRESHOLD) -> TaskAudit:
    """One task's audit; a task that cannot be read or run is a TaskAudit with its `error`
    (one bad task never aborts an audit of many)."""
    from clawloop.harness.sandbox.base import SandboxError
    from clawloop.harness.taskfolder.folder import TaskFolderError

    try:
        if is_clawgym_folder(task_dir):
            return audit_clawgym(task_dir, sandbox, threshold)
        return audit_harbor(task_dir, sandbox)
    except (TaskFolderError, SandboxError, OSError, ValueError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, TaskFolderError) else f"{type(exc).__name__}: {exc}"
        return TaskAudit(Path(task_dir).name, str(task_dir), 0.0, error=why[:500])


def summarize(audits: list[TaskAudit]) -> dict[str, Any]:
    """Totals over the audited tasks: how many, mean no-op score, tasks scoring above 0 and
    passing per probe, and tasks per flag kind."""
    n = len(audits)
    out: dict[str, Any] = {
        "tasks": n,
        "errors": sum(bool(a.error) for a in audits),
        "noop_mean": sum(a.noop for a in audits) / n if n else None,
        "noop_above_0": sum(a.noop > 0 for a in audits),
        "noop_passes": sum("noop_passes" in a.flags for a in audits),
        "probes": {},
        "flagged_tasks": sum(bool(a.flags) for a in audits),
        "flags": {},
    }
    names = sorted({p for a in audits for p in a.probes})
    for name in names:
        scores = [a.probes[name] for a in audits if name in a.probes]
        out["probes"][name] = {
            "tasks": len(scores),
            "mean": sum(scores) / len(scores),
            "above_0": sum(s > 0 for s in scores),
            "passes": sum(f"probe_passes:{name}" in a.flags for a in audits),
        }
    for a in audits:
        for kind in {f.split(":", 1)[0] for f in a.flags}:
            out["flags"][kind] = out["flags"].get(kind, 0) + 1
    return out
