"""Hostile reference solutions against verify's batched grading (verify_tasks, grade_jobs).

The claim under test: each task's verdict from verify_tasks([...]) is the one verify_task gives
it alone, and no task's solution (solution/solve.sh, or the generator's solve(): LLM-written,
hostile) can change another task's verdict or make its own task pass. Each attack builds rows the
way tests/generators/test_verify_batched.py does (forge a fixture, then edit the unpacked task)
and compares verify_tasks(rows) with [verify_task(r) for r in rows].

Tests marked `# Was broken:` got through the first batched code (each comment says how); they
assert the secure behaviour, which the code has since.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from doubles.batches import batch_sizes, by_check, edited, kept

import clawloop.generators.verify as verify
from clawloop.generators.candidates import candidate_row
from clawloop.generators.forge import forge_candidate
from clawloop.generators.verify import TaskFiles, verify_task, verify_tasks
from clawloop.harness.sandbox.base import Limits, SandboxConfig, SandboxError
from clawloop.harness.sandbox.bwrap import BwrapSandbox
from clawloop.harness.taskfolder.packing import tar_files

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")

FIXTURES = Path(__file__).parents[1] / "fixtures" / "generators"
SB = SandboxConfig(backend="bwrap")
GOOD = (FIXTURES / "good.py").read_text()


def forge(code: str, seed: int = 4) -> dict:
    row = forge_candidate(candidate_row(code, seed), SB, timeout=30.0)
    assert row["status"] == "ok", row.get("error")
    return row


def with_tail(row: dict, tmp_path: Path, tail: str) -> dict:
    """The task with shell commands appended to its solution/solve.sh (after the real solve)."""

    def edit(folder: Path) -> None:
        solve = folder / "solution/solve.sh"
        solve.write_text(solve.read_text() + "\n" + tail)

    return edited(row, tmp_path, edit)


@pytest.fixture(scope="module")
def good() -> dict:
    return forge(GOOD)


@pytest.fixture(scope="module")
def good2() -> dict:
    return forge(GOOD, seed=5)


def batched_and_alone(
    rows: list[dict], monkeypatch: pytest.MonkeyPatch, sandbox: SandboxConfig = SB
) -> tuple[list, list, list[int]]:
    """verify_tasks(rows), each row through verify_task alone, and the sizes of the batches
    grade_jobs was handed (which rows were copied into a batch sandbox)."""
    sizes = batch_sizes(monkeypatch, "grade_jobs")
    together = verify_tasks(rows, sandbox)
    batches = list(sizes)
    alone = [verify_task(r, sandbox) for r in rows]
    return together, alone, batches


# ---- a task with a sqlite state output (the grader loads its SQL dump in the grading process) ---

STATE = {"path": "state", "format": "state", "schema": {"store": "sqlite", "file": "db.sql"}}
PREDICATES = {"predicates": [{"kind": "count", "table": "hives", "match": {"n": 4}, "count": 1}]}
DUMP = "CREATE TABLE hives(n);\nINSERT INTO hives VALUES(4);\n"
PAD = "CREATE TABLE pad(b);\nINSERT INTO pad VALUES('" + "x" * 2_000_000 + "');\n"


def sql_task(
    row: dict, tmp_path: Path, dump: str, only_state: bool = False, pristine: str | None = None
) -> dict:
    """`row` with a sqlite state output added (or, with `only_state`, as its only output) whose
    solve.sh writes `dump` to state/db.sql; `pristine` puts a dump in the starting workspace."""

    def edit(folder: Path) -> None:
        contract = json.loads((folder / "tests/contract.json").read_text())
        contract["outputs"] = ([] if only_state else contract["outputs"]) + [STATE]
        (folder / "tests/contract.json").write_text(json.dumps(contract))
        answer = json.loads((folder / "tests/answer.json").read_text())
        answer = ({} if only_state else answer) | {"state": PREDICATES}
        (folder / "tests/answer.json").write_text(json.dumps(answer))
        if pristine is not None:
            (folder / "environment/workspace/state").mkdir()
            (folder / "environment/workspace/state/db.sql").write_text(pristine)
        (folder / "solution/dump.sql").write_text(dump)
        solve = folder / "solution/solve.sh"
        solve.write_text(
            solve.read_text()
            + "\nmkdir -p /workspace/state\ncat /solution/dump.sql > /workspace/state/db.sql\n"
        )

    return edited(row, tmp_path, edit)


# ================================ attacks that are defended ====================================

# Names and shapes that could confuse the copy or the batch layout, all under the caps: the other
# slots' folder names (0/, 1/) with a wrong answer in them, a newline, '..'-like and non-UTF-8
# names, a hard link, a sparse file, a tree 300 folders deep and 3000 files.
ODD_TREE = r"""
cd /workspace
mkdir -p 0/output 1/output 2/output
for i in 0 1 2; do echo '{"HV-100": 1.0}' > $i/output/totals.json; done
printf x > $'new\nline'; printf x > '..a'; printf x > '...'; printf x > ' '
printf x > 'back\slash'; printf x > $'\xff\xfe'; mkdir $'dir\n..'
ln output/totals.json hard
truncate -s 8M sparse
p=deep; for i in $(seq 300); do p=$p/d; done; mkdir -p $p && printf x > $p/leaf
mkdir many && (cd many && seq 3000 | xargs touch)
"""


def test_odd_names_links_sparse_files_and_deep_trees_copy_faithfully(
    good: dict, good2: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [good, with_tail(good, tmp_path / "odd", ODD_TREE), good2]
    together, alone, batches = batched_and_alone(rows, monkeypatch)
    assert batches == [3]  # the odd tree was copied into the batch sandbox
    assert together == alone
    assert kept(together) == [True, True, True]


# Trees read_tree must not copy (graded in their own sandbox instead), and one just under the cap.
NOT_COPIED = {
    "entries": "mkdir /workspace/many && cd /workspace/many && seq 4100 | xargs touch\n",
    "bytes": "head -c 16777217 /dev/zero > /workspace/big\n",
    "fifo": "mkfifo /workspace/output/pipe\n",
    # a symlink under folders the sandbox user cannot even list
    "hidden_link": "mkdir -p /workspace/a/b && ln -s /tests /workspace/a/b/l\n"
    "chmod 000 /workspace/a/b /workspace/a\n",
    # a folder and a file the sandbox user cannot read (a copy would be readable)
    "unreadable": "mkdir /workspace/locked && printf x > /workspace/locked/f\n"
    "chmod 000 /workspace/locked/f /workspace/locked\n",
}
JUST_UNDER_CAP = "head -c $((16 * 1024 * 1024 - 4096)) /dev/zero > /workspace/big\n"


def test_trees_that_cannot_be_copied_are_graded_alone(
    good: dict, good2: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = [with_tail(good, tmp_path / k, tail) for k, tail in NOT_COPIED.items()]
    rows = [good, *hostile, with_tail(good, tmp_path / "cap", JUST_UNDER_CAP), good2]
    together, alone, batches = batched_and_alone(rows, monkeypatch)
    assert batches == [3]  # good, the one just under the cap, good2
    assert together == alone
    assert all(kept(together))


# A failing solution that plants passing verdicts and wrong answer keys in every batch slot it can
# guess (/tests/<i>, /logs/verifier/<i>) and answers in /workspace/<i>.
PLANT_SLOTS = r"""
for i in 0 1 2 3; do
  mkdir -p /tests/$i /logs/verifier/$i /workspace/$i/output
  echo '{"output/totals.json": {}}' > /tests/$i/answer.json
  echo '{"reward": 1.0}' > /logs/verifier/$i/reward.json
  echo '{"reward": 1.0, "passed": true, "checks": []}' > /logs/verifier/$i/details.json
  echo '{"noop": {"reward": 0.0}}' > /logs/verifier/$i/probes.json
  echo '{}' > /workspace/$i/output/totals.json
