"""Verification checks: the pure leak detector here; sandbox checks on planted generators."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawloop.generators.contract import validate_build
from clawloop.generators.verify import hidden_answer
from clawloop.generators.verify.grading import probe_verdict
from clawloop.generators.verify.leaks import (
    decision_fields,
    find_leaks,
    is_revealing_string,
    prose_numbers,
    revealing_number,
    undefined_decision_fields,
)

TOL = {"abs": 0.01, "rel": 0.0}


def leaks(answer, text: str, inputs: str = "", tol=TOL) -> list[str]:
    return find_leaks(answer, {"instruction.md": text}, inputs, tol)


def test_computed_number_in_instruction_is_a_leak() -> None:
    answer = {"output/totals.json": {"HV-101": 23.47, "HV-202": 8.1}}
    assert leaks(answer, "Report totals per hive. Hint: HV-101 has 23.47 kg.") == [
        "'23.47' in instruction.md"
    ]


def test_number_rounded_within_tolerance_is_a_leak() -> None:
    answer = {"out.json": {"mean": 123.4449}}
    assert leaks(answer, "The mean is about 123.44.")
    # Outside the tolerance it tells the reader nothing exact.
    assert not leaks(answer, "The mean is about 123.3.")


def test_trivial_numbers_are_not_flagged() -> None:
    answer = {
        "out.json": {"count": 1, "flag": 0, "small": 12, "half": 0.5, "round": 250, "ok": True}
    }
    text = "Use 0 or 1 flags; 12 readings per hive, 0.5 kg steps; ignore hives above 250 kg; True."
    assert leaks(answer, text) == []


def test_numbers_match_whole_tokens_only() -> None:
    answer = {"out.json": {"total": 1234}}
    assert leaks(answer, "id 112345 and 1234.5 and 12345") == []
    assert leaks(answer, "the total is 1234.") == ["'1234' in instruction.md"]


def test_numeric_strings_count_as_numbers() -> None:
    answer = {"out.csv": [{"hive": "HV-101", "kg": "731.25"}]}
    assert leaks(answer, "expect 731.25 kg", inputs="HV-101") == ["'731.25' in instruction.md"]


def test_everyday_words_and_copied_ids_are_not_flagged() -> None:
    answer = {"out.csv": [{"status": "active", "hive": "HV-101", "apiary": "North Ridge"}]}
    inputs = "hive,apiary,status\nHV-101,North Ridge,active\n"
    text = "Count only active hives; HV-101 sits on North Ridge."
    assert leaks(answer, text, inputs) == []


def test_computed_strings_are_flagged() -> None:
    # A derived label that appears nowhere in the inputs gives the answer away.
    answer = {"out.json": {"busiest_week": "2024-W27", "verdict": "over budget"}}
    found = leaks(
        answer, "Hint: it is 2024-W27, and the verdict is over budget.", inputs="date\n2024-07-01\n"
    )
    assert found == ["'2024-W27' in instruction.md", "'over budget' in instruction.md"]


def test_prose_numbers_read_every_common_format_on_token_boundaries() -> None:
    nums = prose_numbers("totals: 20,378.5 and 20 378,5; 2.04e4; -731.25; id HV-112345x; v1.2.3")
    for x in (20378.5, 2.04e4, 731.25):
        assert x in nums
    assert 112345 not in nums  # inside a word


@pytest.mark.parametrize(
    "text",
    [
        "the total is 20,378.5 kg",
        "the total is 20 378,5 kg",
        "the total is about 2.03785e4",
        "the total is 20378.51",  # within the grader's tolerance of the answer
        "the net change is 20378.5 (a loss)",  # the magnitude of a negative answer
    ],
)
def test_numbers_in_any_form_within_tolerance_are_leaks(text: str) -> None:
    for value in (20378.5, -20378.5):
        assert leaks({"out.json": {"total": value}}, text), (value, text)


def test_revealing_numbers_and_string_rules() -> None:
    assert revealing_number(23.47) == 23.47 and revealing_number("731.25") == 731.25
    assert revealing_number(3) is None and revealing_number(250) is None
    assert revealing_number(float("nan")) is None and revealing_number(True) is None
    assert not is_revealing_string("retired", "")
    assert not is_revealing_string("N/A", "")
    assert is_revealing_string("HV-101", "")
    assert not is_revealing_string("HV-101", "HV-101,3\n")


def _report_task(covers: list | None = None) -> dict:
    out = {"path": "output/r.md", "format": "report", "sidecar": "output/f.json", "schema": {}}
    if covers is not None:
        out["covers"] = covers
    return validate_build(
        {
            "instruction": "Report the busiest month.",
            "files": {"data/log.csv": "date,kg\n2024-03-02,1.5\n"},
            "answer": {"output/f.json": {"busiest_month": "2024-03", "peak_total_kg": 731.25}},
            "contract": {"outputs": [out], "tolerance": TOL, "decisions": []},
        }
    ).to_dict()


def _audit(task: dict) -> list[str]:
    answer = hidden_answer(task["answer"], task["contract"])
    texts = {"the contract": json.dumps(task["contract"]), "instruction.md": task["instruction"]}
    return find_leaks(answer, texts, "\n".join(task["files"].values()), TOL)


def test_a_reports_coverage_list_is_no_leak_but_a_value_in_it_is() -> None:
    task = _report_task()
    assert task["contract"]["outputs"][0]["covers"] == [
        {"per": [], "fields": ["busiest_month", "peak_total_kg"]}
    ]
    assert "peak_total_kg" in json.dumps(task["contract"])
    assert _audit(task) == []  # the names the report must cover tell nothing
    told = _report_task([{"per": [], "fields": ["busiest_month", "peak_total_kg", "731.25"]}])
    assert _audit(told) == ["'731.25' in the contract"]
    hinted = _report_task()
    hinted["instruction"] += " It peaks at 731,25 kg."
    assert _audit(hinted) == ["'731.25' in instruction.md"]


def test_decision_fields_are_named_by_definitions() -> None:
    rules = [
        "Ignore test rows; total sums the usable kg values.",
        "share_pct = total / group total. top_hive is the hive with the largest total.",
        "A reading is anomalous when it is far off; each is flagged. Date is DD/MM/YYYY.",
    ]
    assert decision_fields(rules) == ["total", "share_pct", "top_hive"]


def test_a_decision_defining_a_field_no_output_holds_is_found() -> None:
    """What csv tasks used to do: the rules define a summary that no output holds."""
    contract = {
        "outputs": [{"path": "o.csv", "format": "csv", "columns": ["hive_id", "total"]}],
        "decisions": [
            "total sums the kg values; kg = lb / factor.",
            "grand_total sums total over all hives; top_hive is the largest.",
        ],
    }
    answer = {"o.csv": [{"hive_id": "H-1", "total": 2.5}]}
    files = {"data/log.csv": "hive_id,lb\nH-1,5\n", "reference/factor.csv": "kg\n2\n"}
    assert undefined_decision_fields(contract, answer, files) == ["grand_total", "top_hive"]
    contract["outputs"].append({"path": "s.json", "format": "json", "schema": {}})
    answer["s.json"] = {"grand_total": 2.5, "top_hive": "H-1"}
    assert undefined_decision_fields(contract, answer, files) == []


def test_probe_verdicts() -> None:
    assert probe_verdict({"reward": 0.0}, "probe")[0]
    assert probe_verdict({"reward": 0.5}, "probe")[0]
    ok, reason = probe_verdict({"reward": 1.0}, "probe 'empty'")
    assert not ok and "accepts" in reason
    assert probe_verdict({"reward": 0.0, "error": "boom"}, "probe")[0]


# ---- sandbox checks on planted generators, both backends -------------------------------------

from clawloop.generators.candidates import candidate_row  # noqa: E402
from clawloop.generators.forge import forge_candidate  # noqa: E402
from clawloop.generators.verify import verify_task  # noqa: E402
from clawloop.harness.sandbox.base import SandboxConfig  # noqa: E402
from clawloop.harness.taskfolder.packing import pack_dir, unpack_tar  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "fixtures" / "generators"
BACKENDS = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")
    ),
    pytest.param("docker", marks=pytest.mark.docker),
]


@pytest.fixture(params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> SandboxConfig:
    return SandboxConfig(backend=request.param)


def forged(name: str, sandbox: SandboxConfig, seed: int = 4) -> dict:
    row = forge_candidate(candidate_row((FIXTURES / f"{name}.py").read_text(), seed), sandbox)
    assert row["status"] == "ok", row["error"]
    return row


def by_name(checks: list[dict]) -> dict[str, dict]:
    return {c["check"]: c for c in checks}


def test_good_task_is_kept_with_every_check(sandbox: SandboxConfig) -> None:
    checks, verdict = verify_task(forged("good", sandbox), sandbox)
    names = by_name(checks)
    assert verdict["kept"], verdict["reason"]
    assert verdict["reason"] == "all checks passed"
    assert {"determinism", "leak", "oracle", "noop"} <= set(names)
    assert any(n.startswith("trivial:") for n in names)
    assert all(c["passed"] and c["reason"] for c in checks)


@pytest.mark.parametrize(
    "name, check, needle",
    [
        ("bad_solve", "oracle", "reference solution scores"),
        ("leaky", "leak", "answer values visible"),
        ("nondeterministic", "determinism", "differ"),
        ("answer_in_workspace", "answer_file", "copying README.txt to the outputs passes"),
    ],
)
def test_planted_bad_task_is_dropped_with_reason(
    sandbox: SandboxConfig, name: str, check: str, needle: str
) -> None:
    checks, verdict = verify_task(forged(name, sandbox), sandbox)
    failed = {c["check"]: c["reason"] for c in checks if not c["passed"]}
    assert not verdict["kept"]
    assert check in failed and needle in failed[check], failed
    assert verdict["reason"].startswith(next(iter(failed)))


def _edited(row: dict, tmp_path: Path, edit) -> dict:
    folder = unpack_tar(row["task_tar"], tmp_path / "task")
    edit(folder)
    return dict(row, task_tar=pack_dir(folder))


def test_noop_false_positive_is_dropped(tmp_path: Path) -> None:
    sb = SandboxConfig(backend="bwrap")
    row = forged("good", sb)

    def plant_answer(folder: Path) -> None:
        answer = json.loads((folder / "tests/answer.json").read_text())
        out = folder / "environment/workspace/output/totals.json"
        out.parent.mkdir(parents=True)
        out.write_text(json.dumps(answer["output/totals.json"]))

    checks, verdict = verify_task(_edited(row, tmp_path, plant_answer), sb)
    noop = by_name(checks)["noop"]
    assert not noop["passed"] and "false positive" in noop["reason"]
    assert not verdict["kept"]


def test_verifier_accepting_a_trivial_probe_is_dropped(tmp_path: Path) -> None:
    sb = SandboxConfig(backend="bwrap")
    row = forged("good", sb)

    def empty_answer(folder: Path) -> None:
        (folder / "tests/answer.json").write_text(json.dumps({"output/totals.json": {}}))

    checks, verdict = verify_task(_edited(row, tmp_path, empty_answer), sb)
    accepted = [c for c in checks if c["check"].startswith("trivial:") and not c["passed"]]
    assert accepted and "accepts" in accepted[0]["reason"]
    assert not verdict["kept"]


# A solve() that fails the task but leaves a detached loop rewriting the verdict files (the
# reward and the probe results) for the grader to find after test.sh and the probe driver ran.
SELF_GRADING = r"""
cat > /tmp/w.sh <<'EOS'
while :; do
    echo '{"reward": 1.0}' > /logs/verifier/reward.json
    echo '{"noop": {"reward": 0.0}}' > /logs/verifier/probes.json
    sleep 0.005
