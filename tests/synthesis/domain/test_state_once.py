"""A domain task stores its state once (issue 24, item 5): the generator carries the snapshot
compressed in one literal, and the answer key's guards hold a digest per untouched record, not
the records, while grading the same way (a changed record is still named)."""

from __future__ import annotations

import json
import random
import runpy
from pathlib import Path

import pytest

from clawloop.harness.taskfolder.grader import grade
from clawloop.harness.taskfolder.state_predicates import check_predicate, record_digest
from clawloop.synthesis.domain.predicates import diff, predicates
from clawloop.synthesis.domain.render import embedded_state, pack, render_generator, unpack

KEYS = {"users": "user_id"}
CONTRACT = {
    "outputs": [{"path": "state", "format": "state", "schema": {"store": "json"}}],
    "tolerance": {"abs": 0.01, "rel": 0.0},
}


def users(n: int) -> list[dict]:
    rng = random.Random(7)
    return [
        {
            "user_id": f"U{i:05d}",
            "name": f"user {rng.random():.12f}",
            "miles": rng.randint(0, 900_000),
        }
        for i in range(n)
    ]


def answer(initial: list[dict], final: list[dict]) -> dict:
    a, b = {"users": initial}, {"users": final}
    return {"state": {"predicates": predicates(a, b, diff(a, b, KEYS), ["gold"], KEYS)}}


def _equal(e, g):
    return e == g


def test_the_guard_holds_digests_not_records_and_is_smaller_than_the_state():
    start = users(2000)
    final = [dict(start[0], tier="gold"), *start[1:]]
    preds = answer(start, final)["state"]["predicates"]
    guard = next(p for p in preds if p["kind"] == "unchanged")
    assert "records" not in guard and len(guard["digests"]) == 1999
    assert guard["digests"]['"U00001"'] == record_digest(start[1])
    # the answer key no longer restates the table: well under half the state's own size
    assert len(json.dumps(preds)) < len(json.dumps(start)) / 2


def test_a_changed_untouched_record_is_named_by_its_key(tmp_path):
    start = users(50)
    final = [dict(start[0], tier="gold"), *start[1:]]
    key = answer(start, final)
    sabotage = [dict(r) for r in final]
    sabotage[17]["miles"] += 1
    sabotage[30]["name"] = "someone else"
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "users.json").write_text(json.dumps(sabotage))
    result = grade(CONTRACT, key, str(tmp_path))
    failed = [c for c in result["checks"] if not c["passed"]]
    assert not result["passed"] and len(failed) == 1, failed
    assert "U00017" in failed[0]["detail"] and "U00030" in failed[0]["detail"], failed
    assert "2 record(s)" in failed[0]["detail"]


def test_float_noise_is_still_unchanged_but_a_bool_is_not_a_number_nor_a_number_text():
    start = [{"user_id": "U1", "miles": 2.0}, {"user_id": "U2", "miles": 0.1, "ok": True}]
    final = [dict(start[0], tier="gold"), start[1]]
    guard = next(p for p in answer(start, final)["state"]["predicates"] if p["kind"] == "unchanged")
    noise = {"users": [final[0], {"user_id": "U2", "miles": 0.30000000000000004 - 0.2, "ok": True}]}
    assert check_predicate(guard, noise, _equal)[0]  # 0.1 to 12 significant digits
    ints = {"users": [final[0], {"user_id": "U2", "miles": 0.1, "ok": True}]}
    assert check_predicate(guard, ints, _equal)[0]
    boolean = {"users": [final[0], {"user_id": "U2", "miles": 0.1, "ok": 1}]}
    assert not check_predicate(guard, boolean, _equal)[0]
    text = {"users": [final[0], {"user_id": "U2", "miles": "0.1", "ok": True}]}
    ok, detail = check_predicate(guard, text, _equal)
    assert not ok and "user_id=U2 (changed)" in detail


