"""Show the loop closing: iteration 2's synthesis shifts toward what iteration 1 failed most.

A fake policy (tests/doubles/fake_openai.py over real HTTP) solves the tasks of some capabilities by
replaying their reference solution and gets the others wrong (right files, wrong content). The
whole pipeline runs K=2 iterations on the local profile through the engine (flows.runs.run_loop,
the same path as `clawloop run --no-prefect`): synthesize, forge and verify in real sandboxes,
rollout against the fake, train the tiny model, diagnose the held-out episodes. Then it prints

- iteration 1's eval pass rate per capability,
- the capability sampling weights of iteration 1 (uniform, no guidance) and of iteration 2 (from
  iteration 1's guidance.json, over the capabilities this run samples from),
- the train candidates per capability in iterations 1 and 2,
- the report files diagnose wrote (report.md, pass_rates.png, guidance.json, Parquet tables),

and exits 1 unless iteration 2 moved toward the capability that failed most in iteration 1 (its
weight and its share of train candidates both grew).

    .venv/bin/python scripts/loop_demo.py                      # defaults: ~5-10 min on 2 cores
    .venv/bin/python scripts/loop_demo.py --out /tmp/demo --fail anomaly_flagging
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The scripted policy is a test double (tests/doubles/fake_openai.py).
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

import pandas as pd  # noqa: E402
import yaml  # noqa: E402
from doubles.fake_openai import (  # noqa: E402
    FakeOpenAI,
    Router,
    ToolStep,
    first_user_text,
    solution_steps,
    wrong_steps,
)

from clawloop.harness.prompts import task_message  # noqa: E402

SOLVE = ("reconciliation", "time_window_aggregation")
FAIL = ("anomaly_flagging",)
# Failure summaries are not task episodes: the fake answers them in plain text, so diagnose falls
# back to its heuristic summaries (marked fallback in the report), as with a policy that can't say.
NOT_A_TASK_REPLY = "I cannot tell what went wrong."


# ---- the fake policy: which task is this conversation, solve it or spoil it --------------------


@dataclass(frozen=True)
class KnownTask:
    task_id: str
    capability: str
    task_dir: Path


class TaskIndex:
    """Task message -> forged task folder, read from every iteration's forge/tasks.parquet.

    The rollout stage unpacks tasks into its own temp folders; the fake policy finds the same task
    by the text of the first user message (instruction.md as the harness sends it)."""

    def __init__(self, run_dir: Path, cache: Path) -> None:
        self.run_dir = run_dir
        self.cache = cache
        self._by_message: dict[str, KnownTask] = {}
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        from clawloop.harness.taskfolder.packing import unpack_tar

        for parquet in sorted(self.run_dir.glob("iter-*/forge/tasks.parquet")):
            frame = pd.read_parquet(
                parquet, columns=["task_id", "status", "task_tar", "capability"]
            )
            for row in frame[frame["status"] == "ok"].itertuples():
                dest = self.cache / row.task_id
                if not (dest / "instruction.md").is_file():
                    unpack_tar(row.task_tar, dest)
                message = task_message((dest / "instruction.md").read_text())
                self._by_message[message] = KnownTask(row.task_id, row.capability, dest)

    def lookup(self, message: str) -> KnownTask | None:
        with self._lock:
            if message not in self._by_message:
                self._refresh()  # a new iteration's forge has written more tasks
            return self._by_message.get(message)


def capability_router(index: TaskIndex, solve: set[str], seen: dict[str, str]) -> Router:
    """Replay the solution of tasks whose capability is in `solve`; spoil every other task's outputs.

    `seen` records task_id -> "solve" | "fail" for the printout."""

    def route(messages: list[dict[str, Any]]) -> list[ToolStep] | str:
        task = index.lookup(first_user_text(messages))
        if task is None:
            return NOT_A_TASK_REPLY
        decision = "solve" if task.capability in solve else "fail"
        seen[task.task_id] = decision
        return solution_steps(task.task_dir) if decision == "solve" else wrong_steps(task.task_dir)

    return route


# ---- the run config -----------------------------------------------------------------------------


def demo_config(
    root: Path, base_url: str, capabilities: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """The local profile with the fake policy as endpoint, K=2, eval tasks across capabilities."""
    return {
        "profile": "local",
        "seed": args.seed,
        "iterations": 2,
        "storage": {"root": str(root)},
        "sandbox": {"backend": args.backend, "wall_seconds": 60},
        "llm": {"base_url": base_url, "model": "fake-policy", "api_key_env": ""},
        "synthesize": {
            "n_train": args.n_train,
            "n_eval": args.n_eval,
            "eval_fraction": 0.3,
            "capabilities": capabilities,
        },
        # One episode per task is enough for a deterministic policy; the oracle replay needs a
        # turn per solution file, so more turns than the CPU default of 3. Groups of one have no
        # reward spread for GRPO (the config refuses n=1 with it), so train runs SFT alone.
        "rollout": {"n": 1, "band": [1, 1], "workers": 2, "max_turns": 16, "max_tokens": 256},
        "train": {"phases": "sft", "sft_max_steps": 1},
        "diagnose": {"eval_n": 1, "embedder": "hashed", "summary_attempts": 1},
    }


# ---- what the run shows (pure: tables in, figures out) ------------------------------------------


def normalise(weights: dict[str, float], over: list[str]) -> dict[str, float]:
    """Weights restricted to `over` and summed to 1 (how synthesize samples a capability)."""
    raw = {c: max(0.0, float(weights.get(c, 0.0))) for c in over}
    total = sum(raw.values())
    return {c: (w / total if total > 0 else 1.0 / len(over)) for c, w in raw.items()}


@dataclass
class Shift:
    pass_rates: dict[str, float]  # iteration 1 eval pass rate per capability
    worst: str  # the capability with the lowest iteration-1 eval pass rate
    weights_1: dict[str, float]  # sampling weights iteration 1 used (no guidance: uniform)
    weights_2: dict[str, float]  # sampling weights iteration 2 used (guidance.json, renormalised)
    guidance_weights: dict[str, float]  # guidance.json as written (every catalog capability)
    counts_1: dict[str, int]  # train candidates per capability, iteration 1
    counts_2: dict[str, int]

    def share(self, counts: dict[str, int]) -> float:
        total = sum(counts.values())
        return counts.get(self.worst, 0) / total if total else 0.0

    @property
    def shifted(self) -> bool:
        weight_up = self.weights_2[self.worst] > self.weights_1[self.worst]
        share_up = self.share(self.counts_2) > self.share(self.counts_1)
        return weight_up and share_up


def measure_shift(
    rates_1: pd.DataFrame,
    guidance_1: dict[str, Any],
    candidates_1: pd.DataFrame,
    candidates_2: pd.DataFrame,
    capabilities: list[str],
) -> Shift:
    """Compare iteration 2's synthesis with iteration 1's, against iteration 1's worst capability."""
    if rates_1.empty:
        raise ValueError("iteration 1 has no eval pass rates: no eval task was kept by verify")
    rates = {str(r.capability): float(r.pass_rate) for r in rates_1.itertuples()}
    # lowest pass rate; more episodes first on a tie (more evidence), then by name
    n_eps = {str(r.capability): int(r.n_episodes) for r in rates_1.itertuples()}
    worst = min(rates, key=lambda c: (rates[c], -n_eps[c], c))

    def counts(frame: pd.DataFrame) -> dict[str, int]:
        got = Counter(frame.loc[frame["split"] == "train", "capability"])
        return {c: int(got.get(c, 0)) for c in capabilities}

    return Shift(
        pass_rates=rates,
        worst=worst,
        weights_1=normalise({c: 1.0 for c in capabilities}, capabilities),
        weights_2=normalise(guidance_1["capability_weights"], capabilities),
        guidance_weights={k: float(v) for k, v in guidance_1["capability_weights"].items()},
        counts_1=counts(candidates_1),
        counts_2=counts(candidates_2),
    )


