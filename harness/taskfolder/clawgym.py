"""ClawGym task folders (ClawGym/ClawGym-Agents, RL/data/clawgym_eval|train): read them and turn
each into a foreign Harbor task folder that runs in our sandboxes, graded by its own checker.

A ClawGym task is `task_NNNN/` with `data_entry.json` (task_id, user_query, input_mount_dir,
usually /root/.openclaw/workspace), `input_files/` (copied verbatim into the workspace) and
`reward/` (reward.sh + check.py; ClawGym copies the folder to <workspace>/reward/ and runs
reward.sh after the agent ends; its last stdout line is one float in [0, 1]).

The Harbor folder we make of it (`write_harbor_folder`) is a base-only foreign task (see
foreign.py): environment/workspace/ = input_files/, with a Dockerfile FROM the base image that
COPYs it into /workspace (so the folder runs as it is, as clawloop's own do, prepared or not),
instruction.md = user_query, tests/reward/ = the task's reward/ verbatim, and tests/test.sh (ours)
that copies it to /workspace/reward/, runs reward.sh, and writes the float as reward.json with the
pass threshold (passed = reward >= threshold; the score itself is always kept). reward.sh names
the mount dir; the base image links that path to /workspace (scripts/build-base-image.sh), and
on an older image without the link test.sh runs a copy of reward.sh with the path replaced
(check.py takes the workspace as its argument, so both grade the same files the same way).

`checker_modules` lists what a checker imports at module level: a task whose checker imports a
module the sandbox lacks cannot be graded, and import drops it with the reason (never graded 0).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shlex
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawloop.harness.sandbox.base import WORKSPACE
from clawloop.harness.taskfolder.folder import TaskFolderError, check_task_id
from clawloop.harness.taskfolder.packing import check_folder_size, pack_dir
from clawloop.harness.taskfolder.rows import forged_row
from clawloop.storage.cache_key import data_text

DATA_ENTRY = "data_entry.json"
DEFAULT_MOUNT = "/root/.openclaw/workspace"
DEFAULT_THRESHOLD = 1.0
ORG = "clawgym"
DOMAIN = "clawgym"
AGENT_TIMEOUT_SEC = 600.0
VERIFIER_TIMEOUT_SEC = 300.0  # some checkers run the agent's code or a pytest suite
# A workspace path the query names: dir/…/name.ext (the ext gives the task's family).
_PATH_RE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]*\w\.[A-Za-z]\w{0,5})\b")


@dataclass(frozen=True)
class ClawGymTask:
    """One ClawGym task folder as read from disk."""

    task_dir: Path
    task_id: str
    user_query: str
    mount_dir: str
    family: str  # the most common extension of the files the query asks for ("none": no path)


def is_clawgym_folder(path: Path) -> bool:
    """Whether `path` is one ClawGym task folder (data_entry.json and reward/reward.sh)."""
    return (Path(path) / DATA_ENTRY).is_file() and (Path(path) / "reward/reward.sh").is_file()


def clawgym_folders(path: Path) -> list[Path]:
    """The ClawGym task folders a path names: itself, else its subfolders that are (a data set
    folder such as clawgym_eval/), sorted; [] when it holds none."""
    path = Path(path)
    if is_clawgym_folder(path):
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and is_clawgym_folder(p))


def expected_outputs(query: str, inputs: set[str]) -> list[str]:
    """Workspace-relative file paths the query names that the task does not ship (its outputs),
    in the order first named."""
    out: dict[str, None] = {}
    for m in _PATH_RE.finditer(query):
        p = m.group(1).strip("./")
        if p and p not in inputs and not p.startswith(("reward/", "/")) and ".." not in p:
            out[p] = None
    return list(out)


def family_of(outputs: list[str]) -> str:
    """A task's family: the most common extension among its outputs (ties: first named)."""
    exts = [p.rsplit(".", 1)[-1].lower() for p in outputs]
    return Counter(exts).most_common(1)[0][0] if exts else "none"


def input_paths(task_dir: Path) -> set[str]:
    root = Path(task_dir) / "input_files"
    return {p.relative_to(root).as_posix() for p in root.rglob("*")} if root.is_dir() else set()