def test_a_table_without_a_unique_field_keeps_its_guard_as_a_digest_multiset():
    start = [{"tag": "a", "n": 1}, {"tag": "a", "n": 1}, {"tag": "b", "n": 2}]
    final = [*start, {"tag": "c", "n": 3}]
    a, b = {"tags": start}, {"tags": final}
    preds = predicates(a, b, diff(a, b, {}), ["c"], {})
    guard = next(p for p in preds if p["kind"] == "unchanged")
    assert guard["key"] is None and isinstance(guard["digests"], list)
    assert check_predicate(guard, {"tags": list(reversed(final))}, _equal)[0]
    gone = [start[0], start[1], {"tag": "b", "n": 5}, final[3]]
    ok, detail = check_predicate(guard, {"tags": gone}, _equal)
    assert not ok and "no unique field" in detail


def test_an_answer_key_written_before_digests_still_grades():
    start = users(5)
    legacy = {"kind": "unchanged", "table": "users", "key": "user_id", "records": start[1:]}
    legacy["total"] = 5
    assert check_predicate(legacy, {"users": start}, _equal)[0]
    moved = [start[0], dict(start[1], miles=-1), *start[2:]]
    ok, detail = check_predicate(legacy, {"users": moved}, _equal)
    assert not ok and "U00001" in detail


def _generator(tmp: Path, files: dict[str, str]) -> tuple[str, dict]:
    code = render_generator(
        "A task.",
        {"capability": "domain_grounded", "domain": "x", "multihop": 0, "dirtiness": 0,
         "output_format": "state"},
        "Make U00001 gold.",
        files,
        [{"kind": "tables", "tables": ["users"]}],
        [],
        dict(CONTRACT, decisions=[]),
    )  # fmt: skip
    path = tmp / "generator.py"
    path.write_text(code)
    return code, runpy.run_path(str(path))["build"](1)


def test_the_generator_carries_the_snapshot_once_compressed_and_builds_it_back(tmp_path):
    state = json.dumps(users(3000), indent=1)
    files = {"state/users.json": state, "skills/a/SKILL.md": "# a\nThe a skill.\n"}
    code, built = _generator(tmp_path, files)
    assert built["files"] == files  # the same workspace, byte for byte
    assert '"user_id"' not in code and "U02999" not in code  # not as text, not escaped
    assert len(code) < len(state) / 3
    assert "The a skill." in code  # the rest stays readable data
    (tmp_path / "again").mkdir()
    again, _ = _generator(tmp_path / "again", files)
    assert again == code  # deterministic: one task, one generator
    assert embedded_state(code) == {"state/users.json": state}  # read back as data, never run
    assert embedded_state("TASK = {}\n") == {}  # rendered before the snapshot moved to STATE


def test_a_whole_float_and_its_int_have_one_digest():
    assert record_digest({"miles": 2.0}) == record_digest({"miles": 2})
    assert record_digest({"miles": 2.5}) != record_digest({"miles": 2})


def test_pack_round_trips_non_ascii_text():
    files = {"state/a.json": '{"name": "Zoë — 東京"}\n', "state/b.sql": "INSERT 'x';\n"}
    assert unpack(pack(files)) == files


@pytest.mark.slow
def test_a_synthesized_domain_task_holds_its_state_once(tmp_path):
    """The built-in apiary domain, end to end: the generator's build gives back the workspace
    the synthesis ran on, byte for byte, though the snapshot's text is nowhere in the code, and
    the answer key restates no record."""
    from _sabotage import DOMAINS

    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.synthesis.domain.load import load_domain
    from clawloop.synthesis.domain.skills import cluster_skills
    from clawloop.synthesis.domain.synth import synthesize_domain
    from clawloop.synthesis.domain.workspace import workspace_files

    made = synthesize_domain(DOMAINS["apiary_coop"], 1, 7, SandboxConfig())
    assert made.candidates, [g["reason"] for g in made.graphs]
    code = made.candidates[0]["generator_code"]
    path = tmp_path / "generator.py"
    path.write_text(code)
    built = runpy.run_path(str(path))["build"](7)
    domain = load_domain(DOMAINS["apiary_coop"])
    files = workspace_files(domain, cluster_skills(domain))
    assert built["files"] == files
    state = sum(len(t) for p, t in files.items() if p.startswith("state/"))
    # once: the generator is smaller than the workspace it builds (it held the snapshot escaped
    # twice, over 1.7x the workspace), and the answer key than half the snapshot (it listed
    # every record, 1.5x the snapshot)
    assert len(code) < sum(map(len, files.values())), (len(code), state)
    assert len(json.dumps(built["answer"])) < state / 2, state
