"""CLI verbs for task forging: forge, verify, export, import (registered into flows/cli.py).

    clawloop forge GENERATOR.py --seed N --out DIR [--backend auto|bwrap|docker]
    clawloop verify TASK_DIR [--json] [--backend ...]     exit 0 kept, 1 dropped, 2 error
    clawloop export harbor --tasks tasks.parquet --out DIR [--org ORG]   [task] name ORG/<task_id>
    clawloop export trajectories|tasks --run ID --out DIR ...   HF datasets (flows/cli/export.py)
    clawloop import harbor DIR... --out tasks.parquet    task folders (ours or foreign Harbor
                                                         ones) or dataset folders of them
    clawloop import clawgym DIR... --out tasks.parquet [--threshold 1.0]   ClawGym task folders
    clawloop import auto DIR... --out tasks.parquet      the format detected from the folders

Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_KEPT, EXIT_DROPPED, EXIT_ERROR = 0, 1, 2
INFRA_PREFIX = "could not run:"  # verify's reason for a check the sandbox could not run


class CliError(Exception):
    """A usage or infrastructure problem: printed as one line, exit 2."""


def _sandbox(backend: str) -> Any:
    from clawloop.harness.sandbox.backend import resolve_backend
    from clawloop.harness.sandbox.base import SandboxConfig, SandboxError

    try:
        resolve_backend(backend)
    except (SandboxError, ValueError) as exc:
        raise CliError(str(exc)) from exc
    return SandboxConfig(backend=backend)


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend", choices=("auto", "bwrap", "docker"), default="auto",
        help="sandbox backend (auto: docker when an engine answers, else bubblewrap)",
    )  # fmt: skip


def cmd_forge(args: argparse.Namespace) -> int:
    from clawloop.generators.forge import forge_to_folder

    path = Path(args.generator)
    if not path.is_file():
        raise CliError(f"generator file {path} does not exist")
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CliError(f"--out {out} already exists and is not an empty folder; choose another")
    row = forge_to_folder(
        path.read_text(), args.seed, out, _sandbox(args.backend), origin=f"user:{path}"
    )
    if row["status"] != "ok":
        msg = row["error"].splitlines()[0] if row["error"] else "unknown error"
        print(f"clawloop forge: failed ({row['error_kind']}): {msg}", file=sys.stderr)
        detail = "\n".join(row["error"].splitlines()[1:])
        if detail:
            print(detail, file=sys.stderr)
        return EXIT_ERROR if row["error_kind"] == "sandbox" else EXIT_DROPPED
    print(f"forged task {row['task_id']} -> {out} (sha256 {row['task_sha256'][:12]})")
    return EXIT_KEPT


def cmd_verify(args: argparse.Namespace) -> int:
    from clawloop.generators.verify import is_warning, verify_task
    from clawloop.harness.taskfolder.folder import TaskFolderError
    from clawloop.harness.taskfolder.rows import import_folder

    task_dir = Path(args.task_dir)
    if not task_dir.exists():
        raise CliError(f"no such task folder {task_dir}")
    if not task_dir.is_dir():
        raise CliError(f"{task_dir} is a file, not a task folder")
    try:
        row = import_folder(task_dir)
    except TaskFolderError as exc:
        raise CliError(str(exc)) from exc
    checks, verdict = verify_task(row, _sandbox(args.backend))
    infra = [c for c in checks if c["reason"].startswith(INFRA_PREFIX)]
    if args.json:
        print(json.dumps({"verdict": verdict, "checks": checks}, indent=2))
    else:
        for c in checks:
            mark = "WARN" if is_warning(c) else "PASS" if c["passed"] else "FAIL"
            print(f"{mark}  {c['check']:<22} {c['reason']}")
        print(("KEPT" if verdict["kept"] else "DROPPED") + f": {verdict['reason']}")
    if infra:
        print(f"clawloop verify: {infra[0]['check']} {infra[0]['reason']}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_KEPT if verdict["kept"] else EXIT_DROPPED


def cmd_export(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clawloop.harness.taskfolder.folder import (
        TaskFolderError,
        harbor_name,
        writes_numeric_reward,
    )
    from clawloop.harness.taskfolder.rows import export_rows

    try:
        harbor_name("x", args.org)
    except TaskFolderError as exc:
        raise CliError(f"--org: {exc}") from exc
    src = Path(args.tasks)
    if not src.is_file():
        raise CliError(f"--tasks {src} does not exist")
    try:
        rows = pq.read_table(src).to_pylist()
    except (pa.ArrowInvalid, OSError) as exc:
        raise CliError(f"--tasks {src} is not a readable Parquet file ({exc})") from exc
    if rows and "task_tar" not in rows[0]:
        raise CliError(f"--tasks {src} has no task_tar column; pass a forge stage's tasks.parquet")
    try:
        written = export_rows(rows, Path(args.out), org=args.org)
    except TaskFolderError as exc:
        raise CliError(str(exc)) from exc
    skipped = len(rows) - len(written)
    print(
        f"exported {len(written)} task folder(s) to {args.out}"
        + (f" ({skipped} failed rows skipped)" if skipped else "")
    )
    legacy = [d.name for d in written if not writes_numeric_reward(d)]
    if legacy:
        print(
            f"note: {len(legacy)} folder(s) (e.g. {legacy[0]}) were forged before reward.json held"
            " numbers only; Harbor rejects their reward: forge them again to run them there",
            file=sys.stderr,
        )
    return EXIT_KEPT


def cmd_import(args: argparse.Namespace) -> int:
    from clawloop.harness.taskfolder.folder import TaskFolderError
    from clawloop.harness.taskfolder.foreign import import_task_folder, task_folders

    out = Path(args.out)
    if out.is_dir():
        raise CliError(f"--out {out} is a folder: name the Parquet file to write")
    rows = []
    dropped: list[tuple[str, str]] = []
    folders: list[Path] = []
    for d in args.dirs:
        if not Path(d).exists():
            raise CliError(f"no such task folder {d}")
        try:  # a task folder, ours or foreign, or a dataset folder of them
            folders += task_folders(Path(d))
        except TaskFolderError as exc:
            raise CliError(str(exc)) from exc
    _check_out(out)
    for t in folders:  # one bad task is dropped with its reason; the rest import
        instruction = Path(t) / "instruction.md"
        try:
            if instruction.exists() and not instruction.is_file():  # verify would drop it
                raise TaskFolderError(f"{instruction} is a folder, not a file: the task's prompt")
            rows.append(import_task_folder(t))
        except (TaskFolderError, OSError, ValueError) as exc:
            dropped.append((str(t), str(exc)))
    if not rows:
        raise CliError(
            f"no task imported from {len(folders)} folder(s): "
            + "; ".join(why for _, why in dropped[:3])
        )
    n, out = _write_rows(rows, Path(args.out), "harbor")
    print(
        f"imported {n} task folder(s) into {out}"
        + (f"; dropped {len(dropped)}:" if dropped else "")
    )
    for folder, why in dropped:
        print(f"  dropped {folder}: {why}")
    for r in rows:
        if r["build_log"].startswith("imported foreign"):  # say what running it needs
            print(f"  {r['task_id']}: {r['build_log'].partition('; ')[2]}")
    return EXIT_KEPT


def _check_out(out: Path) -> None:
    """CliError unless `out` names a file to write in a folder that exists (none is made)."""
    if out.is_dir():
        raise CliError(f"--out {out} is a folder: name the Parquet file to write")
    if not out.parent.is_dir():
        raise CliError(
            f"--out {out}: the folder {out.parent} does not exist; create it first (clawloop "
            "makes no folders for an output file)"
        )


def _write_rows(rows: list[dict[str, Any]], out: Path, fmt: str) -> tuple[int, Path]:
    """Write FORGED rows to `out` (temp + rename); CliError for a task id imported twice."""
    from clawloop.storage.artifacts import SchemaError, parquet_bytes
    from clawloop.storage.schemas import FORGED

    ids = [r["task_id"] for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise CliError(
            f"task id {dup[0]} is imported twice; each task's name must differ (import two data "
            "sets that share ids into separate files)"
        )
    try:
        data, n = parquet_bytes(rows, FORGED, where=f"import {fmt}")
    except SchemaError as exc:
        raise CliError(str(exc)) from exc
    from clawloop.storage import fs

    _check_out(out)
    # Temp + rename (removed on failure), the umask's mode: never a half-written Parquet.
    fs.write_bytes_atomic(str(out), data)
    return n, out


def detect_format(path: Path) -> str:
    """ "harbor" or "clawgym" for a task folder or a data set folder of them; CliError else."""
    from clawloop.harness.taskfolder.clawgym import clawgym_folders
    from clawloop.harness.taskfolder.folder import TaskFolderError
    from clawloop.harness.taskfolder.foreign import task_folders

    if not path.exists():
        raise CliError(f"no such task folder {path}")
    if clawgym_folders(path):
        return "clawgym"
    try:
        task_folders(path)
    except TaskFolderError:
        raise CliError(
            f"{path}: neither a Harbor task folder (task.toml) nor a ClawGym one (data_entry.json"
            " + reward/reward.sh), nor a data set folder of either"
        ) from None
    return "harbor"


def cmd_import_clawgym(args: argparse.Namespace) -> int:
    from clawloop.harness.sandbox.backend import open_sandbox
    from clawloop.harness.taskfolder.clawgym import clawgym_folders, import_clawgym

    folders: list[Path] = []
    for d in args.dirs:
        if not Path(d).exists():
            raise CliError(f"no such task folder {d}")
        found = clawgym_folders(Path(d))
        if not found:
            try:
                harbor = detect_format(Path(d)) == "harbor"
            except CliError:
                harbor = False
            hint = " (it is a Harbor one: clawloop import harbor)" if harbor else ""
            raise CliError(f"{d}: not a ClawGym task folder nor a data set folder of them{hint}")
        folders += found
    _check_out(Path(args.out))
    check_threshold_arg(args.threshold)
    with open_sandbox(_sandbox(args.backend)) as sb:  # asked which modules checkers may import
        res = import_clawgym(folders, sb, args.threshold)
    if not res.rows:
        raise CliError(
            f"no task imported from {len(folders)} folder(s): "
            + "; ".join(why for _, why in res.dropped[:3])
        )
    n, out = _write_rows(res.rows, Path(args.out), "clawgym")
    print(
        f"imported {n} of {len(folders)} ClawGym task(s) into {out}"
        + (f"; dropped {len(res.dropped)}:" if res.dropped else "")
    )
    for folder, why in res.dropped:
        print(f"  dropped {folder}: {why}")
    for task_id, note in res.warnings:
        print(f"  warning {task_id}: {note}")
    return EXIT_KEPT


def check_threshold_arg(threshold: float) -> float:
    """--threshold as a pass threshold (more than 0, at most 1), else CliError."""
    from clawloop.harness.taskfolder.clawgym import check_threshold
    from clawloop.harness.taskfolder.folder import TaskFolderError

    try:
        return check_threshold(threshold)
    except TaskFolderError as exc:
        raise CliError(f"--threshold: {exc}") from None


def cmd_import_auto(args: argparse.Namespace) -> int:
    formats = {detect_format(Path(d)) for d in args.dirs}
    if len(formats) > 1:
        raise CliError("the folders mix Harbor and ClawGym tasks; import each format on its own")
    fmt = formats.pop()
    print(f"detected format: {fmt}")
    return cmd_import_clawgym(args) if fmt == "clawgym" else cmd_import(args)


def _guard(fn: Any) -> Any:
    """Turn expected failures into one clear line and exit 2."""

    def run(args: argparse.Namespace) -> int:
        from clawloop.harness.sandbox.base import SandboxError
        from clawloop.harness.taskfolder.folder import TaskFolderError

        try:
            return fn(args)
        except (CliError, SandboxError, TaskFolderError, OSError) as exc:
            print(f"clawloop {args.command}: {exc}", file=sys.stderr)
            return EXIT_ERROR

    return run


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands to the `clawloop` parser."""
    p = sub.add_parser("forge", help="forge one task folder from a generator file and a seed")
    p.add_argument(
        "generator", help="generator .py file (GENERATOR, build(seed), solve(workspace))"
    )
    p.add_argument("--seed", type=int, required=True, help="seed passed to build()")
    p.add_argument("--out", required=True, help="task folder to write (must not exist or be empty)")
    _add_backend(p)
    p.set_defaults(func=_guard(cmd_forge))

    p = sub.add_parser("verify", help="run the agent-free checks on a task folder")
    p.add_argument("task_dir", help="a Harbor-format task folder written by `clawloop forge`")
    p.add_argument("--json", action="store_true", help="print the verdict and checks as JSON")
    _add_backend(p)
    p.set_defaults(func=_guard(cmd_verify))

    p = sub.add_parser("export", help="export tasks (Harbor folders, a dataset) or trajectories")
    fmt = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
    h = fmt.add_parser("harbor", help="one Harbor task folder per forged task")
    h.add_argument("--tasks", required=True, help="a forge stage's tasks.parquet")
    h.add_argument("--out", required=True, help="folder to write <task_id>/ folders into")
    h.add_argument(
        "--org", default="clawloop",
        help="org of each folder's [task] name, ORG/<task_id> (Harbor requires org/name)",
    )  # fmt: skip
    h.set_defaults(func=_guard(cmd_export))
    from clawloop.flows.cli import export as export_cli

    export_cli.register_export(fmt)  # export trajectories | tasks: a run as HF datasets

    p = sub.add_parser("import", help="import plain task folders as forged-task rows")
    fmt = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
    h = fmt.add_parser("harbor", help="Harbor task folders (clawloop's or any Harbor task's)")
    h.add_argument("dirs", nargs="+", help="task folders, or dataset folders of task folders")
    h.add_argument("--out", required=True, help="Parquet file to write (FORGED schema)")
    h.set_defaults(func=_guard(cmd_import))
    for name, fn, what in (
        ("clawgym", cmd_import_clawgym, "ClawGym task folders (data_entry.json, reward/reward.sh)"),
        ("auto", cmd_import_auto, "detect the format (Harbor or ClawGym) from the folders"),
    ):
        c = fmt.add_parser(name, help=what)
        c.add_argument("dirs", nargs="+", help="task folders, or data set folders of them")
        c.add_argument("--out", required=True, help="Parquet file to write (FORGED schema)")
        c.add_argument(
            "--threshold", type=float, default=1.0,
            help="ClawGym: passed when reward.sh's score >= this (default 1.0; the score is kept)",
        )  # fmt: skip
        _add_backend(c)
        c.set_defaults(func=_guard(fn))