done
EOS
(setsid bash /tmp/w.sh >/dev/null 2>&1 &)
"""


def test_a_solution_cannot_fake_the_oracle(sandbox: SandboxConfig, tmp_path: Path) -> None:
    row = forged("bad_solve", sandbox)

    def leave_a_writer(folder: Path) -> None:
        solve = folder / "solution/solve.sh"
        solve.write_text(solve.read_text() + SELF_GRADING)

    checks, verdict = verify_task(_edited(row, tmp_path, leave_a_writer), sandbox)
    oracle = by_name(checks)["oracle"]
    assert not oracle["passed"] and "reference solution scores 0." in oracle["reason"], oracle
    assert by_name(checks)["noop"]["passed"]  # graded for real, not read from the planted file
    assert not verdict["kept"]


def test_failed_forge_row_gets_a_verdict_without_sandbox() -> None:
    row = {
        "task_id": "x",
        "status": "failed",
        "error": "generator 'g', seed 1: boom",
        "task_tar": b"",
        "capability": "c",
        "domain": "d",
        "split": "train",
    }
    checks, verdict = verify_task(row, SandboxConfig(backend="bwrap"))
    assert [c["check"] for c in checks] == ["forge"] and not checks[0]["passed"]
    assert not verdict["kept"] and "boom" in verdict["reason"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")
def test_rerunning_forge_and_verify_writes_byte_identical_parquet() -> None:
    """Rows hold no timing or other per-run fact: an unchanged stage re-run writes the same bytes."""
    from clawloop.storage.artifacts import parquet_bytes
    from clawloop.storage.schemas import CHECKS, FORGED, VERDICTS

    sb = SandboxConfig(backend="bwrap")
    cand = candidate_row((FIXTURES / "good.py").read_text(), 4)
    runs = []
    for _ in range(2):
        row = forge_candidate(cand, sb)
        assert row["status"] == "ok", row["error"]
        checks, verdict = verify_task(row, sb)
        assert verdict["kept"], verdict["reason"]
        runs.append(([row], checks, [verdict]))
    first, second = runs
    for rows_a, rows_b in zip(first, second, strict=True):
        differ = {k for ra, rb in zip(rows_a, rows_b, strict=True) for k in ra if ra[k] != rb[k]}
        assert not differ, f"columns that change from run to run: {sorted(differ)}"
    assert first == second
    for schema, a, b in zip((FORGED, CHECKS, VERDICTS), first, second, strict=True):
        assert parquet_bytes(a, schema) == parquet_bytes(b, schema)


# ---- categorical answers (issue 10 item 8) ------------------------------------------------------

FLAG_INPUTS = "reading_id,hive_id,kg\n" + "".join(
    f"R-{i:05d},HV-{100 + i % 5},{10 + i}.5\n" for i in range(1, 21)
)
FLAGGED = {
    "output/anomalies.json": {
        "anomalies": [{"reading_id": r, "hive_id": "HV-102"} for r in ("R-00002", "R-00007")]
        + [{"reading_id": "R-00013", "hive_id": "HV-103"}],
        "summary": {"flagged": 3, "top_hive": "HV-102", "busiest_month": "2024-03"},
    }
}
KEYS = frozenset({"reading_id"})


def cat_leaks(text: str, answer=FLAGGED, inputs: str = FLAG_INPUTS) -> list[str]:
    return find_leaks(answer, {"instruction.md": text}, inputs + "2024-03-02\n", TOL, KEYS)


@pytest.mark.parametrize(
    "text",
    [
        "Flag the odd readings (they are R-00002, R-00007 and R-00013).",
        "Check R-00002 and R-00013 first.",  # most of the selection, nothing else
        "The summary's top_hive is HV-102.",
        "busiest month: 2024-03",
        '{"summary": {"flagged": 3}}',
        "Expect 3 flagged readings.",
    ],
)
def test_a_categorical_answer_stated_as_the_answer_is_a_leak(text: str) -> None:
    """Ids, a month and a small count all occur in the inputs or are trivial numbers: the old
    audit passed every one of these."""
    assert cat_leaks(text), text


@pytest.mark.parametrize(
    "text",
    [
        "Ids look like R-00002; hives like HV-102.",  # one id of a three-id selection
        "Readings: " + ", ".join(f"R-{i:05d}" for i in range(1, 21)) + ".",  # all of them
        "top_hive is the hive_id with the most flagged readings; busiest_month is YYYY-MM.",
        "flagged counts the rows listed; list readings with flagged true only.",
    ],
)
def test_ids_and_field_names_alone_are_no_leak(text: str) -> None:
    assert cat_leaks(text) == [], text


def test_a_rows_boolean_is_a_leak_only_with_its_row() -> None:
    answer = {
        "o.json": [
            {"hive_id": "HV-101", "reconciled": True},
            {"hive_id": "HV-102", "reconciled": False},
            {"hive_id": "HV-103", "reconciled": True},
            {"hive_id": "HV-104", "reconciled": True},
        ]
    }
    inputs = "hive_id\nHV-101\nHV-102\nHV-103\nHV-104\n"
    assert find_leaks(answer, {"i": "HV-102 reconciled: no"}, inputs, TOL, frozenset({"hive_id"}))
    # the unreconciled selection, listed
    assert find_leaks(answer, {"i": "Look hard at HV-102."}, inputs, TOL, frozenset({"hive_id"}))
    for text in (
        "reconciled is true when the totals agree after rounding.",
        "unreconciled counts rows with reconciled false.",
        "Rows: HV-101, HV-102, HV-103 and HV-104.",
    ):
        assert find_leaks(answer, {"i": text}, inputs, TOL, frozenset({"hive_id"})) == [], text


def test_a_year_and_a_threshold_the_task_gives_are_no_leak() -> None:
    """The red-team's false positives: the year the inputs' dates hold, repeated beside a field
    name, and a threshold a decision gives that the answer echoes, read as leaked answers."""
    answer = {"o.json": {"season": 2024, "rows": [{"hive_id": "HV-1", "threshold_kg": 37.5}]}}
    inputs = "hive_id,date,kg\nHV-1,2024-05-01,40.5\n"
    text = (
        "Report the 2024 season in season_2024 order (season: 2024). "
        "Flag readings above 37.5 kg; threshold_kg repeats that limit."
    )
    assert leaks(answer, text, inputs) == []
    # the same numbers as computed answers are still protected
    computed = {"o.json": {"season": 2031, "mean_kg": 37.5}}
    assert leaks(computed, "season 2031, mean 37.5 kg", inputs) == [
        "'2031' in instruction.md",
        "'37.5' in instruction.md",
    ]


def test_check_leak_reads_files_the_task_never_points_to(tmp_path: Path) -> None:
    from clawloop.generators.verify import check_leak, non_input_files

    contract = {
        "outputs": [{"path": "output/a.json", "format": "json", "schema": {}}],
        "tolerance": TOL,
        "decisions": ["Read data/log.csv."],
    }
    files = {"data/log.csv": FLAG_INPUTS, "data/hives/HV-101.json": "{}", "NOTES.txt": ""}
    files["data/index.csv"] = "hive_id,detail_file\nHV-101,data/hives/HV-101.json\n"
    assert non_input_files(files, {"i": "Use data/log.csv and data/index.csv."}) == ["NOTES.txt"]
    for notes, kept in (("Ask the keeper.", True), ("The top hive: HV-102.", False)):
        (tmp_path / "tests").mkdir(exist_ok=True)
        (tmp_path / "tests/contract.json").write_text(json.dumps(contract))
        (tmp_path / "tests/answer.json").write_text(
            json.dumps({"output/a.json": FLAGGED["output/anomalies.json"]})
        )
        (tmp_path / "instruction.md").write_text("Flag odd readings in data/log.csv.")
        for rel, text in dict(files, **{"NOTES.txt": notes}).items():
            p = tmp_path / "environment/workspace" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        ok, reason = check_leak(tmp_path)
        assert ok is kept, reason
        if not kept:
            assert "top_hive='HV-102' stated in workspace file NOTES.txt" in reason


def test_a_batch_gives_each_task_the_rows_it_gets_alone_on_every_backend(
    sandbox: SandboxConfig,
) -> None:
    from clawloop.generators.candidates import candidate_row as row_of
    from clawloop.generators.verify import verify_tasks
    from clawloop.synthesis.library import render_generator

    builtin = render_generator("reconciliation", "apiculture", multihop=1, dirtiness=1)
    rows = [
        forged("good", sandbox),
        forged("leaky", sandbox),
        forge_candidate(row_of(builtin, 3, origin="builtin"), sandbox),
        forge_candidate(row_of(builtin, 4, origin="builtin"), sandbox),
    ]
    together = verify_tasks(rows, sandbox)
    assert together == [verify_task(r, sandbox) for r in rows]
    assert [v["kept"] for _, v in together] == [True, False, True, True]


# -- verify grades on the rollouts' grading path (taskenv.supervised_grading) -----------------

# A Harbor-style test.sh (not the canonical one): our grader, started from a `python3 -` in
# /workspace, which is where Python would look for `json` first outside the grading supervisor.
SHADOWED_TEST_SH = """#!/bin/bash
cd /workspace
python3 - <<'EOF'
import json, subprocess, sys
subprocess.run([sys.executable, "-I", "-S", "/tests/grader.py", "--tests-dir", "/tests",
                "--workspace", "/workspace", "--out", "/logs/verifier/reward.json",
                "--details", "/logs/verifier/details.json"])
