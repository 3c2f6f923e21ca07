"""Verify's batched checks: forge's one build, the second build after the reference solution
in that solution's interpreter (another hash seed), the oracle, the no-op and every probe graded
by one interpreter over one pristine workspace, the sandbox reset from the host. Planted bad generators must still be caught, and nothing a hostile solve() leaves
in the sandbox may count."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from doubles.batches import batch_sizes, edited

from clawloop.generators.candidates import candidate_row
from clawloop.generators.forge import forge_candidate
from clawloop.generators.verify import PROBE_DRIVER, verify_task
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.sandbox.bwrap import BwrapSandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")

FIXTURES = Path(__file__).parents[1] / "fixtures" / "generators"
SB = SandboxConfig(backend="bwrap")
GOOD = (FIXTURES / "good.py").read_text()


def forge(code: str, seed: int = 4, timeout: float = 30.0) -> dict:
    return forge_candidate(candidate_row(code, seed), SB, timeout=timeout)


def checks_of(row: dict) -> tuple[dict[str, dict], dict]:
    checks, verdict = verify_task(row, SB)
    return {c["check"]: c for c in checks}, verdict


def test_the_second_build_runs_in_a_fresh_interpreter() -> None:
    # A set of strings iterates in hash order: the same seed, another interpreter, another text.
    names = ", ".join(repr(f"name{i}") for i in range(24))
    code = GOOD.replace(
        "def build(seed):", f"ORDER = ','.join({{{names}}})\n\n\ndef build(seed):"
    ).replace('"instruction": ', '"instruction": ORDER + " " + ', 1)
    assert code != GOOD and "ORDER +" in code
    row = forge(code)
    assert row["status"] == "ok", row["error"]
    assert row["task_sha256"] != "" and row["rebuild_sha256"] == ""  # verify builds it again
    checks, verdict = checks_of(row)
    assert not checks["determinism"]["passed"] and "differ" in checks["determinism"]["reason"]
    assert not verdict["kept"]


def test_a_good_task_rebuilds_to_its_digest_and_is_kept() -> None:
    row = forge(GOOD)
    checks, verdict = checks_of(row)
    assert verdict["kept"], verdict["reason"]
    assert "agree" in checks["determinism"]["reason"]
    assert {"determinism", "leak", "oracle", "noop", "answer_file"} <= set(checks)
    assert next(iter(checks)) == "determinism"  # still the first row


def test_a_second_build_that_fails_or_hangs_fails_determinism(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # solve() leaves a marker in /tmp; the second build, in the same interpreter after it,
    # sees it and fails or hangs (forge's build, in a sandbox of its own, never does).
    from clawloop.generators.verify import sandboxed

    monkeypatch.setattr(sandboxed, "REBUILD_TIMEOUT_S", 6.0)  # sleep(60) outlasts it
    for action, needle in [
        ("raise RuntimeError('second')", "crash"),
        ("time.sleep(60)", "timeout"),
    ]:
        code = GOOD.replace(
            "def build(seed):",
            "def build(seed):\n    import os, time\n"
            "    if os.path.exists('/tmp/marker'):\n"
            f"        {action}\n"
            "    return _build(seed)\n\n\ndef _build(seed):",
        ).replace(
            "def solve(workspace):", "def solve(workspace):\n    open('/tmp/marker', 'w').close()"
        )
        assert "open('/tmp/marker'" in code
        row = forge(code)
        assert row["status"] == "ok", row["error"]
        checks, verdict = checks_of(row)
        reason = checks["determinism"]["reason"]
        assert not checks["determinism"]["passed"], reason
        assert f"the second build with the same seed failed ({needle})" in reason
        assert checks["oracle"]["passed"] and not verdict["kept"]


def test_a_first_build_past_its_timeout_is_a_timeout() -> None:
    code = GOOD.replace("def build(seed):", "def build(seed):\n    import time; time.sleep(60)")
    row = forge(code, timeout=1.0)
    assert row["status"] == "failed" and row["error_kind"] == "timeout", row["error"]


def test_planted_answer_leak_noop_and_probe_are_still_caught(tmp_path: Path) -> None:
    row = forge(GOOD)
    answer = None

    def plant_answer(folder: Path) -> None:
        nonlocal answer
        answer = json.loads((folder / "tests/answer.json").read_text())
        out = folder / "environment/workspace/output/totals.json"
        out.parent.mkdir(parents=True)
        out.write_text(json.dumps(answer["output/totals.json"]))

    checks, verdict = checks_of(edited(row, tmp_path / "a", plant_answer))
    assert not checks["noop"]["passed"] and "false positive" in checks["noop"]["reason"]
    assert not verdict["kept"]

    def answer_in_readme(folder: Path) -> None:
        answer = json.loads((folder / "tests/answer.json").read_text())
        text = json.dumps(answer["output/totals.json"])
        (folder / "environment/workspace/README.txt").write_text(text)

    checks, verdict = checks_of(edited(row, tmp_path / "b", answer_in_readme))
    assert not checks["answer_file"]["passed"] and "README.txt" in checks["answer_file"]["reason"]
    # The copy probe wrote output/totals.json over the workspace and was put back: the no-op
    # (graded first) and every other probe still fail, so only the copy is flagged.
    assert checks["noop"]["passed"] and checks["trivial:empty"]["passed"]
    assert not verdict["kept"]

    def accept_empty(folder: Path) -> None:
        (folder / "tests/answer.json").write_text(json.dumps({"output/totals.json": {}}))

    checks, verdict = checks_of(edited(row, tmp_path / "c", accept_empty))
    accepted = [n for n, c in checks.items() if n.startswith("trivial:") and not c["passed"]]
    assert accepted and not verdict["kept"]

    def leak(folder: Path) -> None:
        answer = json.loads((folder / "tests/answer.json").read_text())
        value = next(iter(answer["output/totals.json"].values()))
        path = folder / "instruction.md"
        path.write_text(path.read_text() + f"\nHint: one total is {value}.\n")

    checks, verdict = checks_of(edited(row, tmp_path / "d", leak))
    assert not checks["leak"]["passed"] and not verdict["kept"]


# A solve() that fails the task but plants a verdict everywhere the grader reads or writes:
# a fake grader and answer key in /tests, a reward in /logs/verifier, then /logs/verifier
# swapped for a symlink to a folder holding a passing reward.
PLANTS = r"""
mkdir -p /tests/.clawloop-probes /workspace/fake
echo 'def grade(c, a, w): return {"reward": 1.0, "passed": True, "checks": []}' > /tests/grader.py
echo '{}' > /tests/.clawloop-probes/probes.json
echo '{"reward": 1.0}' > /workspace/fake/reward.json
echo '{"noop": {"reward": 0.0}}' > /workspace/fake/probes.json
# /logs is read-only where the sandbox runs as root: then the swap fails, and the solve goes on
(rm -rf /logs/verifier && ln -s /workspace/fake /logs/verifier) 2>/dev/null || true
"""


def test_what_a_solve_plants_is_emptied_before_grading(tmp_path: Path) -> None:
    row = forge((FIXTURES / "bad_solve.py").read_text())

    def plant(folder: Path) -> None:
        solve = folder / "solution/solve.sh"
        solve.write_text(solve.read_text() + PLANTS)

    checks, verdict = checks_of(edited(row, tmp_path, plant))
    assert not checks["oracle"]["passed"], checks["oracle"]
    assert "reference solution scores 0." in checks["oracle"]["reason"]
    assert checks["noop"]["passed"] and any(n.startswith("trivial:") for n in checks)
    assert not verdict["kept"]


def test_a_test_sh_other_than_the_canonical_one_is_run_as_is(tmp_path: Path) -> None:
    row = forge(GOOD)

    def zero_reward(folder: Path) -> None:
        (folder / "tests/test.sh").write_text(
            "#!/bin/bash\nmkdir -p /logs/verifier\necho '{\"reward\": 0.0}' > /logs/verifier/reward.json\n"
        )

    checks, verdict = checks_of(edited(row, tmp_path, zero_reward))
    assert not checks["oracle"]["passed"] and "scores 0.000" in checks["oracle"]["reason"]
    assert checks["noop"]["passed"] and not verdict["kept"]


# What test.sh calls in a stub grader: grade() the workspace, write its reward.
STUB_MAIN = """
def main(argv):
    ws = argv[argv.index("--workspace") + 1]
    out = argv[argv.index("--out") + 1]
    g = grade({}, {}, ws)
    open(out, "w").write(json.dumps({"reward": g["reward"]}))
