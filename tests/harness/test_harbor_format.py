"""The task folder as Harbor 0.25 requires it, without Harbor: [task] name "org/<task_id>",
reward.json of numbers only with the per-check details beside it in details.json, and our own
readers (parse_reward, run_tests, read_task_info, import) on both new and older folders.
tests/harness/test_harbor.py runs the same folders with Harbor itself (marker `harbor`)."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from clawloop.generators.candidates import candidate_row
from clawloop.generators.forge import forge_candidate
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskenv import (
    DETAILS_FILE,
    REWARD_FILE,
    open_task,
    parse_reward,
    read_remote_text,
    run_solution,
    run_tests,
)
from clawloop.harness.taskfolder.folder import (
    TaskFolderError,
    bare_task_id,
    harbor_name,
    read_harbor_task_info,
    read_task_info,
    set_task_name,
    writes_numeric_reward,
)
from clawloop.harness.taskfolder.rows import export_rows, import_folder

FIXTURES = Path(__file__).parents[1] / "fixtures" / "generators"
BWRAP = SandboxConfig(backend="bwrap")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")

# tests/test.sh as folders forged before reward.json held numbers only carry it.
LEGACY_TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
rm -f /logs/verifier/reward.*
python3 -I -S /tests/grader.py --tests-dir /tests --workspace /workspace \\
    --out /logs/verifier/reward.json
exit 0
"""


@pytest.fixture(scope="module")
def row() -> dict:
    r = forge_candidate(candidate_row((FIXTURES / "good.py").read_text(), 2), BWRAP)
    assert r["status"] == "ok", r["error"]
    return r


def _name(folder: Path) -> str:
    return tomllib.loads((folder / "task.toml").read_text())["task"]["name"]


# ---- parse_reward: reward from reward.json, checks and reason from details.json ---------------

CHECKS = [
    {"name": "out.json: readable", "passed": True, "detail": "parsed"},
    {"name": "out.json.total", "passed": False, "detail": "expected 3, got 4"},
]


def test_parse_reward_reads_details_beside_a_numeric_reward() -> None:
    details = {"reward": 0.5, "passed": False, "checks": CHECKS, "reason": "out.json.total: bad"}
    g = parse_reward('{"reward": 0.5}', json.dumps(details))
    assert (g.reward, g.passed, g.checks, g.reason) == (0.5, False, CHECKS, "out.json.total: bad")
    g = parse_reward('{"reward": 1.0}', json.dumps({**details, "reward": 1.0, "passed": True}))
    assert g.passed and g.reason == "" and g.checks == CHECKS
    # details without a reason: the first failed check says why
    g = parse_reward('{"reward": 0.5}', json.dumps({"reward": 0.5, "checks": CHECKS}))
    assert g.reason == "expected 3, got 4"


def test_reward_is_the_outcome_and_fraction_the_share_of_checks() -> None:
    details = {"reward": 0.5, "passed": False, "checks": CHECKS, "reason": "out.json.total: bad"}
    g = parse_reward('{"reward": 0.0, "fraction": 0.5}', json.dumps(details))
    assert (g.reward, g.passed, g.checks) == (0.5, False, CHECKS)  # Grade.reward: the fraction
    assert parse_reward('{"reward": 1.0, "fraction": 1.0}').passed
    # an outcome the fraction contradicts does not pass; a foreign task's lone reward is both
    assert not parse_reward('{"reward": 1.0, "fraction": 0.5}').passed
    assert parse_reward('{"reward": 1}').passed and parse_reward('{"reward": 1}').reward == 1.0
    for bad in ('{"reward": 0.0, "fraction": "0.5"}', '{"reward": 0.0, "fraction": 1.5}'):
        g = parse_reward(bad)
        assert (g.reward, g.passed) == (0.0, False) and "fraction" in g.reason


def test_parse_reward_without_or_with_unusable_details() -> None:
    for details in (None, "{garbled", "[1, 2]", json.dumps({"reward": 1.0, "checks": CHECKS})):
        g = parse_reward('{"reward": 0.5}', details)  # missing, garbled, or about another reward
        assert (g.reward, g.passed, g.checks, g.reason) == (0.5, False, [], "reward below 1.0")
    g = parse_reward('{"reward": 0.0}', json.dumps({"reward": 0.0, "checks": [], "reason": "x"}))
    assert g.reason == "x" and g.checks == []
    # reward.json stays the authority: a details file cannot rescue a bad reward
    assert parse_reward('{"reward": "1"}', json.dumps({"reward": 1.0})).reward == 0.0
    assert parse_reward(None, json.dumps({"reward": 1.0})).reason.startswith("the verifier wrote")


def test_parse_reward_still_reads_older_folders_reward_json() -> None:
    legacy = {"reward": 0.5, "passed": False, "checks": CHECKS}
    g = parse_reward(json.dumps(legacy))
    assert g.checks == CHECKS and g.reason == "expected 3, got 4"
    g = parse_reward('{"reward": 0.0, "error": "grader crashed"}')
    assert g.reason == "grader crashed"


# ---- names: org/<task_id> written, the bare id read ---------------------------------------------


def test_harbor_name_and_bare_task_id() -> None:
    assert harbor_name("2044442372c7a752") == "clawloop/2044442372c7a752"
    assert harbor_name("t-1.x_2", org="my.org-1") == "my.org-1/t-1.x_2"
    for org, task_id in (("a/b", "t"), ("", "t"), (".x", "t"), ("a..b", "t"), ("o", "t/u")):
        with pytest.raises(TaskFolderError):
            harbor_name(task_id, org)
    assert bare_task_id("clawloop/abc") == bare_task_id("abc") == "abc"


