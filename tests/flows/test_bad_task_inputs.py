"""Bad task inputs (issue 34 items 3 and 4): one bad task never aborts an import or an audit (it is
dropped with its reason and the rest imports), and inputs that used to be accepted but wrong are
refused with a clear message.

Each case builds its input beside a good task and runs the real CLI (`clawloop import ...`,
`clawloop audit ...`, `clawloop export harbor`, `clawloop runs`).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clawloop.flows.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
CLAWGYM = FIXTURES / "clawgym/task_0042"
HARBOR = FIXTURES / "harbor/count_lines"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# -- ClawGym data sets: a good task and a bad one ------------------------------------------------


def _clawgym_entry(task: Path, **changes: object) -> None:
    entry = json.loads((task / "data_entry.json").read_text())
    entry.update(changes)
    (task / "data_entry.json").write_text(json.dumps(entry))


def _deep_json(task: Path) -> None:
    (task / "data_entry.json").write_text("[" * 200_000 + "]" * 200_000)


def _sparse(path: Path, size: int = 2 << 30) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


CLAWGYM_BAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "data_entry.json nested 200k deep": (_deep_json, "nested too deep"),
    "a 300-character task id": (lambda t: _clawgym_entry(t, task_id="t" * 300), "not a plain name"),
    "a user query with \\ud800": (
        lambda t: _clawgym_entry(t, user_query="count \ud800 lines"),
        "not valid Unicode",
    ),
    "a 2 GB sparse input file": (
        lambda t: _sparse(t / "input_files/big.bin"),
        "over 64 MiB",
    ),
    "a task id with a newline": (
        lambda t: _clawgym_entry(t, task_id="task\n1"),
        "not a plain name",
    ),
    "a task id that is a list": (lambda t: _clawgym_entry(t, task_id=["a", "b"]), "is a list"),
}


@needs_bwrap
@pytest.mark.parametrize("case", sorted(CLAWGYM_BAD))
def test_a_bad_clawgym_task_is_dropped_and_the_rest_imports(case: str, tmp_path: Path) -> None:
    make, why = CLAWGYM_BAD[case]
    data = tmp_path / "set"
    shutil.copytree(CLAWGYM, data / "task_0042")
    shutil.copytree(CLAWGYM, data / "task_0999")
    make(data / "task_0999")
    out = tmp_path / "tasks.parquet"
    code, stdout, stderr = run("import", "auto", str(data), "--out", str(out), "--backend", "bwrap")
    assert code == 0, stderr
    assert "imported 1 of 2 ClawGym task(s)" in stdout and "dropped 1" in stdout
    assert why in stdout, stdout
    assert [r["task_id"] for r in pq.read_table(out).to_pylist()] == ["task_0042"]


# -- Harbor folders: a good task and a bad one ---------------------------------------------------


def _toml(task: Path, old: str, new: str) -> None:
    path = task / "task.toml"
    path.write_text(path.read_text().replace(old, new))


HARBOR_BAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "a task.toml that is not UTF-8": (
        lambda t: (t / "task.toml").write_bytes(b'version = "1.0"\n# \xff\xfe\n'),
        "not UTF-8",
    ),
    "a task.toml nested 100k deep": (
        lambda t: (t / "task.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n"),
        "nested too deep",
    ),
    "timeout_sec = nan": (lambda t: _toml(t, "timeout_sec = 60.0", "timeout_sec = nan"), "nan"),
    'timeout_sec = "abc"': (
        lambda t: _toml(t, "timeout_sec = 60.0", 'timeout_sec = "abc"'),
        "not a number",
    ),
    "a task name with a newline": (
        lambda t: _toml(t, '"acme/zz-bad"', '"acme/zz\\nbad"'),
        "not a plain name",
    ),
    "a Dockerfile COPY outside the build context": (
        lambda t: (t / "environment/Dockerfile").write_text(
            "FROM clawloop-base:latest\nWORKDIR /workspace\nCOPY ../../secret /workspace/\n"
        ),
        "outside the build context",
    ),
    "an instruction that is not UTF-8": (
        lambda t: (t / "instruction.md").write_bytes(b"count the lines \xff\n"),
        "not UTF-8",
    ),
    "a 2 GB sparse workspace file": (
        lambda t: _sparse(t / "environment/workspace/big.bin"),
        "over 64 MiB",
    ),
}


def _harbor_set(tmp: Path, case: str) -> Path:
    data = tmp / "set"
    shutil.copytree(HARBOR, data / "count-lines")
    bad = data / "zz-bad"
    shutil.copytree(HARBOR, bad)
    _toml(bad, '"acme/count-lines"', '"acme/zz-bad"')
    HARBOR_BAD[case][0](bad)
    return data


@pytest.mark.parametrize("case", sorted(HARBOR_BAD))
def test_a_bad_harbor_task_is_dropped_and_the_rest_imports(case: str, tmp_path: Path) -> None:
    out = tmp_path / "tasks.parquet"
    code, stdout, stderr = run("import", "harbor", str(_harbor_set(tmp_path, case)), "--out",
                               str(out))  # fmt: skip
    assert code == 0, stderr
    assert "imported 1 task folder(s)" in stdout and "dropped 1" in stdout, stdout
    assert HARBOR_BAD[case][1] in stdout, stdout
    assert [r["task_id"] for r in pq.read_table(out).to_pylist()] == ["count-lines"]


@needs_bwrap
@pytest.mark.parametrize("case", ["a task.toml that is not UTF-8", "a task.toml nested 100k deep"])
def test_a_bad_harbor_task_is_an_audit_error_not_an_abort(case: str, tmp_path: Path) -> None:
    data = _harbor_set(tmp_path, case)
    code, stdout, stderr = run("audit", str(data), "--json", "--backend", "bwrap")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["summary"]["tasks"] == 2 and doc["summary"]["errors"] == 1
    table = tmp_path / "a.parquet"
    code, stdout, _ = run("audit", str(data), "--out", str(table), "--backend", "bwrap")
    errors = {r["path"].rsplit("/", 1)[1]: r["error"] for r in pq.read_table(table).to_pylist()}
    assert errors["count-lines"] == "" and HARBOR_BAD[case][1] in errors["zz-bad"], errors


# -- flags refused before any work --------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, why",
    [
        (["audit", "{set}", "--threshold", "5"], "--threshold"),
        (["audit", "{set}", "--threshold", "nan"], "--threshold"),
        (["audit", "{set}", "--sample", "-1"], "--sample -1"),
        (["audit", "{set}", "--workers", "0"], "--workers 0"),
        (["audit", "{set}", "--out", "/nonexistent/d/x.parquet"], "does not exist"),
        (["import", "harbor", "{set}", "--out", "/nonexistent/d/x.parquet"], "does not exist"),
        (["import", "auto", "{set}", "--out", "/nonexistent/d/x.parquet"], "does not exist"),
        (["runs", "--root", "{file}"], "is a file"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_flags_no_command_can_run_with_are_refused(argv: list[str], why: str, tmp_path: Path):
    data = tmp_path / "set"
    shutil.copytree(HARBOR, data / "count-lines")
    (tmp_path / "a-file").write_text("x")
    argv = [a.format(set=data, file=tmp_path / "a-file") for a in argv]
    code, _, stderr = run(*argv)
    assert code == 2, stderr
    assert why in stderr, stderr
    assert not Path("/nonexistent").exists()


def test_export_harbor_never_leaves_a_half_written_folder(tmp_path: Path) -> None:
    data = tmp_path / "set"
    shutil.copytree(HARBOR, data / "count-lines")
    tasks = tmp_path / "tasks.parquet"
    assert run("import", "harbor", str(data), "--out", str(tasks))[0] == 0
    import pyarrow as pa

    table = pq.read_table(tasks)
    good = table.to_pylist()[0]
    # a second task whose tar holds a member that escapes its folder, after the good one
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    broken = {**good, "task_id": "broken", "task_tar": buf.getvalue()}
    pq.write_table(pa.Table.from_pylist([good, broken], schema=table.schema), tasks)
    out = tmp_path / "exported"
    code, _, stderr = run("export", "harbor", "--tasks", str(tasks), "--out", str(out))
    assert code == 2 and "broken" not in [p.name for p in out.iterdir()], stderr
    assert sorted(p.name for p in out.iterdir()) == ["count-lines"]  # whole, and nothing partial
    assert (out / "count-lines/tests/test.sh").is_file()
    newline = {**good, "task_id": "a\nb"}
    pq.write_table(pa.Table.from_pylist([newline], schema=table.schema), tasks)
    code, _, stderr = run("export", "harbor", "--tasks", str(tasks), "--out", str(tmp_path / "e2"))
    assert code == 2 and "not a plain name" in stderr, stderr