def render(shift: Shift, capabilities: list[str], decisions: dict[str, str]) -> str:
    lines = ["", "== iteration 1: held-out eval pass rate per capability =="]
    for c in capabilities:
        rate = shift.pass_rates.get(c)
        policy = decisions.get(c, "?")
        lines.append(
            f"  {c:28s} {'-' if rate is None else f'{rate:.2f}':>5s}   (fake policy: {policy})"
        )
    lines.append(f"  failed most: {shift.worst}")
    lines += [
        "",
        "== capability sampling weights (train synthesis) ==",
        "  " + " " * 28 + "  iter 1  iter 2",
    ]
    for c in capabilities:
        lines.append(f"  {c:28s}  {shift.weights_1[c]:6.3f}  {shift.weights_2[c]:6.3f}")
    lines.append(
        "  iter 1: no guidance (uniform); iter 2: iteration 1's guidance.json over these capabilities"
    )
    lines.append(
        "  guidance.json as written (every catalog capability; unseen ones at the unseen rate):"
    )
    for c, w in sorted(shift.guidance_weights.items(), key=lambda kv: -kv[1]):
        lines.append(f"    {c:28s} {w:.3f}")
    lines += ["", "== train candidates per capability ==", "  " + " " * 28 + "  iter 1  iter 2"]
    for c in capabilities:
        lines.append(f"  {c:28s}  {shift.counts_1[c]:6d}  {shift.counts_2[c]:6d}")
    lines.append(
        f"  share of {shift.worst}: {shift.share(shift.counts_1):.2f} -> {shift.share(shift.counts_2):.2f}"
    )
    return "\n".join(lines)