EOF
"""
# What solve.sh leaves for it: a json.py that writes a perfect reward and ends the grader.
PLANT_JSON = """
cat > /workspace/json.py <<'EOS'
import os
os.makedirs("/logs/verifier", exist_ok=True)
open("/logs/verifier/reward.json", "w").write('{"reward": 1.0}')
os._exit(0)
EOS
"""
# A verifier that writes a pass, then fails: a rollout never passes it.
FAILING_TEST_SH = "#!/bin/bash\necho '{\"reward\": 1.0}' > /logs/verifier/reward.json\nexit 3\n"


@pytest.mark.parametrize(
    "solve_extra, test_sh, needle",
    [
        (PLANT_JSON, SHADOWED_TEST_SH, "reference solution scores 0."),
        ("", FAILING_TEST_SH, "/tests/test.sh exited 3"),
    ],
    ids=["solve-shadows-the-graders-import", "verifier-exits-non-zero"],
)
def test_verify_grades_as_a_rollout_would(
    sandbox: SandboxConfig, tmp_path: Path, solve_extra: str, test_sh: str, needle: str
) -> None:
    """verify's oracle goes the rollouts' grading path (supervisor, isolated interpreters, the
    verifier's exit counted): a solve() that shadows a module the verifier imports from the
    workspace, or a verifier that exits non-zero, is no oracle pass. Before, verify graded with
    a plain exec and kept both (oracle 1.0), while a rollout scored them 0."""
    from clawloop.harness.taskenv import open_task, run_solution, run_tests

    row = forged("bad_solve", sandbox)

    def edit(folder: Path) -> None:
        solve = folder / "solution/solve.sh"
        solve.write_text(solve.read_text() + solve_extra)
        (folder / "tests/test.sh").write_text(test_sh)

    edited = _edited(row, tmp_path, edit)
    checks, verdict = verify_task(edited, sandbox)
    oracle = by_name(checks)["oracle"]
    assert not oracle["passed"] and needle in oracle["reason"], oracle
    assert not verdict["kept"]
    folder = unpack_tar(edited["task_tar"], tmp_path / "rollout")
    with open_task(folder, sandbox) as sb:
        run_solution(sb, folder)
        grade = run_tests(sb, folder)
    assert grade.reward < 1.0 and not grade.passed, grade.reason  # the rollout agrees
