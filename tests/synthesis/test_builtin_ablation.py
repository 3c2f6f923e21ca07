"""Load-bearing difficulty (issue 10 item 10): built-in generators declare each injected
difficulty and solve(workspace, skip=NAME) ignores one; verify's ablation check runs the
reference with each skipped and requires the answer to change."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clawloop.generators.contract import validate_build
from clawloop.generators.verify import ablation_rewards, builtin_source, check_ablation
from clawloop.synthesis import catalog
from clawloop.synthesis.library import render_generator


def built(code: str, seed: int, tmp: Path, fn: str = "build") -> tuple[dict[str, Any], Path]:
    """The task `fn` (build, or a skeleton's draw: one draw, never re-drawn) makes, written out."""
    ns: dict[str, Any] = {"__name__": "generator"}
    exec(compile(code, "generator.py", "exec"), ns)
    task = validate_build(ns[fn](seed)).to_dict()
    ws = tmp / "environment" / "workspace"
    for rel, text in task["files"].items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return task, ws


def task_folder(code: str, seed: int, tmp: Path, fn: str = "build") -> Path:
    """The parts of a forged task folder the ablation check reads."""
    task, _ = built(code, seed, tmp, fn)
    (tmp / "tests").mkdir()
    (tmp / "tests/contract.json").write_text(json.dumps(task["contract"]))
    (tmp / "tests/answer.json").write_text(json.dumps(task["answer"]))
    (tmp / "solution").mkdir()
    (tmp / "solution/generator.py").write_text(code)
    return tmp


def test_each_knob_declares_its_injections() -> None:
    def declared(cap: str, h: int, d: int) -> list[str]:
        ns: dict[str, Any] = {"__name__": "generator"}
        exec(render_generator(cap, "apiculture", h, d), ns)
        return ns["injections"]()

    assert declared("anomaly_flagging", 0, 0) == []
    assert declared("anomaly_flagging", 3, 3) == [
        "hop_register",
        "hop_aliases",
        "stale_detail",
        "test_rows",
        "archive",
        "legacy_schema",
        "blanks",
        "unit_mismatch",
        "dirty_ids",
    ]
    assert "draft" in declared("multi_document_merge", 0, 1)
    assert "dirty_ids" not in declared("entity_resolution", 0, 3)  # rows name entities by text


@pytest.mark.parametrize("capability", list(catalog.CAPABILITIES))
def test_the_stale_detail_file_and_every_hop_are_load_bearing(
    capability: str, tmp_path: Path
) -> None:
    """The stale detail file used to matter in 3 capabilities of 8: its entity now has records."""
    code = render_generator(capability, "apiculture", 3, 1, "json")
    task, ws = built(code, 1007, tmp_path)
    rewards = ablation_rewards(code, task["contract"], task["answer"], ws)
    assert {"stale_detail", "hop_register", "hop_aliases"} <= set(rewards)
    assert all(r < 1.0 for r in rewards.values()), rewards


def test_blanks_are_injected_only_where_they_can_change_the_answer(tmp_path: Path) -> None:
    """A blank read as zero changes no sum and raises no peak: there blanks are no difficulty,
    so none are injected and no rule speaks of them; a mean's blanks are load-bearing."""
    for capability, domain in (
        ("reconciliation", "apiculture"),
        ("cross_source_audit", "bird_banding"),
    ):
        ns: dict[str, Any] = {"__name__": "generator"}
        exec(render_generator(capability, domain, 0, 2), ns)
        task = ns["build"](3)
        assert "blanks" not in ns["injections"]()
        assert not any("A blank" in r for r in task["contract"]["decisions"])
        assert not any(",," in t or t.endswith(",\n") for t in task["files"].values())
    code = render_generator("reconciliation", "bird_banding", 0, 2, "json")  # a mean
    task, ws = built(code, 3, tmp_path)
    assert ablation_rewards(code, task["contract"], task["answer"], ws)["blanks"] < 1.0


def test_an_injection_that_changes_nothing_is_detected(tmp_path: Path) -> None:
    # Blanks forced into an audit of peaks: injected, declared, and a zero never raises a peak.
    code = render_generator("cross_source_audit", "apiculture", 0, 2, "json").replace(
        '"""A blank read as zero never raises a peak: blanks would be no difficulty here."""\n'
        "    return False",
        "return True",
    )
    assert "def blanks_matter():\n    return True" in code and not builtin_source(code)
    task, ws = built(code, 3, tmp_path / "forced")
    assert ablation_rewards(code, task["contract"], task["answer"], ws)["blanks"] == 1.0
    # The check on a real built-in's draw whose dropped rows happen not to hold the peaks (build
    # re-draws such a seed, so the draw alone is forged here).
    for seed in range(1000, 1040):
        code = render_generator("cross_source_audit", "trail_maintenance", 1, 3, "json")
        folder = task_folder(code, seed, tmp_path / str(seed), fn="draw")
        ok, reason = check_ablation(folder)
        if not ok:
            assert "still scores 1.0" in reason and "the answer does not depend on it" in reason
            assert "it acts as dirtiness 2" in reason or "it acts as dirtiness 1" in reason
            break
    else:
        raise AssertionError("no seed left an injection inert")
    loaded = task_folder(
        render_generator("anomaly_flagging", "apiculture", 2, 2), 4, tmp_path / "b"
    )
    ok, reason = check_ablation(loaded)
    assert ok and "hop_register" in reason and "legacy_schema" in reason, reason


def test_other_generators_are_not_run_outside_a_sandbox(tmp_path: Path) -> None:
    src = render_generator("anomaly_flagging", "apiculture", 2, 2) + "\n# edited\n"
    ok, reason = check_ablation(task_folder(src, 4, tmp_path))
    assert ok and "not a built-in generator" in reason


# Seeds whose only draw, before build re-drew, left an injection inert (found by scanning seeds
# 101 and 202 over 8 capabilities x 5 domains x 16 knob pairs): each a different reader.
INERT_BEFORE = [
    ("cross_source_audit", "apiculture", 2, 3, "json", 101, "legacy_schema"),
    ("multi_document_merge", "amateur_radio", 0, 3, "csv", 202, "unit_mismatch"),
    ("unit_schema_normalisation", "trail_maintenance", 1, 3, "json", 202, "test_rows"),
    ("anomaly_flagging", "apiculture", 2, 2, "report", 202, "blanks"),
]


@pytest.mark.parametrize(("cap", "domain", "h", "d", "fmt", "seed", "inert"), INERT_BEFORE)
def test_a_seed_whose_injection_changes_nothing_is_redrawn(
    cap: str, domain: str, h: int, d: int, fmt: str, seed: int, inert: str, tmp_path: Path
) -> None:
    code = render_generator(cap, domain, h, d, fmt)
    first, ws = built(code, seed, tmp_path / "draw", fn="draw")
    assert ablation_rewards(code, first["contract"], first["answer"], ws)[inert] == 1.0
    task, ws = built(code, seed, tmp_path / "build")
    assert task["files"] != first["files"]
    rewards = ablation_rewards(code, task["contract"], task["answer"], ws)
    assert inert in rewards and all(r < 1.0 for r in rewards.values()), rewards
    assert check_ablation(task_folder(code, seed, tmp_path / "folder"))[0]


def test_a_seed_whose_injections_all_matter_keeps_its_task() -> None:
    """Draw 0 is the task the seed gave before build re-drew (digests of the old build)."""
    for cap, domain, h, d, fmt, seed, digest in (
        ("anomaly_flagging", "apiculture", 3, 3, "json", 101, "0b9667e560a4ca92"),
        ("reconciliation", "apiculture", 3, 3, "csv", 202, "6150532b72c2f5b5"),
    ):
        ns: dict[str, Any] = {"__name__": "generator"}
        exec(render_generator(cap, domain, h, d, fmt), ns)
        task = ns["build"](seed)
        assert task == ns["draw"](seed)
        text = json.dumps(task, sort_keys=True).encode()
        assert hashlib.sha256(text).hexdigest()[:16] == digest, (cap, seed)


def test_build_checks_in_memory_and_leaves_the_globals_clean(tmp_path: Path) -> None:
    """The check reads the draw's files dict (the readers take a folder or a dict alike) and
    writes nothing; the module globals are as a fresh interpreter has them afterwards."""
    code = render_generator("multi_document_merge", "amateur_radio", 3, 3, "json")
    task, ws = built(code, 202, tmp_path)
    ns: dict[str, Any] = {"__name__": "generator"}
    exec(code, ns)
    ns["build"](202)
    state = ("SKIP", "STALE", "LIVE", "PARSED", "ROUNDED")
    assert not any(ns[k] for k in state) and ns["ATTEMPT"] == [0]
    files = dict(task["files"])
    for rel in ("data/index.csv", "reference/unit_conversions.csv"):
        assert ns["read_csv"](files, rel) == ns["read_csv"](str(ws), rel)
    for folder in ("updates", "data/stations", "data"):
        assert ns["ws_list"](files, folder) == ns["ws_list"](str(ws), folder), folder
    ns["solve"](files)  # the oracle, in memory: the answer key, nothing on disk
    assert {k: files[k] for k in task["answer"]} == task["answer"]
    assert not (ws / "output").exists()
    assert not ns["same_value"](1, 1.004, TOL)  # an integer needs a whole number
    assert ns["same_value"]({"a": [1.0, " x", True]}, {"a": [1.009, "x", True]}, TOL)
    assert not ns["same_value"]({"a": True}, {"a": 1}, TOL)


TOL = {"abs": 0.01, "rel": 0.0}


def test_a_redrawn_task_is_the_same_in_two_interpreters(tmp_path: Path) -> None:
    cap, domain, h, d, fmt, seed, _ = INERT_BEFORE[0]
    gen = tmp_path / "generator.py"
    gen.write_text(render_generator(cap, domain, h, d, fmt))
    run = (
        "import json, runpy, sys; ns = runpy.run_path(sys.argv[1]); "
        "print(json.dumps(ns['build'](int(sys.argv[2])), sort_keys=True))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", run, str(gen), str(seed)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hs},
        ).stdout
        for hs in ("1", "4242")
    }
    assert len(outs) == 1


