"""`clawloop audit DIR... [--json] [--out audit.parquet]`: audit task data sets without reference
solutions (harness/audit.py): per task the verifier's no-op score, the trivial probes'
scores and the flags (no-op passes, answer files, instruction leaks of checked values); a table
and totals, or with --json exactly {"tasks": [{"task_id", "noop", "probes", "flags"}], "summary"}.

DIR: ClawGym or Harbor task folders, or data set folders of them. Exit 0 when audited (flags are
findings, not failures), 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clawloop.flows.cli.config_flags import add_config_flags, config_from_args
from clawloop.harness.audit import AuditConfig, audit_task, summarize


class AuditError(Exception):
    """Bad input: one line, exit 2."""


def audit_folders(dirs: list[str], sample: int = 0, seed: int = 0) -> list[Path]:
    """Every task folder the paths name (ClawGym first, else Harbor); `sample` > 0: that many,
    drawn with `seed`, in folder order."""
    from clawloop.diagnosis.external import eval_set_folders
    from clawloop.harness.taskfolder.folder import TaskFolderError

    folders: list[Path] = []
    for d in dirs:
        if not Path(d).exists():
            raise AuditError(f"no such task folder {d}")
        if not Path(d).is_dir():
            raise AuditError(f"{d} is a file, not a task folder nor a data set folder")
        try:
            folders += eval_set_folders(Path(d))
        except TaskFolderError as exc:
            raise AuditError(
                f"{d}: neither a ClawGym nor a Harbor task folder, nor a data set of them ({exc})"
            ) from exc
    if 0 < sample < len(folders):
        keep = set(random.Random(seed).sample(range(len(folders)), sample))
        folders = [f for i, f in enumerate(folders) if i in keep]
    return folders


def _write_parquet(audits: list[Any], out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clawloop.storage import fs

    table = pa.table(
        {
            "task_id": [a.task_id for a in audits],
            "path": [a.path for a in audits],
            "noop": pa.array([a.noop for a in audits], pa.float64()),
            "probes": [json.dumps(a.probes, sort_keys=True) for a in audits],
            "flags": pa.array([a.flags for a in audits], pa.list_(pa.string())),
            "error": [a.error for a in audits],
        }
    )
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    # the one atomic writer (temp + rename, the umask's mode), as the import verbs use
    fs.write_bytes_atomic(str(out), buf.getvalue().to_pybytes())


def _table(audits: list[Any], summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    names = sorted({p for a in audits for p in a.probes})
    t = Table(title=f"audit: {len(audits)} task(s)")
    for col in ["task", "noop", *names, "flags"]:
        t.add_column(col, justify="left" if col in ("task", "flags") else "right")
    for a in audits:
        t.add_row(a.task_id, f"{a.noop:.3f}",
                  *[f"{a.probes[n]:.3f}" if n in a.probes else "-" for n in names],
                  ", ".join(a.flags) if not a.error else f"ERROR {a.error[:80]}")  # fmt: skip
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(t)
    s = Table(title="audit totals")
    for col in ("probe", "tasks", "mean score", "above 0", "passes"):
        s.add_column(col, justify="left" if col == "probe" else "right")
    s.add_row("noop", str(summary["tasks"]), f"{summary['noop_mean'] or 0:.4f}",
              str(summary["noop_above_0"]), str(summary["noop_passes"]))  # fmt: skip
    for name, p in summary["probes"].items():
        s.add_row(name, str(p["tasks"]), f"{p['mean']:.4f}", str(p["above_0"]), str(p["passes"]))
    console.print(s)
    flags = ", ".join(f"{k}: {v}" for k, v in sorted(summary["flags"].items())) or "none"
    print(f"flagged tasks: {summary['flagged_tasks']} of {summary['tasks']} ({flags}); "
          f"not audited (unreadable task, or its checker printed no score): {summary['errors']}")  # fmt: skip


def _check_args(cfg: AuditConfig, out: str | None) -> None:
    """AuditError (or CliError) for flags no audit can run with, before any task is read."""
    from clawloop.flows.cli.task import _check_out, check_threshold_arg

    check_threshold_arg(cfg.threshold)
    if cfg.sample < 0:
        raise AuditError(f"--sample {cfg.sample}: give a number of tasks >= 0 (0: all of them)")
    if cfg.workers < 1:
        raise AuditError(f"--workers {cfg.workers}: give at least 1")
    if out:
        _check_out(Path(out))


def cmd_audit(args: argparse.Namespace) -> int:
    from clawloop.flows.cli.task import CliError, _sandbox

    cfg = config_from_args(args, AuditConfig)
    try:
        _check_args(cfg, args.out)
        folders = audit_folders(args.dirs, cfg.sample, cfg.seed)
        sandbox = _sandbox(cfg.backend)
    except (AuditError, CliError) as exc:
        print(f"clawloop audit: {exc}", file=sys.stderr)
        return 2
    with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
        audits = list(pool.map(lambda f: audit_task(f, sandbox, cfg.threshold), folders))
    summary = summarize(audits)
    if args.out:
        _write_parquet(audits, Path(args.out))
    if args.json:
        print(json.dumps({"tasks": [a.as_json() for a in audits], "summary": summary}))
    else:
        _table(audits, summary)
        if args.out:
            print(f"wrote {args.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="audit task data sets: no-op, trivial probes, leaks")
    p.add_argument("dirs", nargs="+", help="ClawGym/Harbor task folders or data set folders")
    p.add_argument("--json", action="store_true", help="print {tasks, summary} as JSON only")
    p.add_argument("--out", help="Parquet file to write, one row per task")
    add_config_flags(p, AuditConfig)  # --threshold --sample --seed --workers --backend
    p.set_defaults(func=cmd_audit)