done
"""


def test_plants_in_other_batch_slots_count_for_nothing(
    good: dict, good2: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = with_tail(forge((FIXTURES / "bad_solve.py").read_text()), tmp_path, PLANT_SLOTS)
    rows = [good, bad, good2]
    together, alone, batches = batched_and_alone(rows, monkeypatch)
    assert batches == [3]
    assert together == alone
    assert kept(together) == [True, False, True]
    assert "scores 0." in by_check(together[1])["oracle"]["reason"]


def test_an_output_path_into_another_slot_is_refused(
    good: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In the batch, /workspace/1/../0/output/totals.json is task 0's solved output (the same seed,
    # so the same answer): the grader must not read it. (forge refuses such a contract; verify
    # must hold even for a task folder that holds one.)
    def point_at_slot_0(folder: Path) -> None:
        contract = json.loads((folder / "tests/contract.json").read_text())
        contract["outputs"][0]["path"] = "../0/output/totals.json"
        (folder / "tests/contract.json").write_text(json.dumps(contract))
        answer = json.loads((folder / "tests/answer.json").read_text())
        answer = {"../0/output/totals.json": answer["output/totals.json"]}
        (folder / "tests/answer.json").write_text(json.dumps(answer))

    rows = [good, edited(good, tmp_path, point_at_slot_0)]
    together, alone, batches = batched_and_alone(rows, monkeypatch)
    assert batches == [2]
    assert together == alone
    assert kept(together) == [True, False]
    assert "is not a path inside the workspace" in by_check(together[1])["oracle"]["reason"]


# 30 s: the step cap ends the loop first on any CPU likely to run this (the case that failed the old
# assertion on fast cores); 2 s: either limit may, depending on the core.
@pytest.mark.parametrize("cpu_seconds", [2, 30])
def test_a_grading_that_kills_the_interpreter_costs_no_other_task_its_results(
    good: dict, good2: dict, tmp_path: Path, cpu_seconds: int
) -> None:
    # The SQL dump loops inside sqlite (C code: the job's SIGALRM handler never runs). Two limits
    # race to end it: RLIMIT_CPU (2 s), which kills the batch interpreter, and the snapshot's
    # sqlite step cap (a count of VM steps), which fails the load. Which comes first depends on
    # the CPU's speed, so the test asserts what holds either way: the other two jobs get exactly
    # what they get alone (the job before keeps its results; after a kill the job after and the
    # looping one are graded again alone), and the looping task never passes.
    low = SandboxConfig(backend="bwrap", limits=Limits(cpu_seconds=cpu_seconds))
    loop = (
        DUMP
        + "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c;\n"
    )
    rows = [good, sql_task(good, tmp_path, loop), good2]

    def job(row: dict) -> verify.GradeJob:
        task = TaskFiles(tar_files(row["task_tar"]), row["task_id"])
        step = verify.solve_in_sandbox(task, low, None, defer=True)
        assert step.job is not None
        return step.job

    jobs = [job(r) for r in rows]
    first, looping, last = verify.grade_jobs(jobs, low)
    assert looping.probes is None or not looping.oracle.passed  # killed, or its load failed
    for graded, one in [(first, jobs[0]), (last, jobs[2])]:
        solo = verify.grade_jobs([one], low)[0]
        assert graded.probes is not None and graded.probes == solo.probes
        assert graded.oracle == solo.oracle and graded.oracle.passed


# ================================ attacks that got through (fixed) =====================================


# Was broken: read_tree runs as root on the host and keeps only the executable bit, and write_files
# writes 0644/0755: a solution that makes its outputs unreadable (chmod 000) fails alone (the
# grader, the sandbox uid, cannot read them) but passes in a batch.
@pytest.mark.parametrize(
    "tail", ["chmod 000 /workspace/output", "chmod 000 /workspace/output/totals.json"]
)
def test_the_modes_a_solution_leaves_give_the_verdict_they_give_alone(
    good: dict, good2: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: str
) -> None:
    rows = [good, with_tail(good, tmp_path, tail + "\n"), good2]
    together, alone = verify_tasks(rows, SB), [verify_task(r, SB) for r in rows]
    assert kept(alone) == [True, False, True]
    assert kept(together) == kept(alone)
    assert together == alone


# Was broken: a file whose host path is 4094 characters long in the solution's sandbox is copied out
# fine, but in the batch sandbox it sits under /workspace/<i>/, two characters deeper: write_files
# raises ENAMETOOLONG, grade_jobs raises OSError, and verify_tasks fails the oracle of EVERY task
# in the batch ("could not run"), the good ones included.
def test_a_path_near_path_max_costs_no_other_task_its_verdict(
    good: dict, good2: dict, tmp_path: Path
) -> None:
    with BwrapSandbox(SB) as sb:  # the host prefix of a sandbox's /workspace (a fixed length)
        prefix = len(str(sb.fs / "workspace"))
    left, parts = 4094 - prefix - 1, []
    while left > 0:
        n = min(200, left) if left - min(200, left) != 1 else left - 2
        parts.append("d" * n)
        left -= n + 1
    rel = "/".join(parts)
    assert prefix + 1 + len(rel) == 4094
    tail = f'p=\'/workspace/{rel}\'\nmkdir -p "$(dirname "$p")" && : > "$p"\n'
    rows = [good, with_tail(good, tmp_path, tail), good2]
    alone = [verify_task(r, SB) for r in rows]
    assert kept(alone) == [True, True, True]
    together = verify_tasks(rows, SB)
    assert kept(together) == [True, True, True], by_check(together[0])["oracle"]["reason"][:120]
    assert together == alone


# Was broken: every job of a batch runs in one interpreter, and `PRAGMA hard_heap_limit` in one task's
# SQL dump sets sqlite's heap limit for the whole process (the authorizer only denies ATTACH).
# The hostile task is itself kept (its small dump loads before the limit bites); a good task after
# it whose dump is larger fails its oracle (MemoryError), and a bad task after it, whose untouched
# workspace already passes (a false positive alone), is kept because its no-op cannot load.
def test_a_sql_dump_cannot_set_sqlite_limits_for_the_tasks_after_it(
    good: dict, good2: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        sql_task(good, tmp_path / "g", DUMP),
        sql_task(good, tmp_path / "h", DUMP + "PRAGMA hard_heap_limit=1000000;\n"),
        sql_task(good2, tmp_path / "big", DUMP + PAD),
        sql_task(good2, tmp_path / "fp", DUMP, only_state=True, pristine=DUMP + PAD),
    ]
    together, alone, batches = batched_and_alone(rows, monkeypatch)
    assert batches == [4]
    assert kept(alone) == [True, False, True, False]  # its PRAGMA is refused: the dump fails
    assert "the SQL snapshot does not load" in by_check(alone[1])["oracle"]["reason"]
    assert "false positive" in by_check(alone[3])["noop"]["reason"]
    assert kept(together) == kept(alone)
    assert together == alone


# Was broken: alone, a task is graded in the sandbox its solution ran in, after only /tests and
# /logs/verifier are emptied; in a batch its workspace is graded in a fresh sandbox. A solution
# that fills /tmp (the sandbox's one tmpfs) fails alone ("could not run: No space left on
# device") and is kept in a batch.
def test_a_full_tmp_left_by_the_solution_gives_the_verdict_it_gives_alone(
    good: dict, good2: dict, tmp_path: Path
) -> None:
    small = SandboxConfig(backend="bwrap", limits=Limits(disk_mb=64))
    fill = "for i in $(seq 9); do head -c 8M /dev/zero > /tmp/fill$i 2>/dev/null || true; done\n"
    rows = [good, with_tail(good, tmp_path, fill), good2]
    together, alone = verify_tasks(rows, small), [verify_task(r, small) for r in rows]
    assert kept(together) == kept(alone)
    assert together == alone


# Was broken: the probe driver reports an overlay error with the sandbox path in it, and that path
# is /tests/.clawloop-probes/workspace alone but /tests/<i>/workspace in a batch: the rows of the
# trivial:* checks differ (here a starting file `output` stands where the probes need a folder;
# the solution removes it before writing its outputs).
def test_probe_errors_do_not_depend_on_the_batch_layout(
    good: dict, good2: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def file_where_the_output_folder_goes(folder: Path) -> None:
        (folder / "environment/workspace/output").write_text("x\n")
        solve = folder / "solution/solve.sh"
        text = solve.read_text().replace("cd /workspace\n", "cd /workspace\nrm -f output\n", 1)
        solve.write_text(text)

    rows = [good, edited(good, tmp_path, file_where_the_output_folder_goes), good2]
    together, alone, batches = batched_and_alone(rows, monkeypatch)
    assert batches == [3]
    assert kept(together) == kept(alone)
    assert together == alone


# Was broken: a grading that leaves no results even alone raises SandboxError (as if the sandbox
# engine had failed) out of verify_tasks, so the good tasks batched with it get no verdict at all
# (the stage retries the batch, then records every row as crashed). Two solution-only triggers:
# `chmod 000 /workspace` plus a symlink (not copyable, so graded in its own sandbox, where bwrap
# cannot chdir to /workspace), and, for a task with a sqlite state output, a dump that loops
# inside sqlite until RLIMIT_CPU kills the grader (the job's alarm cannot interrupt C code).
@pytest.mark.parametrize("attack", ["unreadable_workspace", "sqlite_loop"])
def test_a_solution_cannot_take_the_other_tasks_verdicts_down_with_it(
    good: dict, good2: dict, tmp_path: Path, attack: str
) -> None:
    if attack == "unreadable_workspace":
        sandbox = SB
        hostile = with_tail(
            good, tmp_path, "ln -s /nowhere /workspace/link\nchmod 000 /workspace\n"
        )
    else:
        sandbox = SandboxConfig(backend="bwrap", limits=Limits(cpu_seconds=2))
        loop = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c;"
        hostile = sql_task(good, tmp_path, DUMP + loop)
    alone_good = [verify_task(r, sandbox) for r in (good, good2)]
    assert kept(alone_good) == [True, True]
    try:
        together = verify_tasks([good, hostile, good2], sandbox)
    except SandboxError as exc:
        pytest.fail(f"one task's solution made the whole batch raise: {exc}")
    assert [together[0], together[2]] == alone_good
    assert not together[1][1]["kept"]
    # Alone, too, the hostile task's own fault is a failed verdict, not an engine fault (today
    # verify_task raises SandboxError for it).
    _, verdict = verify_task(hostile, sandbox)
    assert not verdict["kept"]