# ---- the run ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="folder for the config and runs/ (default: a temp dir)")
    p.add_argument("--run-id", default="loop-demo")
    p.add_argument("--solve", nargs="+", default=list(SOLVE), help="capabilities the fake solves")
    p.add_argument("--fail", nargs="+", default=list(FAIL), help="capabilities it gets wrong")
    p.add_argument("--n-train", type=int, default=9, help="train candidates per iteration")
    p.add_argument("--n-eval", type=int, default=6, help="held-out eval candidates per iteration")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="auto", choices=["auto", "docker", "bwrap"])
    args = p.parse_args(argv)

    from clawloop.flows import runs
    from clawloop.flows.pipeline import STAGES
    from clawloop.storage.artifacts import read_table
    from clawloop.tasks.config import load_config
    from clawloop.tasks.mapping import thread_mapper

    capabilities = sorted(set(args.solve) | set(args.fail))
    if set(args.solve) & set(args.fail):
        p.error(
            f"a capability cannot be both solved and failed: {set(args.solve) & set(args.fail)}"
        )
    out = args.out or Path(tempfile.mkdtemp(prefix="clawloop-loop-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    root = (out / "runs").resolve()
    run_dir = root / args.run_id
    decisions = {c: "solve" if c in args.solve else "fail (wrong answers)" for c in capabilities}
    seen: dict[str, str] = {}
    index = TaskIndex(run_dir, out / "fake-policy-tasks")
    router = capability_router(index, set(args.solve), seen)

    t0 = time.time()
    with FakeOpenAI("routed", router=router, text_tool_calls=True) as fake:  # trainable text
        config_path = out / "loop-demo.yaml"
        config_path.write_text(
            yaml.safe_dump(demo_config(root, fake.base_url, capabilities, args), sort_keys=False)
        )
        print(f"config: {config_path}  (fake policy at {fake.base_url})", flush=True)
        cfg = load_config(config_path)
        summary = runs.run_loop(
            cfg,
            args.run_id,
            STAGES,
            thread_mapper(progress=False),
            on_outcome=lambda o: print(
                f"  iter {o.iteration} {o.stage:10s} {o.status:7s} {o.duration_s:6.1f}s  "
                + ", ".join(f"{n.removesuffix('.parquet')}={r}" for n, r in o.rows.items()),
                flush=True,
            ),
        )
        n_requests = len(fake.requests)
    for o in summary.outcomes:
        if o.error:
            print(f"{o.stage} iteration {o.iteration} failed:\n{o.error}", file=sys.stderr)
    if not summary.ok or len({o.iteration for o in summary.outcomes}) < 2:
        print("the loop did not finish both iterations: no shift to measure", file=sys.stderr)
        return 2

    diag_1 = run_dir / "iter-1" / "diagnose"
    shift = measure_shift(
        read_table(str(diag_1), "pass_rates"),
        json.loads((diag_1 / "guidance.json").read_text()),
        read_table(str(run_dir / "iter-1" / "synthesize"), "candidates"),
        read_table(str(run_dir / "iter-2" / "synthesize"), "candidates"),
        capabilities,
    )
    print(render(shift, capabilities, decisions))
    print(
        f"\nfake policy: {n_requests} chat requests, {sum(v == 'solve' for v in seen.values())} tasks solved, "
        f"{sum(v == 'fail' for v in seen.values())} spoiled; loop {time.time() - t0:.0f}s"
    )
    print("\n== report files diagnose wrote ==")
    for k in (1, 2):
        d = run_dir / f"iter-{k}" / "diagnose"
        for f in sorted(d.iterdir()):
            if f.is_file() and f.name != "manifest.json":
                print(f"  {f}  ({f.stat().st_size} bytes)")
    if not shift.shifted:
        print(f"\nNOT SHIFTED: iteration 2 did not move toward {shift.worst}", file=sys.stderr)
        return 1
    print(
        f"\nSHIFTED: {shift.worst} weight {shift.weights_1[shift.worst]:.3f} -> {shift.weights_2[shift.worst]:.3f}, "
        f"train share {shift.share(shift.counts_1):.2f} -> {shift.share(shift.counts_2):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
