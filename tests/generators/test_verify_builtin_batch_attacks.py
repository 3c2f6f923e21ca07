"""Attacks on verify's batched built-in solves (runner.solve_each), the fork-per-job grading
driver (PROBE_DRIVER) and the state grader's sqlite guard (state_predicates._in_memory_only).

The claim under test: verify_tasks(rows) gives every task exactly the rows verify_task gives it
alone, and no task of a batch can change another's verdict. The rows here are real built-in
tasks (synthesis/library.py's render_generator, forged), their task folders then edited: the
generator stays the exact built-in text and solve.sh and the test side stay canonical, so they
are still solved together in one interpreter and graded together in one sandbox.

Tests marked `# Was broken:` got through the first batched code (each comment says how, and
what fixed it); they assert the secure behaviour, which the code has since.
"""

from __future__ import annotations

import json
import pickle
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from doubles.batches import batch_sizes, by_check, edited, kept

import clawloop.generators.verify.leaks as leaks
from clawloop.generators.candidates import candidate_row, parse_meta
from clawloop.generators.forge import forge_candidate
from clawloop.generators.runner import SolveJob, solve_each, solve_then_rebuild, stage_generator
from clawloop.generators.verify import TaskFiles, verify_task, verify_tasks
from clawloop.generators.verify.taskfiles import under
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.sandbox.bwrap import BwrapSandbox
from clawloop.harness.taskfolder import state_predicates
from clawloop.harness.taskfolder.folder import parse_task_info
from clawloop.harness.taskfolder.grader import read_output
from clawloop.harness.taskfolder.packing import tar_files
from clawloop.synthesis.library import render_generator

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")

SB = SandboxConfig(backend="bwrap")


def builtin(cap: str, m: int, d: int, fmt: str, seed: int, domain: str = "apiculture") -> dict:
    code = render_generator(cap, domain, multihop=m, dirtiness=d, output_format=fmt)
    row = forge_candidate(candidate_row(code, seed, origin="builtin"), SB)
    assert row["status"] == "ok", row.get("error")
    return row


def with_toml(row: dict, tmp_path: Path, section: str, value: str) -> dict:
    """The task with [agent] or [verifier] timeout_sec set to `value` (TOML text)."""

    def edit(folder: Path) -> None:
        toml = folder / "task.toml"
        text = toml.read_text()
        old = f"[{section}]\ntimeout_sec = "
        head, _, rest = text.partition(old)
        assert rest, text
        toml.write_text(head + old + value + "\n" + rest.split("\n", 1)[1])

    return edited(row, tmp_path, edit)


def ws(folder: Path) -> Path:
    return folder / "environment/workspace"


def biggest_csv(folder: Path) -> Path:
    return max(ws(folder).rglob("*.csv"), key=lambda p: p.stat().st_size)


@pytest.fixture(scope="module")
def flags() -> dict:  # multihop 1: the registry is data/index.csv + one detail file per entity
    return builtin("anomaly_flagging", 1, 0, "json", 11)


@pytest.fixture(scope="module")
def recon() -> dict:
    return builtin("reconciliation", 0, 0, "csv", 12)


@pytest.fixture(scope="module")
def report() -> dict:
    return builtin("entity_resolution", 1, 0, "report", 13)


# ================================ attacks that are defended ====================================