def test_a_latest_value_keeps_a_load_bearing_blank(tmp_path: Path) -> None:
    """Found by the full oracle matrix: for a latest-value measure only an entity's latest rows
    count, and every draw of this seed blanked other rows (blanks inert in all 8 draws). Now an
    in-scope entity's latest rows are blanked when no random blank hit them."""
    code = render_generator("domain_calculation", "herbarium_loans", 3, 3, "json")
    task, ws = built(code, 1015, tmp_path)
    rewards = ablation_rewards(code, task["contract"], task["answer"], ws)
    assert "blanks" in rewards and all(r < 1.0 for r in rewards.values()), rewards


def test_the_legacy_key_rule_names_only_the_keys_v1_documents_use(tmp_path: Path) -> None:
    """Found by the full oracle matrix: no record of this seed's v1 documents carried the
    category, yet the rule listed `class = genus`, a key no file holds (decision_fields)."""
    from clawloop.generators.verify import undefined_decision_fields

    code = render_generator("multi_document_merge", "coral_nursery", 1, 2, "json")
    task, _ = built(code, 1006, tmp_path)
    assert undefined_decision_fields(task["contract"], task["answer"], task["files"]) == []
    rule = next(d for d in task["contract"]["decisions"] if "older key names" in d)
    assert "class = " not in rule and "ref = " in rule