def test_set_task_name_edits_only_the_name(tmp_path: Path) -> None:
    toml = tmp_path / "task.toml"
    text = '# head\nversion = "1.0"\n\n[task]\nname = "abc"  # old\n\n[metadata]\nname = "keep"\n'
    toml.write_text(text)
    set_task_name(tmp_path, "acme/abc")
    assert toml.read_text() == text.replace('name = "abc"  # old', 'name = "acme/abc"')
    toml.write_text('[metadata]\nname = "keep"\n')  # no [task] table: one is added
    set_task_name(tmp_path, "acme/abc")
    doc = tomllib.loads(toml.read_text())
    assert doc["task"]["name"] == "acme/abc" and doc["metadata"]["name"] == "keep"
    toml.write_text("[task]\n[metadata]\n")  # a [task] table without a name
    set_task_name(tmp_path, "acme/abc")
    assert tomllib.loads(toml.read_text())["task"]["name"] == "acme/abc"


@needs_bwrap
def test_export_names_the_org_and_reading_strips_it(row: dict, tmp_path: Path) -> None:
    task_id = row["task_id"]
    (folder,) = export_rows([row], tmp_path / "a")
    assert _name(folder) == f"clawloop/{task_id}" and writes_numeric_reward(folder)
    (acme,) = export_rows([row], tmp_path / "b", org="acme")
    assert _name(acme) == f"acme/{task_id}"
    a, b = (folder / "task.toml").read_text(), (acme / "task.toml").read_text()
    assert a.replace(f'"clawloop/{task_id}"', f'"acme/{task_id}"') == b  # only the name differs
    assert read_task_info(acme).task_id == read_harbor_task_info(acme).task_id == task_id
    assert import_folder(acme)["task_id"] == task_id
    with pytest.raises(TaskFolderError, match="org"):
        export_rows([row], tmp_path / "c", org="not/an-org")


@needs_bwrap
def test_older_folders_still_read_import_and_export(row: dict, tmp_path: Path) -> None:
    """A folder forged before names had an org, with the old verifier: import keeps the bare
    task_id, export gives it the org and says (writes_numeric_reward) Harbor would reject it."""
    task_id = row["task_id"]
    (old,) = export_rows([row], tmp_path / "old")
    toml = old / "task.toml"
    toml.write_text(toml.read_text().replace(f'"clawloop/{task_id}"', f'"{task_id}"'))
    (old / "tests/test.sh").write_text(LEGACY_TEST_SH)
    assert _name(old) == task_id and read_task_info(old).task_id == task_id
    imported = import_folder(old)
    assert imported["task_id"] == task_id
    (again,) = export_rows([imported], tmp_path / "again")
    assert _name(again) == f"clawloop/{task_id}" and not writes_numeric_reward(again)


# ---- the verifier in a sandbox: reward.json numbers only, details.json beside it ---------------


def _verifier_files(sb) -> tuple[dict, dict]:
    reward = json.loads(read_remote_text(sb, REWARD_FILE) or "null")
    details = json.loads(read_remote_text(sb, DETAILS_FILE) or "null")
    return reward, details


@needs_bwrap
def test_test_sh_writes_numbers_only_and_details(row: dict, tmp_path: Path) -> None:
    (folder,) = export_rows([row], tmp_path)
    with open_task(folder, BWRAP) as sb:  # the untouched workspace: no outputs
        g = run_tests(sb, folder)
        reward, details = _verifier_files(sb)
    assert reward == {"reward": 0.0, "fraction": g.reward} and g.reward < 1.0 and not g.passed
    assert details["passed"] is False and details["checks"] == g.checks and g.checks
    assert g.reason == details["reason"] and g.reason
    with open_task(folder, BWRAP) as sb:
        assert run_solution(sb, folder).ok
        g = run_tests(sb, folder)
        reward, details = _verifier_files(sb)
    assert reward == {"reward": 1.0, "fraction": 1.0} and g.passed and g.reason == ""
    assert details["passed"] is True and details["checks"] == g.checks and g.checks


@needs_bwrap
def test_test_sh_leaves_a_reward_when_the_grader_dies(row: dict, tmp_path: Path) -> None:
    (folder,) = export_rows([row], tmp_path)
    (folder / "tests/grader.py").write_text("raise SystemExit(3)\n")
    with open_task(folder, BWRAP) as sb:
        assert run_solution(sb, folder).ok
        g = run_tests(sb, folder)
        reward, details = _verifier_files(sb)
    assert reward == {"reward": 0.0} and not g.passed and g.checks == []
    assert details["passed"] is False and g.reason == "grader exited 3 without writing a reward"


@pytest.mark.parametrize("value", ["0.0", "-2.0", "inf", "nan", "1e9"])
def test_a_timeout_out_of_range_is_refused(tmp_path: Path, value: str) -> None:
    from clawloop.harness.taskfolder.folder import TaskFolderError, parse_task_info

    text = f'[task]\nname = "clawloop/x"\n[agent]\ntimeout_sec = {value}\n[metadata.clawloop]\nseed = 1\n'
    with pytest.raises(TaskFolderError, match="timeout_sec"):
        parse_task_info(text, tmp_path)


def test_a_task_id_repeated_in_the_metadata_is_not_a_second_value(
    row: dict, tmp_path: Path
) -> None:
    from clawloop.harness.taskfolder.folder import read_task_info

    (folder,) = export_rows([row], tmp_path)
    toml = folder / "task.toml"
    text = toml.read_text().replace(
        "[metadata.clawloop]\n", f'[metadata.clawloop]\ntask_id = "{row["task_id"]}"\n'
    )
    toml.write_text(text)
    assert read_task_info(folder).task_id == row["task_id"]  # [task] name is the one source
