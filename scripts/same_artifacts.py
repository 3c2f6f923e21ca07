"""Do two checkouts of clawloop write the same artifacts? Runs the loop on a fixed seed once per
checkout (each in its own process, with its own tree first on PYTHONPATH and its own storage
root), then compares every file the runs wrote, byte for byte; for a Parquet table that differs,
it names the columns that differ. A restructure that changes no behaviour leaves only the
differences that no code fixes: times, ports and paths that each run has of its own.

    python scripts/same_artifacts.py BEFORE_DIR AFTER_DIR [--iterations 1] [--out /tmp/same]

BEFORE_DIR and AFTER_DIR each hold a `clawloop/` tree (e.g. `git archive REV --prefix=clawloop/
| tar -x -C BEFORE_DIR`). A file that differs is named with how: a Parquet table's columns, a JSON
record's fields, a step cache's product; where only per-run values differ (PER_RUN_FIELDS,
TIMINGS: when, who, how long, the code's own hash and the cache keys that hold it) it says so.
Exit 0 when every file is the same but for per-run values, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

RUN_ID = "same"
# The run: the local profile, one iteration, with the policy server's requests in one order (its
# sampler is one seeded stream: two workers' requests interleave in whatever order the threads
# reach it) and a request timeout no slow, shared machine reaches.
CONFIG = """\
rollout: {workers: 1}
diagnose: {workers: 1}
llm: {request_timeout_s: 1800}
"""
# A JSON record's fields that each run has of its own whatever its code (the last key of a field's
# path): when and by which process it ran, the code's hash and the cache keys that hold it, and
# each run's own storage root. A manifest's `files[].sha256`/`bytes` follow the file they name,
# which is compared on its own; its `upstream` hashes follow the upstream manifests.
PER_RUN_FIELDS = {
    "started_at",
    "finished_at",
    "saved_at",
    "heartbeat",
    "pid",
    "start",
    "token",
    "code_version",
    "inputs_hash",
    "sha256",
    "bytes",
}
PER_RUN_UNDER = ("upstream",)
PER_RUN_PATHS = {"config.storage.root"}
# Measures of the machine a run ran on: wall-clock seconds and peak memory (rows and summaries).
TIMINGS = {
    "duration_s",
    "latency_s",
    "seconds",
    "wall_s",
    "seconds_per_task",
    "train_seconds",
    "plan_peak_mb",
}


def json_fields(a: object, b: object, path: str = "") -> list[str]:
    """The paths (`summary.domains.x.seconds_per_task`, `files[0].sha256`) where two JSON values
    differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(sub)
            else:
                out += json_fields(a[k], b[k], sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            p
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for p in json_fields(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [path or "(the whole value)"]


def per_run(path: str) -> bool:
    """Whether a differing field is one each run has of its own (PER_RUN_FIELDS, TIMINGS)."""
    keys = [k.split("[")[0] for k in path.split(".")]
    return keys[-1] in PER_RUN_FIELDS | TIMINGS or keys[0] in PER_RUN_UNDER or path in PER_RUN_PATHS


def _names(fields: list[str]) -> str:
    """Per-run fields by name (`upstream` for the upstream hashes), each once."""
    names = {
        f.split(".")[0] if f.split(".")[0] in PER_RUN_UNDER else f.split(".")[-1] for f in fields
    }
    return ", ".join(sorted(k.split("[")[0] for k in names))


def json_record(a: Path, b: Path) -> tuple[str, bool]:
    """(how two JSON files differ, whether only in per-run fields)."""
    import json

    try:
        fields = json_fields(json.loads(a.read_text()), json.loads(b.read_text()))
    except ValueError as exc:
        return f"bytes differ (not JSON: {exc})", False
    if not fields:
        return "same values, other bytes", True
    real = [f for f in fields if not per_run(f)]
    if real:
        return f"DIFFERS in {', '.join(real[:12])}", False
    return f"per-run fields only: {_names(fields)}", True


def step_cache(a: Path, b: Path) -> tuple[str, bool]:
    """A synthesis step's cache (steps/<source>.json.gz: its cache key, which holds the code
    version, and its product): (whether the products are the same, whether only per-run values
    differ)."""
    import gzip
    import json

    pa, pb = (json.loads(gzip.decompress(p.read_bytes())).get("product") or {} for p in (a, b))
    fields = json_fields(pa, pb)
    if not fields:
        return "step cache: key differs (code version), product same", True
    real = [f for f in fields if not per_run(f)]
    if not real:
        return (
            f"step cache: key differs (code version), product same but per-run {_names(fields)}",
            True,
        )
    return f"step cache: product DIFFERS in {', '.join(real[:12])}", False


def run_loop(tree: Path, root: Path, iterations: int, log: Path) -> int:
    """`clawloop run` of the checkout at `tree` (which holds clawloop/) into `root`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    config = log.with_suffix(".yaml")
    config.write_text(CONFIG)
    argv = [
        sys.executable,
        "-m",
        "clawloop.flows.cli",
        "run",
        "--no-prefect",
        "--config",
        str(config),
    ]
    argv += ["--run-id", RUN_ID, "--root", str(root), "--iterations", str(iterations)]
    with log.open("w") as out:
        return subprocess.run(
            argv, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode


def files_of(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def parquet_columns(a: Path, b: Path) -> str:
    """The columns whose values differ between two Parquet files ("" when none, or unreadable)."""
    try:
        import pyarrow.parquet as pq

        ta, tb = pq.read_table(a), pq.read_table(b)
    except Exception as exc:  # noqa: BLE001 (a report, not a check)
        return f"unreadable: {exc}"
    if ta.schema != tb.schema:
        return "schema differs"
    if ta.num_rows != tb.num_rows:
        return f"rows {ta.num_rows} vs {tb.num_rows}"
    cols = [c for c in ta.column_names if not ta.column(c).equals(tb.column(c))]
    named = [
        f"{c} (timings only)"
        if c in TIMINGS or _same_but_timings(ta.column(c), tb.column(c))
        else c
        for c in cols
    ]
    return "columns: " + ", ".join(named) if cols else "same values, other bytes"


def _without_timings(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _same_but_timings(a: object, b: object) -> bool:
    """Two columns of JSON text that differ only in TIMINGS keys."""
    import json

    try:
        left = [_without_timings(json.loads(x)) for x in a.to_pylist()]
        right = [_without_timings(json.loads(x)) for x in b.to_pylist()]
    except (TypeError, ValueError):
        return False
    return left == right


def compare(a_root: Path, b_root: Path) -> tuple[list[str], list[str], list[str]]:
    """(same, per-run, differing) file names; a per-run or differing line says how."""
    a, b = files_of(a_root), files_of(b_root)
    same, own, diff = [], [], []
    for rel in sorted(set(a) | set(b)):
        if rel not in a or rel not in b:
            diff.append(f"{rel}: only in {'before' if rel in a else 'after'}")
            continue
        if a[rel].read_bytes() == b[rel].read_bytes():
            same.append(rel)
            continue
        if rel.endswith(".parquet"):
            how = parquet_columns(a[rel], b[rel])
            cols = how.removeprefix("columns: ").split(", ")
            only_timings = how.startswith("columns: ") and all(
                c.endswith(" (timings only)") for c in cols
            )
        elif "/steps/" in rel and rel.endswith(".json.gz"):
            how, only_timings = step_cache(a[rel], b[rel])
        elif rel.endswith(".json"):
            how, only_timings = json_record(a[rel], b[rel])
        else:
            how, only_timings = "bytes differ", False
        (own if only_timings else diff).append(f"{rel}: {how}")
    return same, own, diff


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("/tmp/same-artifacts"))
    ap.add_argument(
        "--only-run",
        action="store_true",
        help="run the loop for both (where not run yet), no compare",
    )
    args = ap.parse_args(argv)
    for tree in (args.before, args.after):
        if not (tree / "clawloop").is_dir():
            ap.error(
                f"{tree} holds no clawloop/ tree: git archive REV --prefix=clawloop/ | tar -x -C {tree}"
            )
    args.out.mkdir(parents=True, exist_ok=True)
    roots = {}
    for name, tree in (("before", args.before), ("after", args.after)):
        root = args.out / name
        if not (root / RUN_ID).is_dir():
            rc = run_loop(tree.resolve(), root, args.iterations, args.out / f"{name}.log")
            if rc != 0:
                print(f"{name}: clawloop run exited {rc}; see {args.out / f'{name}.log'}")
                return 2
        roots[name] = root / RUN_ID
    if args.only_run:
        return 0
    same, own, diff = compare(roots["before"], roots["after"])
    print(
        f"{len(same)} files byte-identical, {len(own)} differ only in per-run values, "
        f"{len(diff)} differ"
    )
    for line in own:
        print("  per run: " + line)
    for line in diff:
        print("  DIFFERS: " + line)
    return 0 if not diff else 1


if __name__ == "__main__":
    sys.exit(main())
