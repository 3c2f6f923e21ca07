"""Harbor-format task folders: the layout, task.toml (render, read, check), the contract as a
reader sees it, and writing a folder from a build result. Tars live in packing.py, forged rows
(import, export) in rows.py.

Layout (fixed, docs/architecture.md, "The task folder"):

    <task>/task.toml             [task] name "<org>/<task_id>"; [metadata] + [metadata.clawloop];
                                 [agent]/[verifier] timeout_sec; [environment] cpus, memory_mb,
                                 network_mode
    <task>/instruction.md        instruction + the contract, rendered for a reader
    <task>/environment/          Dockerfile (FROM clawloop-base) + workspace/ (the starting files)
    <task>/solution/solve.sh     runs solution/generator.py's solve("/workspace")
    <task>/tests/test.sh         grades /workspace with tests/grader.py -> /logs/verifier/reward.json
                                 {"reward": float} (numbers only, as Harbor requires) and, beside
                                 it, details.json {"reward", "passed", "checks", "reason"}
    <task>/tests/{grader.py,answer.json,contract.json}   the hidden answer key and its grader

Harbor (0.25) requires [task] name in "org/name" form: folders are written as "clawloop/<task_id>"
and export can name another org. Reading strips the org, so task_id is always the bare id, and
older folders whose name has no org still read and import.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawloop.harness.taskfolder import grader, state_predicates
from clawloop.harness.taskfolder.spec import BuildResult, Contract, OutputSpec
from clawloop.storage.cache_key import data_text

# Imported, not only read, so the stage cache keys (which follow imports) see grader edits.
GRADER_PATH = Path(str(grader.__file__))
STATE_PREDICATES_PATH = Path(str(state_predicates.__file__))
BASE_IMAGE = "clawloop-base:latest"
MAX_TIMEOUT_SEC = 24 * 3600.0  # a task.toml timeout_sec longer than a day is refused
DEFAULT_ORG = "clawloop"
# Harbor's ORG_NAME_PATTERN (harbor.constants), one side of the slash; ".." is refused too.
NAME_PART = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]*")

# The programs every forged task folder holds (templates/, shipped as package data): the canonical
# verifier and reference solution, and the environment's Dockerfile.
TEST_SH = data_text(__file__, "templates/test.sh")
SOLVE_SH = data_text(__file__, "templates/solve.sh")
DOCKERFILE = data_text(__file__, "templates/Dockerfile").replace("__BASE_IMAGE__", BASE_IMAGE)


class TaskFolderError(ValueError):
    """A task folder or tar is malformed or unsafe (path escape, missing file, oversize)."""


# The [metadata.clawloop] keys every clawloop-made task.toml holds (forge writes them all).
PROVENANCE = (
    "capability",
    "domain",
    "seed",
    "multihop",
    "dirtiness",
    "output_format",
    "generator_sha256",
    "origin",
)


@dataclass(frozen=True)
class TaskInfo:
    """task.toml as clawloop reads it, for any Harbor task folder: [task] name (the bare id),
    capability, split, the [agent]/[verifier] timeouts and [environment] resources; and, for a
    clawloop-made task, where it came from ([metadata.clawloop]; left empty for a foreign task).
    read_harbor_task_info fills what running a task needs, read_task_info all of it."""

    task_id: str
    capability: str = ""
    domain: str = ""
    seed: int = 0
    multihop: int = 0
    dirtiness: int = 0
    output_format: str = ""
    generator_sha256: str = ""
    origin: str = ""
    title: str = ""
    split: str = "train"
    task_sha256: str = ""  # digest of the build result the folder was written from
    agent_timeout_sec: float = 600.0
    verifier_timeout_sec: float = 120.0
    cpus: int = 1
    memory_mb: int = 2048


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    # JSON string escapes are valid TOML basic-string escapes.
    return json.dumps(str(v), ensure_ascii=False)


def harbor_name(task_id: str, org: str = DEFAULT_ORG) -> str:
    """[task] name as Harbor requires it: "org/task_id" (TaskFolderError when either part does
    not fit Harbor's pattern: a letter or digit, then letters, digits, ".", "_", "-")."""
    for what, part in (("org", org), ("task_id", task_id)):
        if not NAME_PART.fullmatch(part) or ".." in part:
            raise TaskFolderError(
                f"{what} {part!r} cannot be part of a Harbor task name: use letters, digits, "
                "'.', '_' and '-', starting with a letter or digit"
            )
    return f"{org}/{task_id}"


def bare_task_id(name: str) -> str:
    """The task_id in a [task] name: "org/id" -> "id"; a name without an org is the id itself."""
    return name.rpartition("/")[2]


def render_task_toml(info: TaskInfo, org: str = DEFAULT_ORG) -> str:
    """task.toml with Harbor's field names plus clawloop's provenance under [metadata.clawloop]."""
    claw = {k: getattr(info, k) for k in (*PROVENANCE, "title", "split", "task_sha256")}
    difficulty = ("easy", "medium", "medium", "hard", "hard", "hard", "hard")[
        info.multihop + info.dirtiness
    ]
    lines = [
        'version = "1.0"',
        "",
        "[task]",
        f"name = {_toml_value(harbor_name(info.task_id, org))}",
        "",
        "[metadata]",
        'author_name = "clawloop"',
        f"difficulty = {_toml_value(difficulty)}",
        f"category = {_toml_value(info.capability)}",
        f"tags = {_toml_value([info.capability, info.domain, info.output_format])}",
        "",
        "[metadata.clawloop]",
        *(f"{k} = {_toml_value(v)}" for k, v in claw.items()),
        "",
        "[agent]",
        f"timeout_sec = {float(info.agent_timeout_sec)!r}",
        "",
        "[verifier]",
        f"timeout_sec = {float(info.verifier_timeout_sec)!r}",
        "",
        "[environment]",
        "build_timeout_sec = 600.0",
        f"cpus = {int(info.cpus)}",
        f"memory_mb = {int(info.memory_mb)}",
        'network_mode = "no-network"',
        "allow_internet = false",
        "",
    ]
    return "\n".join(lines)


def _load_task_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise TaskFolderError(f"{path}: task.toml is not UTF-8 text ({exc})") from exc
    except RecursionError:
        raise TaskFolderError(f"{path}: task.toml is nested too deep to read") from None
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise TaskFolderError(f"{path}: cannot read task.toml ({exc})") from exc


MAX_TASK_ID = 128  # characters: a task id is a folder name (and part of a Harbor name)


def check_task_id(task_id: object, where: str) -> str:
    """`task_id` when it is a plain name (a string of letters, digits, '.', '_', '-', starting
    with a letter or digit, at most MAX_TASK_ID characters); TaskFolderError naming `where`."""
    if not isinstance(task_id, str):
        raise TaskFolderError(
            f"{where}: task id {task_id!r} is a {type(task_id).__name__}, not a string"
        )
    if not NAME_PART.fullmatch(task_id) or ".." in task_id or len(task_id) > MAX_TASK_ID:
        shown = task_id if len(task_id) <= 60 else task_id[:60] + "..."
        raise TaskFolderError(
            f"{where}: task id {shown!r} is not a plain name (letters, digits, '.', '_', '-', "
            f"starting with a letter or digit, at most {MAX_TASK_ID} characters)"
        )
    return task_id


def strict_harbor_task_info(task_dir: Path) -> TaskInfo:
    """read_harbor_task_info for an import: a task.toml that cannot be read, or whose task id or
    timeouts are unusable, is a TaskFolderError (not Harbor's defaults)."""
    info = _harbor_task_info(_load_task_toml(Path(task_dir, "task.toml")), Path(task_dir))
    check_task_id(info.task_id, f"{task_dir}/task.toml")
    return info


def read_instruction(task_dir: Path) -> str:
    """instruction.md as text; TaskFolderError when it is not UTF-8 (the agent's prompt)."""
    path = Path(task_dir, "instruction.md")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFolderError(f"{path}: instruction.md is not UTF-8 text ({exc})") from exc
    except OSError as exc:
        raise TaskFolderError(f"{path}: cannot read instruction.md ({exc})") from exc


def _table(doc: dict[str, Any], *keys: str) -> dict[str, Any]:
    for key in keys:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc if isinstance(doc, dict) else {}


def _harbor_task_info(doc: dict[str, Any], task_dir: Path) -> TaskInfo:
    claw = _table(doc, "metadata", "clawloop")
    try:
        agent = float(_table(doc, "agent").get("timeout_sec", 600.0))
        verifier = float(_table(doc, "verifier").get("timeout_sec", 120.0))
    except (TypeError, ValueError) as exc:
        raise TaskFolderError(
            f"{task_dir}/task.toml: a timeout_sec is not a number ({exc})"
        ) from exc
    for name, value in (("agent", agent), ("verifier", verifier)):
        if not (0 < value <= MAX_TIMEOUT_SEC):  # NaN and inf too
            raise TaskFolderError(
                f"{task_dir}/task.toml: [{name}] timeout_sec is {value!r}; it must be more than 0 "
                f"and at most {MAX_TIMEOUT_SEC:g} seconds"
            )
    return TaskInfo(
        task_id=bare_task_id(str(_table(doc, "task").get("name") or Path(task_dir).name)),
        capability=str(claw.get("capability") or _table(doc, "metadata").get("category") or ""),
        split=str(claw.get("split") or "train"),
        agent_timeout_sec=agent,
        verifier_timeout_sec=verifier,
    )


def read_harbor_task_info(task_dir: Path) -> TaskInfo:
    """Name, capability, split and timeouts of any Harbor task folder: [task] name without its
    org (else the folder name), [metadata.clawloop] or [metadata] category, [agent]/[verifier]
    timeout_sec; Harbor's defaults where task.toml is missing, unreadable or silent."""
    try:
        return _harbor_task_info(_load_task_toml(Path(task_dir, "task.toml")), Path(task_dir))
    except TaskFolderError:
        return TaskInfo(task_id=Path(task_dir).name)


def parse_harbor_task_info(text: str, task_dir: Path) -> TaskInfo:
    """read_harbor_task_info of a task.toml given as text (`task_dir`: the folder it names)."""
    try:
        return _harbor_task_info(tomllib.loads(text), Path(task_dir))
    except (tomllib.TOMLDecodeError, TaskFolderError):
        return TaskInfo(task_id=Path(task_dir).name)


def read_task_info(task_dir: Path) -> TaskInfo:
    """Parse task.toml back into a TaskInfo (raises TaskFolderError if it is not a clawloop task)."""
    return _task_info(_load_task_toml(Path(task_dir, "task.toml")), Path(task_dir))


def parse_task_info(text: str, task_dir: Path) -> TaskInfo:
    """read_task_info of a task.toml given as text (`task_dir`: the folder it names)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskFolderError(f"{task_dir}/task.toml: cannot read task.toml ({exc})") from exc
    return _task_info(doc, Path(task_dir))


def _task_info(doc: dict[str, Any], task_dir: Path) -> TaskInfo:
    path = task_dir / "task.toml"
    claw = _table(doc, "metadata", "clawloop")
    if not claw:
        raise TaskFolderError(f"{path}: no [metadata.clawloop] table; not a clawloop task folder")
    harbor = _harbor_task_info(doc, Path(task_dir))
    # task_id, the timeouts and the resources come from [task], [agent]/[verifier] and
    # [environment]; a hand-written [metadata.clawloop] that repeats one is not a second value
    from_harbor = {"task_id", "agent_timeout_sec", "verifier_timeout_sec", "cpus", "memory_mb"}
    fields = set(TaskInfo.__dataclass_fields__) - from_harbor
    known = {k: v for k, v in claw.items() if k in fields}
    missing = [k for k in PROVENANCE if k not in claw]
    if missing:
        raise TaskFolderError(
            f"{path}: [metadata.clawloop] is incomplete (missing {', '.join(missing)})"
        )
    env = _table(doc, "environment")
    return dataclasses.replace(
        harbor,
        cpus=int(env.get("cpus", 1)),
        memory_mb=int(env.get("memory_mb", 2048)),
        **known,
    )


@dataclass(frozen=True)
class TaskFolder:
    """One task folder on disk: where its parts are (the layout above), what its task.toml says
    (`info`), its instruction and its contract. `read` takes any Harbor folder (Harbor's defaults
    where task.toml is silent), `read_clawloop` a clawloop-made one (TaskFolderError otherwise)."""

    root: Path
    info: TaskInfo

    @classmethod
    def read(cls, root: Path) -> TaskFolder:
        return cls(Path(root), read_harbor_task_info(Path(root)))

    @classmethod
    def read_clawloop(cls, root: Path) -> TaskFolder:
        return cls(Path(root), read_task_info(Path(root)))

    @classmethod
    def for_row(cls, root: Path, row: dict[str, Any]) -> TaskFolder:
        """The folder unpacked from a forged row: task_id, capability and split are the row's
        (the folder name, "" and "train" where it has none); the rest is task.toml's."""
        info = dataclasses.replace(
            read_harbor_task_info(Path(root)),
            task_id=str(row.get("task_id") or Path(root).name),
            capability=str(row.get("capability") or ""),
            split=str(row.get("split") or "train"),
        )
        return cls(Path(root), info)

    @property
    def task_id(self) -> str:
        return self.info.task_id

    # The parts of the layout the code reaches through the object (module docstring: all of it).
    @property
    def instruction_path(self) -> Path:
        return self.root / "instruction.md"

    @property
    def workspace(self) -> Path:
        return self.root / "environment" / "workspace"

    @property
    def tests(self) -> Path:
        return self.root / "tests"

    def instruction(self) -> str:
        """instruction.md as text (TaskFolderError when it is missing or not UTF-8)."""
        return read_instruction(self.root)

    def contract(self) -> dict[str, Any] | None:
        """tests/contract.json (a clawloop task's answer contract); None when the folder has
        none (a foreign task); TaskFolderError when it is there but unreadable."""
        path = self.tests / "contract.json"
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise TaskFolderError(f"{path}: cannot read the contract ({exc})") from exc


def _render_output(o: OutputSpec) -> list[str]:
    if o.format == "state":
        snapshot = f"`{o.path}/{o.schema['file']}`" if o.schema.get("file") else f"`{o.path}/`"
        return [
            f"- the domain's state in {snapshot}, as you leave it: graded on the records the task "
            "changes and on every other record staying as it was",
            "  - change it only through the skill CLIs in `skills/` (they apply the domain's rules)",
        ]
    lines = [f"- `{o.path}` ({o.format})"]
    lenient = set(o.lenient)
    if o.columns:
        order = "in any order" if "column_order" in lenient else "in this order"
        others = ", other columns allowed" if "extra_columns" in lenient else ", and no others"
        lines.append(f"  - columns, {order}{others}: {', '.join(f'`{c}`' for c in o.columns)}")
    if o.key:
        lines.append(f"  - one row per: {', '.join(f'`{c}`' for c in o.key)}")
    if o.sidecar:
        lines.append(f"  - machine-checkable facts go in the sidecar JSON `{o.sidecar}`")
    if o.covers:
        lines.append(
            "  - the report's text is graded on the facts it states (you compute the values):"
        )
        for c in o.covers:
            fields = ", ".join(f"`{f}`" for f in c["fields"])
            if c["per"]:
                per = " and ".join(f"`{k}`" for k in c["per"])
                lines.append(
                    f"    - for each {per}: {fields}, stated in the table row or sentence that "
                    f"names its {per}"
                )
            else:
                lines.append(
                    f"    - overall: {fields}, each stated next to its name (underscores may be "
                    "spaces)"
                )
        lines.append(
            "  - numbers in any common format (thousands separators, decimal comma, scientific), "
            "within the numeric tolerance; write identifiers, dates and categories as the data "
            "writes them; state nothing untrue (values of rows that are out of scope included)"
        )
    if o.schema:
        schema = json.dumps(o.schema, indent=2, sort_keys=True)
        lines.append("  - JSON schema:\n\n```json\n" + schema + "\n```")
        if "extra_fields" not in lenient:
            lines.append("  - no keys or fields beyond what is asked for")
    strict = [
        "integers are whole numbers" if "int_as_float" not in lenient else "",
        "booleans are true or false" if "bool_words" not in lenient else "",
    ]
    if any(strict):
        lines.append("  - " + "; ".join(s for s in strict if s))
    return lines


def render_contract(contract: Contract) -> str:
    """The answer contract as readable markdown (outputs, schema, tolerance, decisions)."""
    parts = ["## Outputs", ""]
    for o in contract.outputs:
        parts.extend(_render_output(o))
    tol = contract.tolerance
    parts += [
        "",
        "## Numeric tolerance",
        "",
        f"Numbers are accepted within an absolute difference of {tol.get('abs', 0.0):g}"
        f" or a relative difference of {tol.get('rel', 0.0):g}.",
    ]
    if contract.decisions:
        parts += ["", "## Decisions", ""] + [f"- {d}" for d in contract.decisions]
    return "\n".join(parts) + "\n"


def render_instruction(build: BuildResult) -> str:
    """instruction.md: the generator's instruction followed by the contract."""
    return build.instruction.rstrip() + "\n\n" + render_contract(build.contract)


def task_files(build: BuildResult, code: str, info: TaskInfo) -> dict[str, tuple[str, bool]]:
    """The task folder for one build result as {relative path: (text, executable)} (pure)."""
    if not GRADER_PATH.is_file():
        raise TaskFolderError(f"{GRADER_PATH} is missing: the generic grader must be installed")
    contract = json.dumps(build.contract.to_dict(), indent=2, sort_keys=True)
    files = {
        "task.toml": (render_task_toml(info), False),
        "instruction.md": (render_instruction(build), False),
        "environment/Dockerfile": (DOCKERFILE, False),
        "solution/solve.sh": (SOLVE_SH, True),
        "solution/generator.py": (code, False),
        "tests/test.sh": (TEST_SH, True),
        "tests/grader.py": (GRADER_PATH.read_text(), False),
        "tests/state_predicates.py": (STATE_PREDICATES_PATH.read_text(), False),
        "tests/answer.json": (json.dumps(build.answer, indent=2, sort_keys=True) + "\n", False),
        "tests/contract.json": (contract + "\n", False),
    }
    for rel, text in build.files.items():  # a starting file that opens with #! is a program
        files[f"environment/workspace/{rel}"] = (text, text.startswith("#!"))
    return files


def write_task_folder(dest: Path, build: BuildResult, code: str, info: TaskInfo) -> Path:
    """Write the Harbor task folder for one build result into `dest` (created; must not exist)."""
    files = task_files(build, code, info)
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise TaskFolderError(f"{dest} already exists and is not empty; choose another --out")
    dest.mkdir(parents=True, exist_ok=True)
    for rel, (text, executable) in sorted(files.items()):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if executable:
            path.chmod(0o755)
    return dest


_TASK_TABLE = re.compile(r"^\[task\][ \t]*(#.*)?$")
_TABLE_HEADER = re.compile(r"^\[")
_NAME_LINE = re.compile(r"^name[ \t]*=")


def set_task_name(task_dir: Path, name: str) -> None:
    """Set [task] name in task_dir/task.toml to `name`, editing only that line (a [task] table
    is added at the top when there is none), and check the result parses to it."""
    path = Path(task_dir, "task.toml")
    doc = _load_task_toml(path)
    if _table(doc, "task").get("name") == name:
        return
    lines = path.read_text().splitlines()
    line = f"name = {_toml_value(name)}"
    start = next((i for i, t in enumerate(lines) if _TASK_TABLE.match(t.strip())), None)
    if start is None:
        lines = ["[task]", line, ""] + lines
    else:
        end = next(
            (j for j in range(start + 1, len(lines)) if _TABLE_HEADER.match(lines[j].strip())),
            len(lines),
        )
        at = next((j for j in range(start + 1, end) if _NAME_LINE.match(lines[j].strip())), None)
        if at is None:
            lines.insert(start + 1, line)
        else:
            lines[at] = line
    text = "\n".join(lines) + "\n"
    try:
        ok = _table(tomllib.loads(text), "task").get("name") == name
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise TaskFolderError(f"{path}: could not set [task] name to {name!r}")
    path.write_text(text)


def writes_numeric_reward(task_dir: Path) -> bool:
    """Whether the folder's verifier writes reward.json with numbers only (per-check details in
    details.json), as Harbor requires; folders forged before that put them all in reward.json."""
    try:
        return "details.json" in Path(task_dir, "tests", "test.sh").read_text()
    except OSError:
        return False