def test_tampered_builtin_tasks_get_the_rows_they_get_alone(
    flags: dict, recon: dict, report: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each edit makes the built-in solve() raise, write wrong outputs, or solve a task whose key
    # it no longer matches, or gives it a 0.001 s agent timeout; batched with good built-ins
    # (before and after), each gets the rows it gets alone, and the good ones theirs. (A solve
    # past its alarm ending the batch interpreter is test_verify_batched.py's
    # test_solve_each_leaves_failed_and_unreached_jobs_to_be_solved_alone.)
    def malformed(folder: Path) -> None:  # its header's columns renamed: KeyError
        p = biggest_csv(folder)
        head, rest = p.read_text().split("\n", 1)
        p.write_text(head.upper().replace("_", "-") + "\n" + rest)

    def renamed(folder: Path) -> None:
        p = biggest_csv(folder)
        p.rename(p.with_name("renamed_" + p.name))

    def answer_changed(folder: Path) -> None:
        key = json.loads((folder / "tests/answer.json").read_text())
        (folder / "tests/answer.json").write_text(json.dumps({k: {} for k in key}))

    def huge(folder: Path) -> None:  # ~6 MB: slower, bigger outputs, still under every cap
        p = biggest_csv(folder)
        head, *rows = p.read_text().splitlines(keepends=True)
        p.write_text(head + "".join(rows) * max(1, 6_000_000 // max(1, len("".join(rows)))))

    def huge_field(folder: Path) -> None:  # over csv's 128 KiB field limit: csv.Error
        p = biggest_csv(folder)
        p.write_text(p.read_text() + "x" * 200_000 + "\n")

    tampered = [
        edited(flags, tmp_path / "m", malformed),
        edited(recon, tmp_path / "r", renamed),
        edited(report, tmp_path / "a", answer_changed),
        edited(flags, tmp_path / "h", huge),
        edited(recon, tmp_path / "f", huge_field),
        with_toml(flags, tmp_path / "t", "agent", "0.001"),  # alarm rounds up to 1 s
    ]
    rows = [flags, *tampered, recon, report]
    calls = batch_sizes(monkeypatch, "solve_each")
    together = verify_tasks(rows, SB)
    assert calls == [len(rows)]  # all solved together first
    alone = [verify_task(r, SB) for r in rows]
    assert together == alone
    assert kept(together) == [True, False, False, False, False, False, True, True, True]


def test_solve_batch_jobs_share_no_state(
    flags: dict, recon: dict, report: dict, tmp_path: Path
) -> None:
    # Attack 2: module state (sys.modules["generator"], PARSED/ROUNDED/SKIP in the prelude), the
    # rng, cwd, armed alarms and /tmp/clawloop-forge/<i>/ leftovers: the same jobs in two orders
    # (the same capability twice, a job whose solve raises between them) solve to the same trees
    # and rebuild digests, and to the tree one job alone gives in verify_task's layout.
    def renamed(folder: Path) -> None:
        p = biggest_csv(folder)
        p.rename(p.with_name("renamed_" + p.name))

    twin = builtin("anomaly_flagging", 1, 0, "json", 21)
    rows = [flags, edited(recon, tmp_path, renamed), twin, recon, report]
    tasks = [TaskFiles(tar_files(r["task_tar"]), r["task_id"]) for r in rows]

    def job(i: int, workspace: str) -> SolveJob:
        code = tasks[i].text("solution/generator.py")
        seed = parse_task_info(tasks[i].text("task.toml"), Path("t")).seed
        return SolveJob(parse_meta(code), code, workspace, 20.0, seed)

    def run(order: list[int]) -> dict[int, tuple]:
        with BwrapSandbox(SB) as sb:
            for slot, i in enumerate(order):
                files = under(tasks[i].entries, "environment/workspace/")
                sb.write_files(f"/workspace/{slot}", files)
            out = solve_each(sb, [job(i, f"/workspace/{slot}") for slot, i in enumerate(order)])
            got = {}
            for slot, i in enumerate(order):
                if i == 1:  # the raising one: left to be solved alone
                    assert out[slot] is None
                    continue
                done = out[slot]
                assert done is not None and done.error is None
                tree = sb.read_tree(f"/workspace/{slot}", 1 << 24, 4096)
                got[i] = (tree, done.rebuild.digest())
        return got

    first, second = run([0, 1, 2, 3, 4]), run([4, 3, 2, 1, 0])
    assert first == second
    assert {i: d for i, (_, d) in first.items()} == {
        i: rows[i]["task_sha256"] for i in (0, 2, 3, 4)
    }
    with BwrapSandbox(SB) as sb:  # task 2 alone, at /workspace
        sb.write_files("/workspace", under(tasks[2].entries, "environment/workspace/"))
        one = job(2, "/workspace")
        stage_generator(sb, one.code)
        solved = solve_then_rebuild(sb, one.gen, "/workspace", 20.0, one.seed)
        assert solved.error is None and solved.rebuild.digest() == rows[2]["task_sha256"]
        assert sb.read_tree("/workspace", 1 << 24, 4096) == first[2][0]


CLI_DB = """
CREATE TABLE hives(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, kg REAL);
INSERT INTO hives(name, kg) VALUES ('Clover', 1.5), ('it''s', NULL), ('Heather', 2);
CREATE INDEX hives_name ON hives(name);
CREATE VIEW heavy AS SELECT name FROM hives WHERE kg > 1;
CREATE TABLE log(x);
CREATE TRIGGER logged AFTER INSERT ON hives BEGIN INSERT INTO log VALUES (new.name); END;
CREATE TABLE visits(id INTEGER PRIMARY KEY, hive REFERENCES hives(id) ON DELETE CASCADE);
INSERT INTO visits VALUES (1, 1);
INSERT INTO hives(name, kg) VALUES ('Lavender', 9);
CREATE TABLE strict_t(a INTEGER, b TEXT) STRICT;
INSERT INTO strict_t VALUES (1, 'x');
CREATE TABLE wr(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO wr VALUES ('k', X'00ff');
ANALYZE;
"""


def load_dump(tmp_path: Path, text: str) -> dict | str:
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state/db.sql").write_text(text)
    schema = {"store": "sqlite", "file": "db.sql"}
    try:
        return state_predicates.load_records(read_output, str(tmp_path), "state", schema)
    except ValueError as exc:
        return str(exc)


def test_legitimate_dumps_still_load(tmp_path: Path) -> None:
    # AUTOINCREMENT (sqlite_sequence), an index, a view, a trigger, foreign keys, STRICT and
    # WITHOUT ROWID tables, ANALYZE's sqlite_stat1: the sqlite3 CLI's .dump (PRAGMA
    # foreign_keys=OFF; BEGIN; ...; ANALYZE sqlite_schema; DELETE FROM sqlite_sequence; ...)
    # and Python's iterdump() with the CLI's header both load, to the same records.
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db)
    conn.executescript(CLI_DB)
    conn.commit()
    want = {
        name: [dict(zip([c[0] for c in cur.description], r, strict=True)) for r in cur]
        for name in ("hives", "log", "visits", "strict_t", "wr")
        for cur in [conn.execute(f"SELECT * FROM {name}")]
    }
    dumps = {"iterdump": "PRAGMA foreign_keys=OFF;\n" + "\n".join(conn.iterdump())}
    conn.close()
    if shutil.which("sqlite3"):
        cli = subprocess.run(["sqlite3", str(db), ".dump"], capture_output=True, text=True)
        assert cli.returncode == 0 and "sqlite_sequence" in cli.stdout, cli.stderr
        assert cli.stdout.startswith("PRAGMA foreign_keys=OFF;")
        dumps["cli"] = cli.stdout
    for how, text in dumps.items():
        got = load_dump(tmp_path, text)
        assert isinstance(got, dict), (how, got)
        assert {k: got[k] for k in want} == want, how


HARMFUL = {
    "pragma": "PRAGMA hard_heap_limit=100000;",
    "pragma upper": "PRAGMA HARD_HEAP_LIMIT = 100000;",
    "pragma schema": "pragma main.hard_heap_limit=100000;",
    "pragma temp": "PRAGMA temp.soft_heap_limit=1000;",
    "pragma quoted": 'PRAGMA "hard_heap_limit"=100000;',
    "pragma bracketed": "PRAGMA [hard_heap_limit]=100000;",
    "pragma backticked": "PRAGMA `hard_heap_limit`=100000;",
    "pragma after foreign_keys": "PRAGMA foreign_keys=ON; PRAGMA hard_heap_limit=5;",
    "pragma function": "SELECT * FROM pragma_hard_heap_limit(100000);",
    "pragma table": "SELECT * FROM pragma_table_info('hives');",
    "writable_schema": "PRAGMA writable_schema=ON;",
    "load_extension": "SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6');",
    "vacuum into": "VACUUM INTO '{tmp}/vacuum.db';",
    "attach": "ATTACH '{tmp}/attached.db' AS x; CREATE TABLE x.t(a);",
    "writefile": "SELECT writefile('{tmp}/written', 'x');",
}


@pytest.mark.parametrize("name", sorted(HARMFUL))
def test_harmful_dumps_are_refused_and_leave_no_trace(tmp_path: Path, name: str) -> None:
    probe = sqlite3.connect(":memory:")
    before = [
        probe.execute(f"PRAGMA {p}").fetchone() for p in ("hard_heap_limit", "soft_heap_limit")
    ]
    base = "CREATE TABLE hives(n); INSERT INTO hives VALUES(4);\n"
    got = load_dump(tmp_path, base + HARMFUL[name].format(tmp=tmp_path))
    assert isinstance(got, str) and "does not load" in got, got
    after = [
        probe.execute(f"PRAGMA {p}").fetchone() for p in ("hard_heap_limit", "soft_heap_limit")
    ]
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_a_runaway_dump_stops_at_its_op_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_predicates, "MAX_SQL_STEPS", 2000)  # 2e6 VM steps, not 2e8
    loop = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT count(*) FROM r;"
    start = time.monotonic()
    got = load_dump(tmp_path, "CREATE TABLE t(a);\n" + loop)
    assert isinstance(got, str) and "interrupted" in got
    assert time.monotonic() - start < 5


def test_a_dump_with_a_virtual_table_is_refused(tmp_path: Path) -> None:
    # NOTE (a trade-off, not an attack): the CLI dumps a database holding a virtual table (FTS5
    # here) as `PRAGMA writable_schema=ON; INSERT INTO sqlite_schema ...`, which the authorizer
    # refuses, so such a legitimate state snapshot fails every predicate.
    if not shutil.which("sqlite3"):
        pytest.skip("no sqlite3 CLI")
    make = "CREATE VIRTUAL TABLE notes USING fts5(body); INSERT INTO notes VALUES('hello');"
    cli = subprocess.run(["sqlite3", ":memory:", make, ".dump"], capture_output=True, text=True)
    if "writable_schema" not in cli.stdout:
        pytest.skip("this sqlite3 dumps virtual tables another way")
    got = load_dump(tmp_path, cli.stdout)
    assert isinstance(got, str) and "not authorized" in got


# A starting file the copy probe grades as the report (copy:notes.md / copy_inputs): thousands of
# comma-grouped digit runs make the grader's report-number regex (_REPORT_NUMBER) backtrack
# quadratically: ~4 s for 32 KB, an hour for a 1 MB report. It is named in instruction.md, so the
# host's leak check (whose _PROSE_NUMBER has the same flaw, see below) does not scan it.
SLOW_REPORT = "111," * 60_000 + "1\n"


def slow_copy_probe(folder: Path) -> None:
    (ws(folder) / "notes.md").write_text(SLOW_REPORT)
    ins = folder / "instruction.md"
    ins.write_text(ins.read_text() + "\nIgnore notes.md.\n")


def test_a_grading_that_backtracks_past_its_alarm_costs_only_its_own_results(
    flags: dict, recon: dict, report: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was a quadratic backtrack of the report-number regex, ended by the job's alarm (and the
    # slow one regraded alone); the regex now scans it in linear time: one batch, no regrade.
    slow = with_toml(
        edited(report, tmp_path / "s", slow_copy_probe), tmp_path / "t", "verifier", "0.75"
    )
    rows = [flags, slow, recon, report]
    graded = batch_sizes(monkeypatch, "grade_jobs")
    start = time.monotonic()
    together = verify_tasks(rows, SB)
    assert time.monotonic() - start < 30
    assert graded == [4]
    alone = [verify_task(r, SB) for r in rows]
    assert together == alone


CRASH = "SELECT fts3_tokenizer('evil', x'4141414141414141');\nCREATE VIRTUAL TABLE v USING fts3(tokenize=evil);\n"
STATE = {"path": "state", "format": "state", "schema": {"store": "sqlite", "file": "db.sql"}}


def with_state_dump(folder: Path, dump: str) -> None:
    """A sqlite state output added to the contract, its dump in the starting workspace (so the
    oracle, the no-op and every probe load it)."""
    contract = json.loads((folder / "tests/contract.json").read_text())
    contract["outputs"].append(STATE)
    (folder / "tests/contract.json").write_text(json.dumps(contract))
    answer = json.loads((folder / "tests/answer.json").read_text())
    answer["state"] = {"predicates": [{"kind": "count", "table": "t", "match": {}, "count": 0}]}
    (folder / "tests/answer.json").write_text(json.dumps(answer))
    (ws(folder) / "state").mkdir()
    (ws(folder) / "state/db.sql").write_text(dump)


def test_a_grading_child_that_segfaults_costs_no_other_task_its_results(
    flags: dict, recon: dict, tmp_path: Path
) -> None:
    # dirtiness 0: no injections, so the host's ablation never grades. The dump crashed the
    # grader child (SIGSEGV in sqlite's fts3 code); fts3_tokenizer is refused now, so the dump
    # does not load, and only this task fails.
    crash = edited(flags, tmp_path, lambda f: with_state_dump(f, CRASH))
    rows = [recon, crash, flags]
    together = verify_tasks(rows, SB)
    alone = [verify_task(r, SB) for r in rows]
    assert together == alone
    assert kept(together) == [True, False, True]
    assert "fts3_tokenizer" in by_check(together[1])["oracle"]["reason"]


# ================================ attacks that got through (fixed) ===========================


# Was broken: the built-in solve() opens paths it reads from the workspace's data (data/index.csv's
# detail_file column: read_json(ws, detail) is open(os.path.join(ws, detail))). Batched, task i's
# workspace is /workspace/i beside the other tasks', so a detail_file of
# "../1/data/hives/<id>.json" reads task 1's starting file; alone that path is /1/... and the
# solve raises FileNotFoundError. Here task 0 deletes one of its detail files and points at the
# twin's copy in slot 1: batched it is KEPT, alone it fails (oracle and determinism). The same
# works with an absolute "/workspace/1/..." path, and it lets a task's verdict depend on what
# another task's starting (or already solved) workspace holds.
# Fixed: generators/verify/__init__.py `_solve_together` / runner.solve_each must not let a job see the
# other slots (e.g. solve each job with its workspace moved to /workspace and the others moved
# out of reach, or one sandbox per job), or the prelude's ws_text/ws_list
# (synthesis/builtin/_prelude.py) must refuse a path that leaves the workspace (realpath
# check as grader.read_output does), so alone and batched both fail.
def test_a_builtin_solve_cannot_read_another_slots_workspace(
    flags: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def point_at_slot_1(folder: Path) -> None:
        index = ws(folder) / "data/index.csv"
        head, first, *rest = index.read_text().splitlines(keepends=True)
        detail = first.rstrip("\n").split(",")[-1]
        (ws(folder) / detail).unlink()
        first = first.replace(detail, "../1/" + detail)
        index.write_text(head + first + "".join(rest))

    hostile = edited(flags, tmp_path, point_at_slot_1)
    rows = [hostile, flags]
    calls = batch_sizes(monkeypatch, "solve_each")
    together = verify_tasks(rows, SB)
    assert calls == [2]
    alone = [verify_task(r, SB) for r in rows]
    assert kept(alone) == [False, True]
    assert "reference solution failed" in alone[0][1]["reason"]
    assert kept(together) == kept(alone), "batched, the task solves from another slot's files"
    assert together == alone


def absolute_outputs(folder: Path) -> None:
    """Every contract output (and its answer key) at /workspace/<its path>."""
    contract = json.loads((folder / "tests/contract.json").read_text())
    answer = json.loads((folder / "tests/answer.json").read_text())
    for o in contract["outputs"]:
        old, o["path"] = o["path"], "/workspace/" + o["path"]
        answer[o["path"]] = answer.pop(old)
    (folder / "tests/contract.json").write_text(json.dumps(contract))
    (folder / "tests/answer.json").write_text(json.dumps(answer))


def state_in_slot_1(folder: Path) -> None:
    """A json-store state output at ../1/state (another slot's folder, in a batch)."""
    contract = json.loads((folder / "tests/contract.json").read_text())
    contract["outputs"].append(
        {"path": "../1/state", "format": "state", "schema": {"store": "json"}}
    )
    (folder / "tests/contract.json").write_text(json.dumps(contract))
    answer = json.loads((folder / "tests/answer.json").read_text())
    answer["../1/state"] = {
        "predicates": [{"kind": "count", "table": "t", "match": {}, "count": 1}]
    }
    (folder / "tests/answer.json").write_text(json.dumps(answer))


def a_state_folder(folder: Path) -> None:
    (ws(folder) / "state").mkdir()
    (ws(folder) / "state/t.json").write_text('[{"x": 1}]')


# Was broken: grade_jobs grades task i at /workspace/i, and the grader resolves a contract path
# against the workspace it is given: os.path.join(root, rel). An absolute path
# "/workspace/output/x.json" is inside the workspace alone (root /workspace: read, the oracle
# passes, the task is KEPT) and outside it batched (root /workspace/0: "resolves outside the
# workspace", the oracle fails, dropped). Alone the task is kept unprobed, too: every probe's
# overlay refuses the absolute path, so each trivial:* check reads "not accepted" without
# grading anything. Likewise a json-store state output at "../1/state": state_predicates
# .load_records lists os.path.join(realpath(ws), path) with no confinement, so batched it lists
# slot 1's folder (a foreign file name, then "resolves outside the workspace") where alone it
# finds nothing ("table 't' is missing"): other rows.
# Fixed: harness/taskfolder/grader.py `read_output` (and state_predicates.load_records' listdir,
# and PROBE_DRIVER's overlay) should refuse absolute paths and '..' parts outright, so the
# layout cannot matter; and verify should drop a contract whose output paths are not plain
# relative paths (forge refuses them already).
@pytest.mark.parametrize("attack", ["absolute_paths", "state_in_another_slot"])
def test_an_output_path_gives_the_verdict_it_gives_alone(
    flags: dict, recon: dict, tmp_path: Path, attack: str
) -> None:
    if attack == "absolute_paths":
        rows = [edited(flags, tmp_path, absolute_outputs), recon]
    else:
        rows = [
            edited(flags, tmp_path / "a", state_in_slot_1),
            edited(recon, tmp_path / "b", a_state_folder),
        ]
    together = verify_tasks(rows, SB)
    alone = [verify_task(r, SB) for r in rows]
    assert kept(together) == kept(alone), [v["reason"][:90] for _, v in together + alone]
    assert together == alone
    if attack == "absolute_paths":
        assert not alone[0][1]["kept"], "alone, a task with absolute output paths is kept unprobed"


# Was broken: grade_jobs runs the batch's one grading exec with timeout=sum(job.timeout), each
# job's timeout 2 x its task.toml [verifier] timeout_sec, which nothing checks for sign. One
# task with timeout_sec = -1000 makes the sum negative: sb.exec raises ValueError ("exec
# timeout must be positive"), and verify_tasks fails the oracle of EVERY task of the batch
# ("could not run"), though the good one alone is kept.
# Fixed: harness/taskfolder/folder.py `_header` should refuse (TaskFolderError) a timeout_sec that
# is not finite and positive; and generators/verify/__init__.py `grade_jobs` should use each job's own
# alarm (max(1, ceil(t))) for the wall sum, or drop a job with a bad timeout to `_alone`.
def test_a_negative_verifier_timeout_costs_the_other_tasks_nothing(
    flags: dict, recon: dict, tmp_path: Path
) -> None:
    hostile = with_toml(flags, tmp_path, "verifier", "-1000.0")
    rows = [hostile, recon]
    together = verify_tasks(rows, SB)
    alone = [verify_task(r, SB) for r in rows]
    assert kept(alone) == [False, True]
    assert together[1] == alone[1], by_check(together[1])["oracle"]["reason"]
    assert together == alone


# Was broken: TOML allows `timeout_sec = inf`; folder._header takes float("inf"), and the batch's
# solve_each (math.ceil(job.solve_timeout)) or grade_jobs' _job (math.ceil(timeout)) raises
# OverflowError, which neither _solve_together (it suppresses OSError, ValueError, ImportError)
# nor verify_tasks catches: the whole batch raises, and the stage records every task of it as
# "verify could not run" (tasks/verify.py _crashed), the good one batched with it included. (Alone
# the hostile task raises too: it gets no verdict at all.)
# Fixed: harness/taskfolder/folder.py `_header` refusing non-finite timeouts (math.isfinite), or
# verify_tasks turning any per-task exception of _start/_solve_alone/_job into that task's
# "could not run" row.
@pytest.mark.parametrize("section", ["agent", "verifier"])
def test_an_infinite_timeout_costs_the_other_tasks_nothing(
    flags: dict, recon: dict, tmp_path: Path, section: str
) -> None:
    hostile = with_toml(flags, tmp_path, section, "inf")
    good_alone = verify_task(recon, SB)
    try:
        together = verify_tasks([hostile, recon], SB)
    except OverflowError as exc:
        pytest.fail(f"one task's timeout_sec = inf made the whole batch raise: {exc!r}")
    assert together[1] == good_alone
    assert not together[0][1]["kept"]


# Was broken: alone, a task's wall limits are its timeouts as written (sb.exec(timeout=2 x verifier)
# for the grading; agent + 2 s for a solve with no rebuild), and a limit <= 0 makes sb.exec
# raise ("could not run"); batched, the job gets its own alarm max(1, ceil(t)) and the exec the
# batch's summed limit, so the same task passes. `[verifier] timeout_sec = 0.0` (or any t whose
# grading fits in ceil(2t) s but not in 2t s), or `[agent] timeout_sec = -2.0` on a row whose
# determinism needs no rebuild: dropped alone, kept batched.
# Fixed: one function for a job's limit used both alone and batched (solve_in_sandbox's
# sb.exec(timeout=...) and solve_then_rebuild's wall = the alarm's max(1, ceil(t)), as
# solve_each/_job compute it), plus folder._header refusing timeouts that are not positive.
@pytest.mark.parametrize(
    ("section", "value"), [("verifier", "0.0"), ("agent", "-2.0")], ids=["verifier", "agent"]
)
def test_a_non_positive_timeout_gives_the_verdict_it_gives_alone(
    flags: dict, recon: dict, tmp_path: Path, section: str, value: str
) -> None:
    hostile = with_toml(flags, tmp_path, section, value)
    if section == "agent":  # determinism from the row's two digests: the solve alone, no rebuild
        hostile = dict(hostile, rebuild_sha256=hostile["task_sha256"])
    rows = [hostile, recon]
    alone = [verify_task(r, SB) for r in rows]
    # A timeout that is not more than 0 is refused (folder._header): verify then uses the
    # defaults, alone as batched, and the verifier's is refused again by the determinism check.
    assert kept(alone) == [section == "agent", True]
    together = verify_tasks(rows, SB)
    assert together == alone


# Was broken: `_in_memory_only` allows every SQL function and CREATE VIRTUAL TABLE. The sqlite the
# grader runs on (the sandbox's python3, and the host's) is built with ENABLE_FTS3_TOKENIZER,
# so a dump may call fts3_tokenizer(name, pointer): one argument leaks a code address (ASLR),
# two register an attacker-chosen pointer as a tokenizer module, which
# `CREATE VIRTUAL TABLE ... USING fts3(tokenize=name)` then calls through (the published
# sqlite code-execution technique). In a grading child that is code execution that can rewrite
# earlier jobs' /logs/verifier/<j>/probes.json or later jobs' /tests/<j> answer keys.
# Fixed: harness/taskfolder/state_predicates.py `_in_memory_only` should deny SQLITE_FUNCTION for
# fts3_tokenizer (arg2 is the function's name) and SQLITE_CREATE_VTABLE (or allow only fts5/rtree
# without the tokenizer function), i.e. allow-list the actions a dump needs.
def test_a_dump_cannot_call_fts3_tokenizer(tmp_path: Path) -> None:
    base = "CREATE TABLE t(a);\n"
    for call in [
        "SELECT fts3_tokenizer('simple');",
        "SELECT fts3_tokenizer('x', x'4141414141414141');",
    ]:
        got = load_dump(tmp_path, base + call)
        assert isinstance(got, str) and "does not load" in got, (call, got)


ABLATE = """
import pickle, sys
from clawloop.generators.verify import TaskFiles, check_ablation
from clawloop.harness.taskfolder.packing import tar_files
print(check_ablation(TaskFiles(tar_files(pickle.load(open(sys.argv[1], "rb"))))))
"""


# Was broken: check_ablation runs on the HOST, outside any sandbox (builtin_source: "the ablation may
# run it here"), and grades each ablated solve with the task's own tests/contract.json and the
# starting workspace's files. A built-in task whose contract was edited to add a sqlite state
# output, with the dump in environment/workspace/state/db.sql, gets that dump executed by the
# verify process itself: the fts3_tokenizer dump above makes it dereference 0x4141414141414141
# and die of SIGSEGV (rc -11), taking every task of its batch and the stage's worker with it; a
# real pointer instead of 0x41... is code execution on the host.
# Fixed: generators/verify/__init__.py `check_ablation`/`ablation_rewards` should grade only the outputs
# the built-in itself declares (compare tests/contract.json and answer.json with what the
# generator renders, or skip state outputs), or run the ablation in a sandbox; and the
# authorizer fix above.
def test_the_hosts_ablation_does_not_run_a_tasks_sql(tmp_path: Path) -> None:
    row = builtin("anomaly_flagging", 0, 1, "json", 14)  # dirtiness 1: injections to ablate
    hostile = edited(row, tmp_path, lambda f: with_state_dump(f, CRASH))
    (tmp_path / "tar.pickle").write_bytes(pickle.dumps(hostile["task_tar"]))
    res = subprocess.run(
        [sys.executable, "-c", ABLATE, str(tmp_path / "tar.pickle")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, f"the verify process died (rc {res.returncode}) {res.stderr[-300:]}"


# Was broken: the leak check runs on the HOST with no time limit, and its number regex
# (leaks._PROSE_NUMBER, the same shape as the grader's _REPORT_NUMBER) backtracks
# quadratically on comma-grouped digit runs ("111,111,...,1"): every group is a new start, each
# scans the rest of the run before the final lookahead fails. 24 KB of instruction.md (or of a
# starting file no text names) costs seconds, 1 MB about an hour, 10 MB days: one task stalls the
# whole batch's verify_tasks before any sandbox starts.
# Fixed: generators/verify/__init__.py `_PROSE_NUMBER` (and grader._REPORT_NUMBER): forbid a start in the
# middle of a run (add the lookbehind (?<!\d[, \u00a0\u202f])) and make the group repetitions
# possessive ((?:,\d{3})++, (?:[ \u00a0\u202f]\d{3})++): linear (60 000 groups in 9 ms), the
# same tokens on ordinary text; or find maximal digit runs first and parse each in Python.
def test_the_leak_checks_number_scan_is_linear() -> None:
    text = "Totals: " + "111," * 6000 + "1.\n"
    start = time.monotonic()
    leaks.prose_numbers(text)
    took = time.monotonic() - start
    assert took < 0.5, f"prose_numbers took {took:.1f} s on {len(text)} characters"
