"""ClawGym grading parity: our grade of a task (its Harbor folder, graded by tests/test.sh in our
sandbox, as an episode is) against what the task's reward.sh prints run by itself (a bare
bubblewrap box at the task's mount dir, as ClawGym runs it), on the same files.

    .venv/bin/python benchmarks/clawgym_parity.py DIR [--probes noop,partial] [--limit N]

DIR: a ClawGym data set folder (RL/data/clawgym_eval) or task folder. Per task and probe
(noop: the untouched workspace; partial: the scripted partial solution of its family, see
harness/taskfolder/clawgym.probes) it prints one line where the two differ, then per probe: tasks,
equal, mean score, scores above 0, and per family how many tasks. Exit 1 when any differ.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from clawloop.harness.audit import grade_files, reference_score
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.clawgym import (
    clawgym_folders,
    probes,
    read_task,
    write_harbor_folder,
)


def same(ours: float, theirs: str) -> bool:
    try:
        return math.isclose(ours, float(theirs), rel_tol=0.0, abs_tol=1e-12)
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--probes", default="noop,partial")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args(argv)
    wanted = args.probes.split(",")
    folders = clawgym_folders(Path(args.dir))[: args.limit or None]
    cfg = SandboxConfig(backend="bwrap")
    scores: dict[str, list[float]] = defaultdict(list)
    equal: Counter[str] = Counter()
    families: Counter[str] = Counter()
    start = time.monotonic()
    for folder in folders:
        task = read_task(folder)
        families[task.family] += 1
        with tempfile.TemporaryDirectory(prefix="clawgym-parity-") as tmp:
            harbor = write_harbor_folder(task, Path(tmp) / "h")
            probe_files = {"noop": {}, **probes(task)}
            for name in wanted:
                if name not in probe_files:
                    continue
                files = probe_files[name]
                ours, _, reason = grade_files(harbor, files, cfg, Path(tmp) / "w")
                theirs = reference_score(task, files)
                scores[name].append(ours)
                # reward.sh printing nothing (its checker crashed) is the same outcome for both
                no_score = theirs == "" and reason.startswith("reward.sh printed no score")
                if no_score:
                    print(f"no score from reward.sh: {task.task_id} {name} (both)")
                if same(ours, theirs) or no_score:
                    equal[name] += 1
                else:
                    print(
                        f"DIFF {task.task_id} {name}: ours {ours!r} ({reason}) reward.sh {theirs!r}"
                    )
    print(f"{len(folders)} task(s) in {time.monotonic() - start:.0f}s; families {dict(families)}")
    print("| probe | tasks | equal | mean score | above 0 | max |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in wanted:
        s = scores.get(name, [])
        if s:
            print(f"| {name} | {len(s)} | {equal[name]} | {sum(s) / len(s):.4f} | "
                  f"{sum(x > 0 for x in s)} | {max(s):.3f} |")  # fmt: skip
    return 0 if all(equal[n] == len(scores[n]) for n in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
