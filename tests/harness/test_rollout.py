"""The rollout stage: N graded fresh-sandbox episodes per task, the band filter, pass rates, CLI."""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from doubles.fake_openai import FakeOpenAI, ToolStep

from clawloop.harness.rollout import (
    PolicyConfig,
    RolloutConfig,
    band_filter,
    pass_rates,
    rollout_stage,
    rollout_task,
    write_rollout_tables,
)
from clawloop.harness.sandbox.base import SandboxConfig

TASK = Path(__file__).parents[1] / "fixtures" / "tasks" / "hive_totals"
BWRAP = SandboxConfig(backend="bwrap")
ROW = {"task_id": "hive", "capability": "aggregation", "split": "train"}
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def _rows(task_id: str, passed: list[bool], end: str = "finished", cap: str = "c") -> list[dict]:
    return [
        {"task_id": task_id, "capability": cap, "passed": p, "reward": float(p), "end_reason": end}
        for p in passed
    ]


# -- band filter and pass rates (pure) ---------------------------------------------------------
@pytest.mark.parametrize(
    "passes,kept,why",
    [
        (0, False, "too hard"),
        (1, True, "in band"),
        (5, True, "in band"),
        (6, False, "too easy"),
        (8, False, "too easy"),
    ],
)
def test_band_filter_keeps_sometimes_solved_tasks(passes, kept, why):
    rows = _rows("t", [True] * passes + [False] * (8 - passes))
    [b] = band_filter(rows, n=8, lo=1, hi=5)
    assert (b["kept"], b["passes"], b["n"]) == (kept, passes, 8)
    assert b["reason"].startswith(why)


def test_band_filter_counts_passes_not_the_fraction_of_checks():
    # 0.9 of the checks passed is still a failed task: no passes, too hard
    rows = [
        {
            "task_id": "t",
            "capability": "c",
            "passed": False,
            "reward": 0.9,
            "end_reason": "finished",
        }
        for _ in range(4)
    ]
    [b] = band_filter(rows, n=4, lo=1, hi=3)
    assert (b["kept"], b["passes"]) == (False, 0) and b["reason"].startswith("too hard")
    rows[0].update(passed=True, reward=1.0)
    [b] = band_filter(rows, n=4, lo=1, hi=3)
    assert (b["kept"], b["passes"]) == (True, 1)


def test_band_filter_drops_short_groups_and_infra_failures():
    rows = _rows("short", [True, False]) + _rows("infra", [True, False, False], end="server_error")
    bands = {b["task_id"]: b for b in band_filter(rows, n=3, lo=1, hi=2)}
    assert not bands["short"]["kept"] and "2 episodes recorded" in bands["short"]["reason"]
    assert not bands["infra"]["kept"] and "server/sandbox errors" in bands["infra"]["reason"]


def test_band_filter_rejects_an_impossible_band():
    with pytest.raises(ValueError):
        band_filter([], n=4, lo=3, hi=2)


def test_pass_rates_per_capability():
    rows = (
        _rows("a", [True, False], cap="x")
        + _rows("b", [True, True], cap="x")
        + _rows("c", [False, False], cap="y")
    )
    band = band_filter(rows, n=2, lo=1, hi=1)
    rates = {r["capability"]: r for r in pass_rates(rows, band)}
    assert (
        rates["x"]["pass_rate"] == 0.75
        and rates["x"]["tasks"] == 2
        and rates["x"]["kept_tasks"] == 1
    )
    assert rates["y"]["pass_rate"] == 0.0 and rates["y"]["episodes"] == 2


def test_pass_rates_leave_out_infrastructure_failures():
    rows = (
        _rows("a", [True, False], cap="x")
        + _rows("a", [False], end="sandbox_error", cap="x")
        + _rows("b", [False, False], end="server_error", cap="y")
    )
    rates = {r["capability"]: r for r in pass_rates(rows, band_filter(rows, n=3, lo=1, hi=2))}
    assert (rates["x"]["episodes"], rates["x"]["passes"], rates["x"]["pass_rate"]) == (2, 1, 0.5)
    assert rates["y"]["episodes"] == 0 and math.isnan(rates["y"]["pass_rate"])