def read_task(task_dir: Path) -> ClawGymTask:
    """A ClawGym task folder's entry (TaskFolderError naming what is missing or malformed)."""
    task_dir = Path(task_dir)
    for need in (DATA_ENTRY, "reward/reward.sh"):
        if not (task_dir / need).is_file():
            raise TaskFolderError(f"{task_dir}: missing {need}; not a ClawGym task folder")
    check_folder_size(task_dir)  # before reading anything
    try:
        entry = json.loads((task_dir / DATA_ENTRY).read_bytes().decode("utf-8"))
    except RecursionError:
        raise TaskFolderError(f"{task_dir}/{DATA_ENTRY}: nested too deep to read") from None
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise TaskFolderError(f"{task_dir}/{DATA_ENTRY}: not readable JSON ({exc})") from exc
    if not isinstance(entry, dict):
        raise TaskFolderError(f"{task_dir}/{DATA_ENTRY}: not a JSON object")
    raw_id = entry.get("task_id")
    task_id = check_task_id(raw_id.strip() if isinstance(raw_id, str) else raw_id,
                            f"{task_dir}/{DATA_ENTRY}")  # fmt: skip
    query = entry.get("user_query")
    if not isinstance(query, str) or not query.strip():
        raise TaskFolderError(f"{task_dir}/{DATA_ENTRY}: user_query is missing or empty")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TaskFolderError(
            f"{task_dir}/{DATA_ENTRY}: user_query is not valid Unicode text ({exc})"
        ) from exc
    if not isinstance(entry.get("input_mount_dir", ""), str | None):
        raise TaskFolderError(f"{task_dir}/{DATA_ENTRY}: input_mount_dir is not a string")
    mount = str(entry.get("input_mount_dir") or DEFAULT_MOUNT).rstrip("/")
    if not mount.startswith("/") or mount in ("", "/"):
        raise TaskFolderError(f"{task_dir}/{DATA_ENTRY}: input_mount_dir {mount!r} is not absolute")
    for bad in task_dir.rglob("*"):
        if bad.is_symlink():
            raise TaskFolderError(f"{bad}: symlinks are not allowed in a task folder")
    family = family_of(expected_outputs(query, input_paths(task_dir)))
    return ClawGymTask(task_dir, task_id, query, mount, family)


# ---- what the checker needs ---------------------------------------------------------------------