"""

FAKE_GRADER = (
    """
import json, os
def grade(contract, answer, workspace):
    try:
        text = open(os.path.join(workspace, "out.txt")).read()
    except OSError:
        text = ""
    ok = text == "right"
    return {"reward": 1.0 if ok else 0.0, "passed": ok, "checks": []}
"""
    + STUB_MAIN
)


@pytest.mark.parametrize("code_blob", [None, b"\0" * 16 + b"not marshal"])
def test_the_driver_grades_every_probe_over_a_pristine_workspace(code_blob) -> None:
    probes = {
        "a_wrong": {"out.txt": "wrong", "new/dir/file.txt": "x"},
        "b_right": {"out.txt": "right"},
        "c_after": {},
        "d_escape": {"../../escape.txt": "x"},
        # a starting file where the probe needs a folder: removed first, as an agent would
        "e_in_the_way": {"keep.csv/x": "1", "out.txt": "right"},
    }
    stage = "/tests/.clawloop-probes"
    job = {
        "tests": "/tests",
        "workspace": "/workspace",
        "logs": "/logs/verifier",
        "probes": f"{stage}/probes.json",
        "pristine": f"{stage}/workspace",
        "results": "/logs/verifier/p.json",
        "oracle": True,
        "alarm": 30,
    }
    tests = {
        "grader.py": (FAKE_GRADER.encode(), False),
        "contract.json": (b"{}", False),
        "answer.json": (b"{}", False),
        ".clawloop-probes/driver.py": (PROBE_DRIVER.encode(), False),
        ".clawloop-probes/jobs.json": (
            json.dumps({"grader": "/tests/grader.py", "jobs": [job]}).encode(),
            False,
        ),
        ".clawloop-probes/probes.json": (json.dumps(probes).encode(), False),
        ".clawloop-probes/workspace/out.txt": (b"pristine", False),
        ".clawloop-probes/workspace/keep.csv": (b"a,b\n", True),
    }
    if code_blob is not None:  # a stale or foreign code object: the driver compiles the source
        tests[".clawloop-probes/grader.code"] = (code_blob, False)
    with BwrapSandbox(SB) as sb:
        sb.write_files("/workspace", {"out.txt": (b"right", False)})
        sb.write_files("/tests", tests)
        res = sb.exec(["python3", "-I", "-S", f"{stage}/driver.py", stage])
        assert res.ok, res.stderr
        results = json.loads(sb.read_file("/logs/verifier/p.json", 1 << 20))
        reward = json.loads(sb.read_file("/logs/verifier/reward.json", 1 << 20))
        after = sb.exec(
            [
                "sh",
                "-c",
                f"cd {stage}/workspace && find . | sort && cat out.txt && echo && cat keep.csv",
            ]
        )
        mode = sb.exec(["stat", "-c", "%a", f"{stage}/workspace/keep.csv"]).stdout.strip()
    assert reward == {"reward": 1.0}  # the oracle graded /workspace, not the pristine copy
    assert results["noop"]["reward"] == 0.0
    assert results["trivial:a_wrong"]["reward"] == 0.0
    assert results["trivial:b_right"]["reward"] == 1.0
    assert results["trivial:c_after"]["reward"] == 0.0  # b_right's file was put back
    assert "outside the workspace" in results["trivial:d_escape"]["error"]
    assert results["trivial:e_in_the_way"]["reward"] == 1.0
    assert after.stdout.split() == [".", "./keep.csv", "./out.txt", "pristine", "a,b"]
    assert mode == "755"  # keep.csv put back as it was


# ---- gradings batched across tasks (verify_tasks, grade_jobs) ---------------------------------


def _with_solve_tail(row: dict, tmp_path: Path, tail: str) -> dict:
    def edit(folder: Path) -> None:
        solve = folder / "solution/solve.sh"
        solve.write_text(solve.read_text() + tail)

    return edited(row, tmp_path, edit)


def test_batched_gradings_give_each_task_the_rows_it_gets_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import clawloop.generators.verify as verify

    good = forge(GOOD)

    def zero_reward(folder: Path) -> None:
        (folder / "tests/test.sh").write_text(
            "#!/bin/bash\nmkdir -p /logs/verifier\necho '{\"reward\": 0.0}' > /logs/verifier/reward.json\n"
        )

    def answer_in_readme(folder: Path) -> None:
        answer = json.loads((folder / "tests/answer.json").read_text())
        text = json.dumps(answer["output/totals.json"])
        (folder / "environment/workspace/README.txt").write_text(text)

    rows = [
        good,
        forge(GOOD, seed=5),
        _with_solve_tail(forge((FIXTURES / "bad_solve.py").read_text()), tmp_path / "p", PLANTS),
        edited(good, tmp_path / "t", zero_reward),  # its own test.sh: graded in its sandbox
        edited(good, tmp_path / "r", answer_in_readme),
        # A symlink in the solved workspace: not copied, graded in its own sandbox.
        _with_solve_tail(good, tmp_path / "l", "ln -s /tests/answer.json /workspace/output/x\n"),
        forge((FIXTURES / "bad_solve.py").read_text(), seed=6),
    ]
    batched = batch_sizes(monkeypatch, "grade_jobs")
    together = verify.verify_tasks(rows, SB)
    assert batched == [5]  # all but the foreign test.sh and the symlink, in one grading exec
    alone = [verify.verify_task(r, SB) for r in rows]
    assert batched == [5]  # one task alone is graded in its own sandbox
    assert together == alone
    kept = [v["kept"] for _, v in together]
    assert kept == [True, True, False, False, False, True, False]


SLOW_GRADER = (
    """