def test_task_row_and_timeouts_come_from_task_toml(tmp_path):
    from clawloop.harness.rollout import task_row_from_folder
    from clawloop.harness.taskenv import task_timeouts

    assert task_row_from_folder(TASK)["task_id"] and task_timeouts(TASK)[1] > 0
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "task.toml").write_text(
        '[task]\nname = "p1"\n[metadata]\ncategory = "audit"\n'
        "[agent]\ntimeout_sec = 30\n[verifier]\ntimeout_sec = 12.5\n"
    )
    assert task_row_from_folder(plain) == {"task_id": "p1", "capability": "audit", "split": "train"}
    assert task_timeouts(plain) == (30.0, 12.5)
    bare = tmp_path / "bare"
    bare.mkdir()
    assert task_row_from_folder(bare) == {"task_id": "bare", "capability": "", "split": "train"}
    assert task_timeouts(bare) == (600.0, 120.0)


def test_rollout_config_is_the_run_yaml_section_with_the_library_defaults():
    # band and workers are the fields (the run YAML's spelling); the harness reads them derived
    cfg = RolloutConfig(n=4, band=[1, 3], workers=2, max_turns=9)
    assert (cfg.n, cfg.band_lo, cfg.band_hi, cfg.concurrency, cfg.max_turns) == (4, 1, 3, 2, 9)
    assert cfg.band == (1, 3)  # a list reads as the tuple, so equal configs compare equal
    lib = RolloutConfig()  # the library's (the paper's) defaults, not the CPU demo's
    assert (lib.n, lib.band, lib.workers, lib.max_turns, lib.max_tokens) == (8, (1, 5), 4, 30, 1024)
    with pytest.raises(ValueError, match="bnad"):  # pydantic: an unknown setting is a field error
        RolloutConfig(bnad=(1, 2))
    with pytest.raises(ValueError, match=r"band \[3, 1\]: need 0 <= low <= high"):
        RolloutConfig(band=(3, 1))
    with pytest.raises(ValueError, match="RolloutConfig.workers must be >= 1"):
        RolloutConfig(workers=0)


# -- through the real verifier and real sandboxes ----------------------------------------------
@needs_bwrap
def test_oracle_rollout_all_pass_and_wrong_rollout_all_fail(tmp_path):
    with FakeOpenAI("oracle", TASK, vllm_tokens=True) as fake:
        good = rollout_task(TASK, ROW, PolicyConfig(fake.base_url, "fake"), 4, BWRAP, 2)
    with FakeOpenAI("wrong", TASK) as fake:
        bad = rollout_task(TASK, ROW, PolicyConfig(fake.base_url, "fake"), 4, BWRAP, 2)
    assert [r["attempt"] for r in good] == [0, 1, 2, 3]
    assert all(r["passed"] and r["reward"] == 1.0 and r["end_reason"] == "finished" for r in good)
    assert not any(r["passed"] for r in bad) and all(r["reward"] == 0.0 for r in bad)
    assert len({r["episode_id"] for r in good}) == 4
    turns = json.loads(good[0]["turns_json"])
    assert turns and all(t["completion_token_ids"] and not t["needs_retokenize"] for t in turns)
    checks = json.loads(bad[0]["checks_json"])
    assert checks["checks"] and not checks["checks"][0]["passed"]
    paths = write_rollout_tables(tmp_path, good + bad, band_filter(good + bad, 8, 1, 5))
    table = pq.read_table(paths["trajectories"])
    assert table.num_rows == 8
    [band] = pq.read_table(paths["band"]).to_pylist()
    assert band["passes"] == 4 and band["kept"]


