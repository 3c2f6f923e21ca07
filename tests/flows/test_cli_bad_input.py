"""Every `clawloop` verb on bad input: one line on stderr (no traceback), a non-zero exit, a
precise message (a missing path vs the wrong kind of thing), and nothing half-written. The table
is the contract; the last tests check that the sound input next to each case still works."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from clawloop.flows.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
HIVE = FIXTURES / "tasks" / "hive_totals"

# (verb, argv with T = this test's folder, the message's text, exit code)
TABLE = [
    (
        "run",
        "run --config T/list.yaml --no-prefect",
        "the top level must be a mapping of sections (iterations:, storage:, ...), got a list",
        2,
    ),
    ("run", "run --config T/missing.yaml", "config file T/missing.yaml does not exist", 2),
    (
        "run",
        "run --config T/bool.yaml --no-prefect",
        "iterations: Input should be a valid integer",
        2,
    ),
    (
        "run",
        "run --config T/k1000.yaml --iterations 1 --no-prefect",
        "iterations: Input should be less than or equal to 100 (got 1000); the command line overrides it, but fix the file",
        2,
    ),
    ("run", "run --run-id ../../escape --root T/r", "run id '../../escape' is not a name", 2),
    ("run", "run --iterations abc", "argument --iterations: invalid int value: 'abc'", 2),
    (
        "run",
        "run --runner dask --no-prefect --root T/r",
        "--runner dask is a Prefect task runner: drop --no-prefect",
        2,
    ),
    (
        "rerun",
        "rerun --run-id nope --iteration 1 --stage forge --root T",
        "no run 'nope' under T",
        2,
    ),
    (
        "rerun",
        "rerun --run-id nope --iteration 1 --stage bogus",
        "argument --stage: invalid choice: 'bogus'",
        2,
    ),
    ("runs", "runs --root T/nonexistent", "no storage root T/nonexistent", 2),
    ("sweep", "sweep extra", "unrecognized arguments: extra", 2),
    (
        "serve",
        "serve --config T/list.yaml",
        "the top level must be a mapping of sections (iterations:, storage:, ...), got a list",
        2,
    ),
    ("report", "report --run nope --root T", "no run 'nope' under T", 2),
    (
        "export trajectories",
        "export trajectories --run nope --root T --out T/o",
        "no run 'nope' under T",
        2,
    ),
    ("export tasks", "export tasks --run nope --root T --out T/o", "no run 'nope' under T", 2),
    (
        "export harbor",
        "export harbor --tasks T/file.txt --out T/o",
        "--tasks T/file.txt is not a readable Parquet file",
        2,
    ),
    (
        "export harbor",
        "export harbor --tasks T/missing.parquet --out T/o",
        "--tasks T/missing.parquet does not exist",
        2,
    ),
    (
        "import harbor",
        f"import harbor {HIVE} --out T/existing",
        "--out T/existing is a folder: name the Parquet file to write",
        2,
    ),
    (
        "import harbor",
        "import harbor T/folder_prompt --out T/x.parquet",
        "T/folder_prompt/instruction.md is a folder, not a file",
        2,
    ),
    (
        "import harbor",
        "import harbor T/nonexistent --out T/x.parquet",
        "no such task folder T/nonexistent",
        2,
    ),
    (
        "import clawgym",
        "import clawgym T/nonexistent --out T/x.parquet",
        "no such task folder T/nonexistent",
        2,
    ),
    (
        "import clawgym",
        f"import clawgym {HIVE} --out T/x.parquet",
        "not a ClawGym task folder nor a data set folder of them (it is a Harbor one",
        2,
    ),
    ("import auto", "import auto T/nonexistent --out T/x.parquet", "no such task folder", 2),
    ("audit", "audit T/nonexistent", "no such task folder T/nonexistent", 2),
    (
        "plan",
        "plan --config T/nonexistent.yaml",
        "config file T/nonexistent.yaml does not exist",
        2,
    ),
    ("audit", "audit T/file.txt", "T/file.txt is a file, not a task folder", 2),
    ("verify", "verify T/nonexistent", "no such task folder T/nonexistent", 2),
    ("verify", "verify T/file.txt", "T/file.txt is a file, not a task folder", 2),
    (
        "forge",
        "forge T/missing.py --seed 1 --out T/o",
        "generator file T/missing.py does not exist",
        2,
    ),
    ("generators", "generators render nope --out T/g.py", "unknown capability 'nope'", 2),
    (
        "rollout",
        "rollout T/nonexistent",
        "T/nonexistent is not a task folder (no instruction.md)",
        2,
    ),
    (
        "train",
        "train --trajectories T/file.txt --band T/file.txt --base-model m --out T/o",
        "--trajectories T/file.txt is not a Parquet file",
        2,
    ),
    (
        "train",
        "train --trajectories T/missing.parquet --band T/file.txt --base-model m --out T/o",
        "--trajectories T/missing.parquet does not exist",
        2,
    ),
    ("tiny-model", "tiny-model T/file.txt", "T/file.txt is a file, not a folder", 2),
    (
        "skills graph",
        "skills graph T/nonexistent --out T/g --heuristic",
        "T/nonexistent is not a folder",
        2,
    ),
    (
        "skills sample",
        "skills sample T/nonexistent --n 2",
        "T/nonexistent is not a skill-graph folder",
        2,
    ),
    ("domain", "domain bogus", "invalid choice: 'bogus'", 2),
    ("(none)", "bogus", "argument COMMAND: invalid choice: 'bogus'", 2),
]


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "list.yaml").write_text("- iterations: 1\n")
    (tmp_path / "bool.yaml").write_text("iterations: true\n")
    (tmp_path / "k1000.yaml").write_text("iterations: 1000\n")
    (tmp_path / "file.txt").write_text("not parquet, not a folder\n")
    (tmp_path / "existing").mkdir()
    prompt = tmp_path / "folder_prompt"
    shutil.copytree(HIVE, prompt)
    (prompt / "instruction.md").unlink()
    (prompt / "instruction.md").mkdir()
    return tmp_path


def _snapshot(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mode for p in root.rglob("*")}


@pytest.mark.parametrize(
    ("verb", "argv", "message", "code"), TABLE, ids=[f"{v}: {a}" for v, a, *_ in TABLE]
)
def test_bad_input_is_one_line_and_a_non_zero_exit(inputs, capsys, verb, argv, message, code):
    t = str(inputs)
    before = _snapshot(inputs)
    args = [a.replace("T/", f"{t}/") if a != "T" else t for a in argv.split()]
    try:
        got = main(args)
    except SystemExit as exc:  # argparse's usage errors
        got = exc.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert got == code, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert message.replace("T/", f"{t}/").replace(" T", f" {t}") in lines[0]
    assert _snapshot(inputs) == before, "a refused command wrote or changed files"


def test_the_table_covers_every_verb():
    from clawloop.flows.cli import make_parser

    verbs = make_parser()._subparsers._group_actions[0].choices
    covered = {v.split()[0] for v, *_ in TABLE}
    missing = set(verbs) - covered
    assert not missing, f"verbs with no bad-input case: {sorted(missing)}"


def test_import_writes_an_ordinary_file_and_no_temp_file(tmp_path, capsys):
    task = tmp_path / "task"
    good = FIXTURES / "generators" / "good.py"
    argv = ["forge", str(good), "--seed", "2", "--out", str(task), "--backend", "bwrap"]
    assert main(argv) == 0, capsys.readouterr().err
    out = tmp_path / "o" / "tasks.parquet"
    out.parent.mkdir()  # import makes no folder for its output (issue 34)
    assert main(["import", "harbor", str(task), "--out", str(out)]) == 0, capsys.readouterr().err
    old = __import__("os").umask(0)
    __import__("os").umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~old
    assert [p.name for p in out.parent.iterdir()] == ["tasks.parquet"]


def test_runs_with_the_default_root_before_any_run_is_not_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no runs/ here: nothing has run yet
    assert main(["runs"]) == 0
    assert "no runs under runs yet" in capsys.readouterr().out
