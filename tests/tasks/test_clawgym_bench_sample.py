"""scripts/clawgym_bench_sample.py: the fixed ClawGym-Bench sample (every k-th task of
clawgym_eval), from a checkout folder and from a bare git mirror, with its SAMPLE.json record."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "clawgym_bench_sample.py"
spec = importlib.util.spec_from_file_location("clawgym_bench_sample", SCRIPT)
sample = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sample)


def test_every_fifth_of_200_is_the_40_task_sample():
    names = [f"task_{i:04d}" for i in range(200)]
    picked = sample.evenly_spaced(list(reversed(names)), 40)
    assert picked == [f"task_{i:04d}" for i in range(0, 200, 5)]
    assert sample.evenly_spaced(names[:7], 3) == ["task_0000", "task_0002", "task_0004"]
    with pytest.raises(ValueError, match="cannot pick 8 of 7"):
        sample.evenly_spaced(names[:7], 8)


def make_eval_set(root: Path, n: int) -> Path:
    eval_dir = root / sample.EVAL_DIR
    for i in range(n):
        task = eval_dir / f"task_{i:04d}"
        (task / "reward").mkdir(parents=True)
        (task / "data_entry.json").write_text(json.dumps({"id": i}))
        (task / "reward" / "reward.sh").write_text("echo 1\n")
        (task / "input_files").mkdir()
        (task / "input_files" / "data.csv").write_text(f"x\n{i}\n")
    (eval_dir / "notes").mkdir()  # not a task folder: ignored
    return eval_dir


def test_sample_from_a_checkout_copies_the_picked_tasks_whole(tmp_path, capsys):
    make_eval_set(tmp_path / "src", 10)
    out = tmp_path / "out"
    assert sample.main([str(tmp_path / "src"), "--out", str(out), "--n", "5"]) == 0
    want = [f"task_{i:04d}" for i in (0, 2, 4, 6, 8)]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == want
    assert (out / "task_0004" / "input_files" / "data.csv").read_text() == "x\n4\n"
    record = json.loads((out / "SAMPLE.json").read_text())
    assert record["tasks"] == want and record["of"] == 10 and record["rev"] is None
    # the same command again would mix two samples: refused, with the way out
    assert sample.main([str(tmp_path / "src"), "--out", str(out), "--n", "5"]) == 1
    assert "not empty" in capsys.readouterr().err
    # too few tasks: refused, saying how many it found
    assert sample.main([str(tmp_path / "src"), "--out", str(tmp_path / "o2"), "--n", "11"]) == 1
    assert "found 10 ClawGym task folders" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_sample_from_a_bare_git_mirror_reads_the_revision(tmp_path):
    work = tmp_path / "work"
    make_eval_set(work, 6)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "tasks")
    head = git("rev-parse", "HEAD")
    out = tmp_path / "out"
    assert sample.main([str(work / ".git"), "--rev", "HEAD", "--out", str(out), "--n", "3"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "task_0000",
        "task_0002",
        "task_0004",
    ]
    assert (out / "task_0002" / "reward" / "reward.sh").read_text() == "echo 1\n"
    assert json.loads((out / "SAMPLE.json").read_text())["rev"] == head