@needs_bwrap
@pytest.mark.parametrize("capability", ["reconciliation", "cross_source_audit"])
def test_oracle_passes_and_wrong_fails_on_a_forged_builtin_task(tmp_path, capability):
    from clawloop.generators.forge import forge_to_folder
    from clawloop.synthesis.library import domains, render_generator

    task = tmp_path / capability
    code = render_generator(capability, domains()[0])
    forged = forge_to_folder(code, 3, task, BWRAP)
    assert forged["status"] == "ok", forged["error"]
    row = {"task_id": forged["task_id"], "capability": capability, "split": "train"}
    with FakeOpenAI("oracle", task) as fake:
        good = rollout_task(task, row, PolicyConfig(fake.base_url, "fake"), 2, BWRAP, 2)
    with FakeOpenAI("wrong", task) as fake:
        bad = rollout_task(task, row, PolicyConfig(fake.base_url, "fake"), 2, BWRAP, 2)
    assert all(r["passed"] and r["end_reason"] == "finished" for r in good), good[0]["checks_json"]
    assert all(not r["passed"] and r["reward"] < 1.0 for r in bad)


@needs_bwrap
@pytest.mark.parametrize(
    "mode,end_reason,cfg",
    [
        ("malformed", "max_turns", RolloutConfig(max_turns=3)),
        ("stall", "timeout", RolloutConfig(episode_timeout_s=1.0)),
        ("drop", "server_error", RolloutConfig()),
    ],
)
def test_faulty_servers_lose_no_episode(mode, end_reason, cfg):
    with FakeOpenAI(mode, stall_s=20) as fake:
        rows = rollout_task(
            TASK, ROW, PolicyConfig(fake.base_url, "fake", max_retries=0), 3, BWRAP, 3, cfg
        )
    assert len(rows) == 3 and sorted(r["attempt"] for r in rows) == [0, 1, 2]
    assert all(r["end_reason"] == end_reason and not r["passed"] for r in rows)
    assert all(json.loads(r["messages_json"])[1]["role"] == "user" for r in rows)
    if end_reason != "max_turns":
        assert all(r["error"] for r in rows)