def checker_modules(task_dir: Path) -> tuple[set[str], set[str]]:
    """(modules reward/*.py import at module level, modules imported only inside functions, try
    blocks or branches), top-level names, the reward folder's own modules left out. A module-level
    import that fails stops the checker; a nested one may only matter on some paths."""
    reward = Path(task_dir) / "reward"
    local = {p.stem for p in reward.glob("*.py")}
    required: set[str] = set()
    nested: set[str] = set()
    for path in sorted(reward.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except (SyntaxError, ValueError):
            continue  # it cannot run at all: the no-op run says so
        except (RecursionError, MemoryError):
            raise TaskFolderError(f"{path}: nested too deep to read") from None
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                mod = name.split(".")[0]
                if mod not in local:
                    (required if id(node) in top else nested).add(mod)
    return required, nested - required


PROBE_MODULES_PY = (
    "import importlib.util, json, sys\n"
    "print(json.dumps(sorted(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None)))\n"
)


def missing_in_sandbox(modules: set[str], sandbox: object) -> set[str]:
    """The modules of `modules` the sandbox's python3 cannot import (one exec in an open
    sandbox, harness.sandbox.base.Sandbox)."""
    if not modules:
        return set()
    # every name, the standard library's too: Debian ships some of it apart (tkinter, venv, ...)
    argv = ["python3", "-c", PROBE_MODULES_PY, *sorted(modules)]
    res = sandbox.exec(argv, timeout=60, cwd="/")  # type: ignore[attr-defined]
    if not res.ok:
        raise TaskFolderError(f"could not probe the sandbox's python3 modules: {res.stderr[-300:]}")
    return set(json.loads(res.stdout.strip().splitlines()[-1]))


# ---- the Harbor folder --------------------------------------------------------------------------

# Written by `clawloop import clawgym` as a task's tests/test.sh: grades /workspace with the ClawGym
# task's own reward/reward.sh, as ClawGym does (templates/clawgym_test.sh).
TEST_SH = data_text(__file__, "templates/clawgym_test.sh")


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def task_toml(task: ClawGymTask, threshold: float) -> str:
    return "\n".join(
        [
            'version = "1.0"',
            "",
            "[task]",
            f"name = {_toml_str(f'{ORG}/{task.task_id}')}",
            "",
            "[metadata]",
            f"category = {_toml_str(f'clawgym-{task.family}')}",
            'source = "clawgym"',
            f"clawgym_task_id = {_toml_str(task.task_id)}",
            f"input_mount_dir = {_toml_str(task.mount_dir)}",
            f"pass_threshold = {threshold!r}",
            "",
            "[agent]",
            f"timeout_sec = {AGENT_TIMEOUT_SEC!r}",
            "",
            "[verifier]",
            f"timeout_sec = {VERIFIER_TIMEOUT_SEC!r}",
            "",
        ]
    )


DOCKERFILE = f"FROM clawloop-base:latest\nWORKDIR {WORKSPACE}\nCOPY workspace/ {WORKSPACE}/\n"


def check_threshold(threshold: float) -> float:
    if not 0.0 < threshold <= 1.0:
        raise TaskFolderError(f"pass threshold {threshold!r} must be more than 0 and at most 1")
    return float(threshold)


def write_harbor_folder(
    task: ClawGymTask, dest: Path, threshold: float = DEFAULT_THRESHOLD
) -> Path:
    """Write the foreign Harbor task folder of `task` at `dest` (replaced)."""
    threshold = check_threshold(threshold)
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "environment/workspace").mkdir(parents=True)
    (dest / "tests").mkdir()
    (dest / "task.toml").write_text(task_toml(task, threshold))
    (dest / "instruction.md").write_text(task.user_query.rstrip() + "\n")
    (dest / "environment/Dockerfile").write_text(DOCKERFILE)
    src = task.task_dir / "input_files"
    if src.is_dir():
        shutil.copytree(src, dest / "environment/workspace", dirs_exist_ok=True)
    shutil.copytree(task.task_dir / "reward", dest / "tests/reward")
    sh = TEST_SH.replace("__MOUNT__", shlex.quote(task.mount_dir)).replace(
        "__THRESHOLD__", repr(threshold)
    )
    (dest / "tests/test.sh").write_text(sh)
    (dest / "tests/test.sh").chmod(0o755)
    return dest


# ---- import -------------------------------------------------------------------------------------


