"""The grading attack table (issue 34): each agent-side trick of tests/doubles/grading_attacks.py
against a ClawGym, a Harbor and one of our own tasks, through `clawloop rollout` with a scripted
policy, per backend; and a right solution by another route. Prints one row per case: trick, task
kind, backend, reward, reason.

    .venv/bin/python benchmarks/grading_attacks.py [--backends bwrap,docker] [--tricks a,b]

Run it with PYTHONPATH naming another clawloop checkout to get the same table for that code (a
ClawGym folder is passed as the Harbor folder its import writes, which every version rolls out).
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="bwrap,docker")
    ap.add_argument("--tricks", default=",".join(TRICKS))
    args = ap.parse_args(argv)
    print("trick\tkind\tbackend\treward\treason")
    for backend in args.backends.split(","):
        for trick in [*args.tricks.split(","), "sound_solution"]:
            for kind in sorted(TASKS):
                with tempfile.TemporaryDirectory(prefix="clawloop-attack-") as tmp:
                    if trick == "sound_solution":
                        task = clawgym_tiny(Path(tmp)) if kind == "clawgym" else TASKS[kind]
                        commands = SOUND[kind]
                    else:
                        task, commands = TASKS[kind], TRICKS[trick]
                    try:
                        got = attack(_folder(task, Path(tmp)), commands, backend, Path(tmp, "o"))
                        row = f"{got['reward']:.2f}\t{got['reason'][:110]}"
                    except Exception as exc:  # a version that cannot run the case says so
                        row = f"error\t{str(exc)[:110]}"
                print(f"{trick}\t{kind}\t{backend}\t{row}".replace("\n", " "), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