@needs_bwrap
def test_a_broken_task_folder_is_a_row_not_a_crash(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    tasks = [(TASK, ROW), (broken, {"task_id": "broken", "capability": "c"})]
    with FakeOpenAI("oracle", TASK) as fake:
        traj, band, _ = rollout_stage(
            tasks, PolicyConfig(fake.base_url, "fake"), RolloutConfig(n=1, band=(1, 1)), BWRAP
        )
    by_task = {r["task_id"]: r for r in traj}
    assert by_task["hive"]["passed"]
    assert by_task["broken"]["end_reason"] == "harness_error"
    assert "instruction.md" in by_task["broken"]["error"]
    assert not {b["task_id"]: b for b in band}["broken"]["kept"]


@needs_bwrap
def test_stage_bounds_concurrency_and_reports_per_capability(tmp_path):
    second = tmp_path / "hive_copy"
    shutil.copytree(TASK, second)
    tasks = [(TASK, ROW), (second, {"task_id": "copy", "capability": "merge", "split": "train"})]
    cfg = RolloutConfig(n=2, band=(1, 1), workers=2)
    with FakeOpenAI("oracle", TASK) as fake:
        traj, band, rates = rollout_stage(tasks, PolicyConfig(fake.base_url, "fake"), cfg, BWRAP)
    assert [(r["task_id"], r["attempt"]) for r in traj] == [
        ("hive", 0),
        ("hive", 1),
        ("copy", 0),
        ("copy", 1),
    ]
    assert {b["task_id"]: b["reason"].split(":")[0] for b in band} == {
        "hive": "too easy",
        "copy": "too easy",
    }
    assert {r["capability"]: r["pass_rate"] for r in rates} == {"aggregation": 1.0, "merge": 1.0}
    assert 1 <= fake.max_in_flight <= 2


@needs_bwrap
def test_cli_json_reports_passes_and_never_writes_the_api_key(tmp_path, monkeypatch, capsys):
    from clawloop.flows.cli import rollout as cli

    monkeypatch.setenv("CLAWLOOP_TEST_API_KEY", "sk-do-not-store-3141")
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    with FakeOpenAI("oracle", TASK) as fake:
        args = parser.parse_args(
            [
                "rollout",
                str(TASK),
                "--base-url",
                fake.base_url,
                "--model",
                "fake",
                "-n",
                "2",
                "--backend",
                "bwrap",
                "--api-key-env",
                "CLAWLOOP_TEST_API_KEY",
                "--out",
                str(tmp_path),
                "--json",
            ]
        )
        assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passes"] == 2 and out["rewards"] == [1.0, 1.0]
    rows = pq.read_table(out["trajectories"]).to_pylist()
    assert {(r["task_id"], r["capability"]) for r in rows} == {
        ("fixture-hive-totals", "aggregation")
    }
    assert out["errors"] == ["", ""]
    for f in tmp_path.iterdir():
        assert b"sk-do-not-store-3141" not in f.read_bytes()


def test_cli_refuses_a_folder_that_is_not_a_task(tmp_path, capsys):
    from clawloop.flows.cli import rollout as cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(
        ["rollout", str(tmp_path), "--base-url", "http://x/v1", "--model", "m"]
    )
    assert args.func(args) == 2
    assert "not a task folder" in capsys.readouterr().err


# -- a real local model server (slow) -----------------------------------------------------------
@needs_bwrap
@pytest.mark.slow
def test_rollout_against_transformers_serve_on_the_tiny_model(tmp_path):
    from clawloop.harness.llm import LLMEndpoint, chat, chat_token_counter, make_client
    from clawloop.harness.prompts import initial_messages
    from clawloop.harness.serve import local_policy_server
    from clawloop.harness.tools import TOOLS
    from clawloop.training.tiny_model import ensure_tiny_model

    model_dir = ensure_tiny_model(tmp_path / "models")
    cfg = RolloutConfig(n=3, max_turns=2, max_tokens=32, context_len=8192, episode_timeout_s=120)
    policy_kw = {"model": str(model_dir), "tokenizer": str(model_dir)}
    # transformers serve on purpose (the local profile serves harness/local_server.py, tested in
    # test_local_server.py): the path of a server without token ids.
    with local_policy_server(model_dir, server="transformers") as base_url:
        rows = rollout_task(TASK, ROW, PolicyConfig(base_url, **policy_kw), 3, BWRAP, 1, cfg)
        # The exact budget counter agrees with the server's own prompt count.
        messages = initial_messages((TASK / "instruction.md").read_text())
        reply = chat(
            make_client(LLMEndpoint(base_url, str(model_dir))),
            str(model_dir),
            messages,
            tools=TOOLS,
            max_tokens=4,
        )
    assert reply.prompt_tokens == chat_token_counter(model_dir, TOOLS)(messages)
    assert len(rows) == 3
    # The tiny model has no skill: what matters is the plumbing — replies arrive and are recorded.
    # transformers serve answers 500 when the random model opens a <tool_call> with non-JSON in
    # it (its response parser raises); that is recorded as a server_error, as it should be.
    for r in rows:
        if r["end_reason"] == "server_error":
            assert "answered 500" in r["error"], r["error"]
        else:
            assert r["end_reason"] in ("max_turns", "finished"), r["error"]
    turns = [t for r in rows for t in json.loads(r["turns_json"])]
    assert turns and all(t["needs_retokenize"] and t["latency_s"] > 0 for t in turns)


@pytest.mark.docker
def test_oracle_and_wrong_rollouts_in_docker_sandboxes():
    from clawloop.harness.sandbox.backend import docker_available

    why = docker_available()
    if why is not None:
        pytest.skip(f"docker not usable: {why}")
    docker = SandboxConfig(backend="docker")
    with FakeOpenAI("oracle", TASK) as fake:
        good = rollout_task(TASK, ROW, PolicyConfig(fake.base_url, "fake"), 2, docker, 2)
    with FakeOpenAI("wrong", TASK) as fake:
        bad = rollout_task(TASK, ROW, PolicyConfig(fake.base_url, "fake"), 2, docker, 2)
    assert all(r["passed"] for r in good), good[0]["error"]
    assert not any(r["passed"] for r in bad)


@pytest.mark.docker
def test_sandbox_that_cannot_start_is_recorded_not_raised():
    from clawloop.harness.sandbox.backend import docker_available

    why = docker_available()
    if why is not None:
        pytest.skip(f"docker not usable: {why}")
    broken = SandboxConfig(backend="docker", image="clawloop-no-such-image:never")
    with FakeOpenAI("oracle", TASK) as fake:
        rows = rollout_task(TASK, ROW, PolicyConfig(fake.base_url, "fake"), 2, broken, 2)
        assert not fake.requests  # no episode began
    assert [r["end_reason"] for r in rows] == ["sandbox_error", "sandbox_error"]
    assert all("sandbox failed" in r["error"] and not r["passed"] for r in rows)
    [band] = band_filter(rows, n=2, lo=1, hi=1)
    assert not band["kept"] and "server/sandbox errors" in band["reason"]


# -- an agent that tries to grade itself -------------------------------------------------------
# Plants a passing reward.json in a read-only /logs/verifier and leaves a detached loop that keeps
# rewriting it (and the verifier in /tests) for the grader to find.
FAKE_REWARD = r"""
echo '{"reward": 1.0}' > /tmp/r
w() {
    chmod u+w /logs/verifier /tests 2>/dev/null
    cp /tmp/r /logs/verifier/reward.json
    echo 'cp /tmp/r /logs/verifier/reward.json' > /tests/test.sh
    chmod 555 /logs/verifier
}
w
(setsid bash -c "$(declare -f w); while :; do w; sleep 0.005; done" >/dev/null 2>&1 &)
sleep 0.1
cat /logs/verifier/reward.json
"""


def test_a_sandbox_whose_strays_survive_is_not_graded(tmp_path):
    from clawloop.harness.sandbox.base import ExecResult, Sandbox
    from clawloop.harness.taskenv import run_tests

    class Stuck(Sandbox):
        backend = "stuck"

        def __init__(self) -> None:
            self.ran: list = []

        def start(self) -> None: ...

        def stop(self) -> None: ...

        def exec(self, cmd, timeout=None, cwd="/workspace", env=None) -> ExecResult:
            self.ran.append(cmd)
            return ExecResult(0, "", "", 0.0)

        def upload(self, local, remote) -> None:
            self.ran.append(("upload", remote))

        def download(self, remote, local) -> None:
            raise FileNotFoundError(remote)

        def kill_strays(self) -> bool:
            return False

    box = Stuck()
    grade = run_tests(box, TASK)
    assert not grade.passed and grade.reward == 0.0 and "could not be killed" in grade.reason
    assert box.ran == []  # neither the verifier nor the answer key went in


def _self_grading_rollout(sandbox: SandboxConfig) -> dict:
    with FakeOpenAI("script", script=[ToolStep("run_shell", {"command": FAKE_REWARD})]) as fake:
        [row] = rollout_task(TASK, ROW, PolicyConfig(fake.base_url, "fake"), 1, sandbox, 1)
    return row


def _assert_honest(row: dict) -> None:
    assert row["end_reason"] == "finished", row["error"]
    planted = json.loads(row["messages_json"])[3]["content"]
    assert '"reward": 1.0' in planted, planted  # the fake reward was in place
    assert not row["passed"] and row["reward"] == 0.0, row["checks_json"]
    checks = json.loads(row["checks_json"])
    assert checks["checks"] and not checks["checks"][0]["passed"]  # the real grader ran


@needs_bwrap
def test_an_agent_cannot_fake_its_reward_in_bwrap():
    _assert_honest(_self_grading_rollout(BWRAP))


@pytest.mark.docker
def test_an_agent_cannot_fake_its_reward_in_docker():
    from clawloop.harness.sandbox.backend import docker_available

    why = docker_available()
    if why is not None:
        pytest.skip(f"docker not usable: {why}")
    _assert_honest(_self_grading_rollout(SandboxConfig(backend="docker")))
