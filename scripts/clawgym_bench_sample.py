"""A fixed ClawGym-Bench sample: every k-th task of ClawGym-Agents' RL/data/clawgym_eval (200
tasks), so that every learning run grades the same external tasks. Offline: it reads a local copy.

    # a checkout (or its clawgym_eval folder): every 5th task -> 40 (task_0000, task_0005, ...)
    .venv/bin/python scripts/clawgym_bench_sample.py CLAWGYM_AGENTS_CHECKOUT \\
        --out ~/.cache/clawloop/clawgym-bench-40 [--n 40]
    # a bare git mirror (no work tree): the tasks are read from REV with `git archive`
    .venv/bin/python scripts/clawgym_bench_sample.py /work/.mirror/ClawGym+ClawGym-Agents/repo \\
        --rev HEAD --out ~/.cache/clawloop/clawgym-bench-40

Then `benchmarks/learning.py ... --eval-tasks OUT`. OUT/SAMPLE.json records the source, the
revision (for a git source), the rule and the chosen task names; the folders are copied whole.
Exit status 1, with the reason, when the source holds no ClawGym tasks or fewer than --n.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from clawloop.harness.taskfolder.clawgym import clawgym_folders

EVAL_DIR = "RL/data/clawgym_eval"


def evenly_spaced(names: list[str], n: int) -> list[str]:
    """`n` of the sorted `names`, every len//n-th from the first (200 names, n=40: every 5th)."""
    if n < 1 or n > len(names):
        raise ValueError(f"cannot pick {n} of {len(names)} tasks")
    ordered = sorted(names)
    step = len(ordered) // n
    return ordered[::step][:n]


def folder_tasks(src: Path) -> tuple[Path, list[str]]:
    """(the data set folder, its task folder names) of a checkout or a clawgym_eval folder."""
    root = src / EVAL_DIR if (src / EVAL_DIR).is_dir() else src
    return root, [p.name for p in clawgym_folders(root) if p != root]


def git_tasks(git_dir: Path, rev: str) -> list[str]:
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "--name-only", f"{rev}:{EVAL_DIR}"],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(
            f"{git_dir} has no {EVAL_DIR} at {rev}: {out.stderr.strip()} "
            "(pass a ClawGym-Agents git dir and a revision that has it)"
        )
    return sorted(n for n in out.stdout.split() if n.startswith("task_"))


def git_copy(git_dir: Path, rev: str, names: list[str], out: Path) -> None:
    paths = [f"{EVAL_DIR}/{n}" for n in names]
    tar = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", rev, *paths],
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(tmp, filter="data")
        for n in names:
            shutil.copytree(Path(tmp) / EVAL_DIR / n, out / n)


def resolve_rev(git_dir: Path, rev: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "source", type=Path, help="a ClawGym-Agents checkout, its clawgym_eval folder, or a git dir"
    )
    p.add_argument(
        "--out", type=Path, required=True, help="the sample folder (must not exist or be empty)"
    )
    p.add_argument("--n", type=int, default=40, help="tasks in the sample (default 40)")
    p.add_argument("--rev", default="HEAD", help="revision, for a git dir source")
    args = p.parse_args(argv)
    src = args.source.expanduser()
    out = args.out.expanduser()
    if out.exists() and any(out.iterdir()):
        print(f"{out} exists and is not empty: remove it or choose another --out", file=sys.stderr)
        return 1
    is_git = (src / "HEAD").is_file() and (src / "objects").is_dir()
    if is_git:
        names, rev = git_tasks(src, args.rev), resolve_rev(src, args.rev)
    elif src.is_dir():
        root, names = folder_tasks(src)
        rev = None
    else:
        print(f"{src} is not a folder: pass a ClawGym-Agents checkout or git dir", file=sys.stderr)
        return 1
    try:
        picked = evenly_spaced(names, args.n)
    except ValueError as exc:
        print(f"{src}: {exc} (found {len(names)} ClawGym task folders)", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    if is_git:
        git_copy(src, rev, picked, out)
    else:
        for n in picked:
            shutil.copytree(root / n, out / n)
    manifest = {
        "source": str(src),
        "rev": rev,
        "of": len(names),
        "rule": f"sorted task folders, every {len(names) // args.n}th from the first",
        "tasks": picked,
    }
    (out / "SAMPLE.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(picked)} of {len(names)} ClawGym-Bench tasks -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
