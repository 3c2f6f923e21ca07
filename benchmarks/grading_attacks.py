"""The grading attack table (issue 34): each agent-side trick of tests/doubles/grading_attacks.py
against a ClawGym, a Harbor and one of our own tasks, through `clawloop rollout` with a scripted
policy, per backend; and a right solution by another route. Prints one row per case: trick, task
kind, backend, reward, reason.

    .venv/bin/python benchmarks/grading_attacks.py [--backends bwrap,docker] [--tricks a,b]
        [--before DIR]

With --before DIR (a folder holding an older `clawloop` package, e.g. a `git worktree` of an
earlier commit linked as DIR/clawloop) every case is also run on that code, in a subprocess of
this script with PYTHONPATH=DIR, and each row gives the reward before and after. A ClawGym folder
is passed as the Harbor folder its import writes, which every version rolls out.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from doubles.grading_attacks import SOUND, TASKS, TRICKS, attack, clawgym_tiny  # noqa: E402

from clawloop.harness.taskfolder.clawgym import read_task, write_harbor_folder  # noqa: E402


def _folder(task: Path, tmp: Path) -> Path:
    if (task / "data_entry.json").is_file():
        return write_harbor_folder(read_task(task), tmp / f"h-{task.name}")
    return task


def rows(backends: list[str], tricks: list[str]) -> list[tuple[str, str, str, str, str]]:
    """(trick, kind, backend, reward, reason) for every case, printed as each ends."""
    out = []
    for backend in backends:
        for trick in [*tricks, "sound_solution"]:
            for kind in sorted(TASKS):
                with tempfile.TemporaryDirectory(prefix="clawloop-attack-") as tmp:
                    if trick == "sound_solution":
                        task = clawgym_tiny(Path(tmp)) if kind == "clawgym" else TASKS[kind]
                        commands = SOUND[kind]
                    else:
                        task, commands = TASKS[kind], TRICKS[trick]
                    try:
                        got = attack(_folder(task, Path(tmp)), commands, backend, Path(tmp, "o"))
                        reward, reason = f"{got['reward']:.2f}", got["reason"][:110]
                    except Exception as exc:  # a version that cannot run the case says so
                        reward, reason = "error", str(exc)[:110]
                row = (trick, kind, backend, reward, reason.replace("\n", " ").replace("\t", " "))
                print("\t".join(row), file=sys.stderr, flush=True)
                out.append(row)
    return out


def before(folder: str, argv: list[str]) -> dict[tuple[str, str, str], str]:
    """The rewards of the same cases on the clawloop package under `folder`."""
    env = dict(os.environ, PYTHONPATH=folder)
    res = subprocess.run(
        [sys.executable, __file__, *argv], env=env, capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        raise SystemExit(f"the run on {folder} failed: {res.stderr[-800:]}")
    got = {}
    for line in res.stdout.splitlines()[1:]:
        trick, kind, backend, reward, *_ = line.split("\t")
        got[(trick, kind, backend)] = reward
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="bwrap,docker")
    ap.add_argument("--tricks", default=",".join(TRICKS))
    ap.add_argument("--before", default="", help="a folder holding an older clawloop package")
    args = ap.parse_args(argv)
    same = ["--backends", args.backends, "--tricks", args.tricks]
    old = before(args.before, same) if args.before else None
    table = rows(args.backends.split(","), args.tricks.split(","))
    if old is None:
        print("trick\tkind\tbackend\treward\treason")
        for row in table:
            print("\t".join(row))
        return 0
    print("trick\tkind\tbackend\tbefore\tafter\treason (after)")
    for trick, kind, backend, reward, reason in table:
        was = old.get((trick, kind, backend), "-")
        print(f"{trick}\t{kind}\t{backend}\t{was}\t{reward}\t{reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