@dataclass
class Imported:
    """What an import made of some ClawGym folders: FORGED rows, and the tasks it dropped."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (task folder, why)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (task id, what may fail)


def clawgym_row(task: ClawGymTask, threshold: float, note: str = "") -> dict[str, Any]:
    """The FORGED row of a ClawGym task: the tar of its Harbor folder (write_harbor_folder)."""
    with tempfile.TemporaryDirectory(prefix="clawloop-clawgym-") as tmp:
        folder = write_harbor_folder(task, Path(tmp) / task.task_id, threshold)
        tar = pack_dir(folder)
    digest = hashlib.sha256(tar).hexdigest()
    return forged_row(
        {"task_id": task.task_id, "capability": f"clawgym-{task.family}"},
        status="ok",
        build_log=f"imported ClawGym task from {task.task_dir}; graded by its reward/reward.sh, "
        f"passed at score >= {threshold:g}" + (f"; {note}" if note else ""),
        task_sha256=digest,
        rebuild_sha256=digest,
        task_tar=tar,
        domain=DOMAIN,
        split="train",
    )


def import_clawgym(
    folders: list[Path], sandbox: Any, threshold: float = DEFAULT_THRESHOLD
) -> Imported:
    """Import ClawGym task folders. `sandbox`: an open sandbox of the backend the tasks will run
    on, asked once which modules its python3 lacks. Dropped with the reason: an unreadable task,
    and one whose checker imports at module level a module the sandbox lacks (it cannot run, so
    it could only ever grade 0). A module imported only inside a function is a warning."""
    threshold = check_threshold(threshold)
    out = Imported()
    tasks: list[tuple[ClawGymTask, set[str], set[str]]] = []
    for folder in folders:
        try:  # one bad task is dropped with its reason; the rest import
            task = read_task(folder)
            tasks.append((task, *checker_modules(folder)))
        except TaskFolderError as exc:
            out.dropped.append((str(folder), str(exc)))
    wanted = set().union(*[r | n for _, r, n in tasks]) if tasks else set()
    missing = missing_in_sandbox(wanted, sandbox)
    for task, required, nested in tasks:
        lacks = sorted(required & missing)
        if lacks:
            out.dropped.append((
                str(task.task_dir),
                f"{task.task_id}: its checker imports {', '.join(lacks)}, which the sandbox's "
                "python3 lacks, so it cannot run; rebuild the base image "
                "(scripts/build-base-image.sh installs python3-yaml and python3-pytest)",
            ))  # fmt: skip
            continue
        maybe = sorted(nested & missing)
        note = f"its checker may import {', '.join(maybe)} (not in the sandbox)" if maybe else ""
        try:
            row = clawgym_row(task, threshold, note)
        except (TaskFolderError, OSError, ValueError) as exc:
            out.dropped.append((str(task.task_dir), f"{task.task_id}: cannot be written ({exc})"))
            continue
        if maybe:
            out.warnings.append((task.task_id, note))
        out.rows.append(row)
    return out


# ---- probes and scripted partial solutions ------------------------------------------------------

_COLUMNS_RE = re.compile(
    r"columns?(?: exactly)?\s*[:(]\s*`?([A-Za-z_][\w ]*(?:,\s*[A-Za-z_][\w ]*)+)"
)


def _header_for(query: str) -> str:
    """The first comma-separated column list the query spells out ("" when none)."""
    m = _COLUMNS_RE.search(query)
    return ",".join(c.strip() for c in m.group(1).split(",")) if m else ""


def _inputs_by_ext(task: ClawGymTask) -> dict[str, bytes]:
    root = task.task_dir / "input_files"
    out: dict[str, bytes] = {}
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
    for p in sorted(files, key=lambda p: p.stat().st_size):
        out.setdefault(p.suffix.lower().lstrip("."), p.read_bytes())
    return out


def probes(task: ClawGymTask) -> dict[str, dict[str, bytes]]:
    """Outputs a lazy or gaming agent could write without doing the task, per probe name: each
    maps workspace paths (the files the query asks for) to contents, built only from the query
    and the starting files, never from the checker.

    - empty: every output an empty file;
    - echo_query: every output holds the query's text (a checker that looks for keywords);
    - copy_inputs: every output a copy of the smallest starting file of its extension;
    - partial: the scripted partial solution of the task's family: CSVs with the header the
      query spells out, JSON outputs an empty object, text outputs the query's text."""
    outs = expected_outputs(task.user_query, input_paths(task.task_dir))
    query = task.user_query.encode()
    inputs = _inputs_by_ext(task)
    header = _header_for(task.user_query)
    found: dict[str, dict[str, bytes]] = {"empty": {}, "echo_query": {}, "copy_inputs": {}}
    partial: dict[str, bytes] = {}
    for path in outs:
        ext = path.rsplit(".", 1)[-1].lower()
        found["empty"][path] = b""
        found["echo_query"][path] = query
        if ext in inputs:
            found["copy_inputs"][path] = inputs[ext]
        if ext in ("csv", "tsv"):
            partial[path] = (header + "\n").encode() if header else query
        elif ext in ("json",) or ext == "jsonl":
            partial[path] = b"{}\n"
        else:
            partial[path] = query
    found["partial"] = partial
    return {name: files for name, files in found.items() if files}


def write_files(files: dict[str, bytes], root: Path) -> None:
    """Lay `files` (workspace-relative paths) out under `root`."""
    for rel, data in files.items():
        target = Path(root, rel)
        if Path(root).resolve() not in target.resolve().parents:
            raise TaskFolderError(f"probe path {rel} escapes the workspace")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
