"""Rollout harness overhead, measured against raw sandbox exec in the same invocation.

    .venv/bin/python benchmarks/rollout_overhead.py [--backend bwrap] [--calls 40] [--episodes 8]

Prints:
1. per tool call: `call_tool(run_shell)` vs a raw `sb.exec` of the same command in the same sandbox,
   paired samples (the tool layer's overhead; target <= 1.3x);
2. per tool call inside a whole agent episode against the fake OpenAI server: with the model's
   HTTP round trip subtracted (the harness's own overhead per call: loop, tool, records; target
   <= 1.3x), and with it included;
3. episodes/min of the fake-server oracle on the fixture task at concurrency 1, 2, 4 (fresh
   sandbox + verifier per episode), with no model latency and with 50 ms per reply.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the fake server

from doubles.fake_openai import FakeOpenAI, ToolStep

from clawloop.harness.agent import run_episode
from clawloop.harness.llm import LLMEndpoint, make_client
from clawloop.harness.rollout import PolicyConfig, RolloutConfig, rollout_task
from clawloop.harness.sandbox.backend import open_sandbox
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.tools import call_tool

TASK = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tasks" / "hive_totals"
COMMAND = "wc -l harvest.csv"


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def tool_overhead(sandbox: SandboxConfig, calls: int) -> None:
    from clawloop.harness.taskenv import load_workspace

    with open_sandbox(sandbox) as sb:
        load_workspace(sb, TASK)
        for _ in range(3):  # warm caches
            sb.exec(COMMAND, timeout=30)
        # Paired, interleaved samples: load drift on a shared machine hits both sides alike.
        raw_t, tool_t = [], []
        for _ in range(calls):
            raw_t.append(_time(lambda: sb.exec(COMMAND, timeout=60)))
            tool_t.append(_time(lambda: call_tool(sb, "run_shell", {"command": COMMAND})))
        raw, tool = statistics.median(raw_t), statistics.median(tool_t)
        print(f"raw sandbox exec          : {raw * 1000:8.2f} ms/call (median of {calls})")
        print(f"tool call (run_shell)     : {tool * 1000:8.2f} ms/call  ratio {tool / raw:.2f}x")

        script = [ToolStep("run_shell", {"command": COMMAND})] * calls
        with FakeOpenAI("script", script=script) as fake:
            client = make_client(LLMEndpoint(fake.base_url, "fake", max_retries=0))
            cfg = RolloutConfig(max_turns=calls + 2, episode_timeout_s=600).agent_config(
                want_token_ids=False
            )
            t = time.perf_counter()
            ep = run_episode(sb, "Count the rows of harvest.csv.", client, "fake", cfg)
            total = time.perf_counter() - t
        model = sum(turn["latency_s"] for turn in ep.turns)
        per_step = total / ep.n_tool_calls
        harness = (total - model) / ep.n_tool_calls
        print(
            f"agent step minus model    : {harness * 1000:8.2f} ms/call  ratio {harness / raw:.2f}x"
            "  (loop + tool + records; the harness's own overhead)"
        )
        print(
            f"agent step incl. model    : {per_step * 1000:8.2f} ms/call  ratio {per_step / raw:.2f}x"
            f"  (fake-server HTTP round trip {model / len(ep.turns) * 1000:.2f} ms; "
            f"end={ep.end_reason})"
        )


def episodes_per_min(sandbox: SandboxConfig, episodes: int, latency_s: float) -> None:
    for conc in (1, 2, 4):
        with FakeOpenAI("oracle", TASK, latency_s=latency_s) as fake:
            policy = PolicyConfig(fake.base_url, "fake")
            t = time.perf_counter()
            rows = rollout_task(
                TASK,
                {"task_id": "bench"},
                policy,
                episodes,
                sandbox,
                conc,
                RolloutConfig(band=(0, episodes)),
            )
            dt = time.perf_counter() - t
        passed = sum(r["passed"] for r in rows)
        print(
            f"concurrency {conc}, model latency {latency_s * 1000:3.0f} ms: "
            f"{episodes / dt * 60:7.1f} episodes/min  ({passed}/{episodes} passed, {dt:.1f}s)"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="bwrap", choices=["bwrap", "docker", "auto"])
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--episodes", type=int, default=8)
    args = p.parse_args()
    sandbox = SandboxConfig(backend=args.backend)
    print(f"backend: {args.backend}")
    tool_overhead(sandbox, args.calls)
    for latency in (0.0, 0.05):
        episodes_per_min(sandbox, args.episodes, latency)


if __name__ == "__main__":
    main()