import json, os, time
def grade(contract, answer, workspace):
    if os.path.exists(os.path.join(workspace, "slow")):
        time.sleep(30)
    ok = os.path.exists(os.path.join(workspace, "out.txt"))
    return {"reward": 1.0 if ok else 0.0, "passed": ok, "checks": []}
"""
    + STUB_MAIN
)


def test_a_grading_past_its_alarm_costs_only_its_own_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The middle job's grading outlasts its alarm: the interpreter ends, the first job's results
    # stand, the last job (never reached) is graded again alone, and so is the slow one, which
    # again leaves none: its grading is the one that failed.
    import clawloop.generators.verify as verify
    from clawloop.generators.verify import grading

    monkeypatch.setattr(
        grading, "canonical_test_side", lambda: {"grader.py": (SLOW_GRADER.encode(), False)}
    )
    probes = {"probes.json": (b"{}", False), "workspace": None}
    keys = {"contract.json": (b"{}", False), "answer.json": (b"{}", False)}
    solved = {"out.txt": (b"x", False)}
    jobs = [
        verify.GradeJob(keys, probes, solved, 20.0),
        verify.GradeJob(keys, {**probes, "workspace/slow": (b"", False)}, solved, 1.0),
        verify.GradeJob(keys, probes, solved, 20.0),
    ]
    first, slow, last = verify.grade_jobs(jobs, SB)
    assert first.oracle.passed and json.loads(first.probes) == {
        "noop": {"reward": 0.0, "passed": False}
    }
    assert last.oracle.passed and last.probes is not None
    assert slow.probes is None and "SIGALRM" in slow.why


# ---- built-in reference solutions solved together (runner.solve_each) ---------------------------


def test_builtin_tasks_solved_and_graded_together_get_the_rows_they_get_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import clawloop.generators.verify as verify
    from clawloop.synthesis.library import render_generator

    rows = []
    for i, (cap, fmt) in enumerate(
        [("reconciliation", "json"), ("anomaly_flagging", "csv"), ("entity_resolution", "report")]
    ):
        code = render_generator(cap, "apiculture", multihop=i % 2, dirtiness=1, output_format=fmt)
        row = forge_candidate(candidate_row(code, 11 + i, origin="builtin"), SB)
        assert row["status"] == "ok", row["error"]
        rows.append(row)
    rows.append(forge(GOOD))  # not a built-in: solved in its own sandbox
    calls = batch_sizes(monkeypatch, "solve_each")
    together = verify.verify_tasks(rows, SB)
    assert calls == [3]
    assert together == [verify.verify_task(r, SB) for r in rows]
    assert all(v["kept"] for _, v in together), [v["reason"] for _, v in together]
    determinism = [c for cs, _ in together for c in cs if c["check"] == "determinism"]
    assert len(determinism) == 4 and all("agree" in c["reason"] for c in determinism)


def test_solve_each_leaves_failed_and_unreached_jobs_to_be_solved_alone() -> None:
    from clawloop.generators.candidates import parse_meta
    from clawloop.generators.runner import SolveJob, solve_each

    raises = GOOD.replace(
        "def solve(workspace):", "def solve(workspace):\n    raise ValueError('no')"
    )
    hangs = GOOD.replace(
        "def solve(workspace):", "def solve(workspace):\n    import time; time.sleep(60)"
    )
    codes = [GOOD, raises, GOOD, hangs, GOOD]
    from clawloop.generators.runner import run_build

    files = {rel: (text.encode(), False) for rel, text in run_build(GOOD, 4, SB).files.items()}
    with BwrapSandbox(SB) as sb:
        for i in range(len(codes)):
            sb.write_files(f"/workspace/{i}", files)
        jobs = [
            SolveJob(parse_meta(c), c, f"/workspace/{i}", 1.0 if c is hangs else 20.0, 4)
            for i, c in enumerate(codes)
        ]
        first, failed, third, hung, unreached = solve_each(sb, jobs)
    assert first is not None and first.error is None and first.rebuild is not None
    assert third is not None and third.rebuild.digest() == first.rebuild.digest()
    assert failed is None and hung is None and unreached is None
