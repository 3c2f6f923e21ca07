"""The loop demo (scripts/loop_demo.py): a fake policy that solves some capabilities and fails one
steers iteration 2's synthesis toward the failed one. The end-to-end run is slow (real sandboxes,
tiny-model training); the routed fake and the shift measurement are checked fast."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from doubles.fake_openai import FakeOpenAI, ToolStep, first_user_text

ROOT = Path(__file__).resolve().parents[2]


def _demo():
    spec = importlib.util.spec_from_file_location("loop_demo", ROOT / "scripts" / "loop_demo.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["loop_demo"] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_routed_fake_answers_each_conversation_from_its_own_task_text():
    scripts = {"task A": [ToolStep("run_shell", {"command": "echo a"})]}

    def route(messages):
        return scripts.get(first_user_text(messages), "not a task")

    with FakeOpenAI("routed", router=route) as fake:
        first = _post(fake.base_url, {"messages": [{"role": "user", "content": "task A"}]})
        call = first["choices"][0]["message"]["tool_calls"][0]["function"]
        assert (call["name"], json.loads(call["arguments"])) == ("run_shell", {"command": "echo a"})
        done = _post(
            fake.base_url,
            {
                "messages": [
                    {"role": "user", "content": "task A"},
                    {"role": "assistant", "content": ""},
                ]
            },
        )
        assert done["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "finish"
        other = _post(fake.base_url, {"messages": [{"role": "user", "content": "summarise"}]})
        assert other["choices"][0]["message"]["content"] == "not a task"
        assert "tool_calls" not in other["choices"][0]["message"]
    with pytest.raises(ValueError, match="router"):
        FakeOpenAI("routed")


def test_measure_shift_names_the_worst_capability_and_compares_iterations():
    demo = _demo()
    caps = ["a", "b", "c"]
    rates = pd.DataFrame(
        {"capability": caps, "pass_rate": [1.0, 0.0, 0.5], "n_episodes": [2, 2, 2]}
    )
    guidance = {"capability_weights": {"a": 0.05, "b": 0.6, "c": 0.3, "unsampled": 0.05}}
    cands_1 = pd.DataFrame({"capability": ["a", "b", "c", "a"], "split": ["train"] * 4})
    cands_2 = pd.DataFrame(
        {"capability": ["b", "b", "c", "a", "b"], "split": ["train"] * 4 + ["eval"]}
    )
    shift = demo.measure_shift(rates, guidance, cands_1, cands_2, caps)
    assert shift.worst == "b"
    assert shift.weights_1 == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert shift.weights_2 == pytest.approx({"a": 0.05 / 0.95, "b": 0.6 / 0.95, "c": 0.3 / 0.95})
    assert shift.counts_1 == {"a": 2, "b": 1, "c": 1}
    assert shift.counts_2 == {"a": 1, "b": 2, "c": 1}  # the eval row does not count
    assert shift.shifted
    # same weights but fewer candidates of the worst capability: not a shift
    cands_2b = pd.DataFrame({"capability": ["a", "a", "c", "b"], "split": ["train"] * 4})
    assert not demo.measure_shift(rates, guidance, cands_1, cands_2b, caps).shifted


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for the sandboxes")
def test_iteration_two_shifts_toward_the_capability_that_failed(tmp_path, capsys):
    demo = _demo()
    code = demo.main(
        ["--out", str(tmp_path), "--backend", "bwrap", "--n-train", "6", "--n-eval", "6"]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    run = tmp_path / "runs" / "loop-demo"
    rates = pd.read_parquet(run / "iter-1" / "diagnose" / "pass_rates.parquet")
    by_cap = dict(zip(rates["capability"], rates["pass_rate"], strict=True))
    assert by_cap["anomaly_flagging"] == 0.0  # the fake spoils it
    assert all(by_cap[c] == 1.0 for c in demo.SOLVE if c in by_cap)  # and replays the others
    guidance = json.loads((run / "iter-1" / "diagnose" / "guidance.json").read_text())
    weights = guidance["capability_weights"]
    assert weights["anomaly_flagging"] > max(weights[c] for c in demo.SOLVE)

    def share(k: int) -> float:
        c = pd.read_parquet(run / f"iter-{k}" / "synthesize" / "candidates.parquet")
        train = c[c["split"] == "train"]
        return float((train["capability"] == "anomaly_flagging").mean())

    assert share(2) > share(1)
    for name in ("report.md", "pass_rates.png", "guidance.json"):
        assert (run / "iter-1" / "diagnose" / name).stat().st_size > 0
    assert "SHIFTED: anomaly_flagging" in printed
