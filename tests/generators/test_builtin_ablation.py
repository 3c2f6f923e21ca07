"""Load-bearing difficulty (issue 10 item 10): built-in generators declare each injected
difficulty and solve(workspace, skip=NAME) ignores one; verify's ablation check runs the
reference with each skipped and requires the answer to change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clawloop.generators import catalog
from clawloop.generators.contract import validate_build
from clawloop.generators.library import render_generator
from clawloop.generators.verify import ablation_rewards, builtin_source, check_ablation


def built(code: str, seed: int, tmp: Path) -> tuple[dict[str, Any], Path]:
    ns: dict[str, Any] = {"__name__": "generator"}
    exec(compile(code, "generator.py", "exec"), ns)
    task = validate_build(ns["build"](seed)).to_dict()
    ws = tmp / "environment" / "workspace"
    for rel, text in task["files"].items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return task, ws


def task_folder(code: str, seed: int, tmp: Path) -> Path:
    """The parts of a forged task folder the ablation check reads."""
    task, _ = built(code, seed, tmp)
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
    # The check on a real built-in whose dropped rows happen not to hold the peaks.
    for seed in range(1000, 1040):
        code = render_generator("cross_source_audit", "trail_maintenance", 1, 3, "json")
        folder = task_folder(code, seed, tmp_path / str(seed))
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
