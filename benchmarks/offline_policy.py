"""Pass counts of a real offline model as the agent's policy, with what its replies looked like.

    nice -n 10 .venv/bin/python benchmarks/offline_policy.py --model-dir M (or --base-url U --model N)
        [--tasks DIR ...] [-n 4] [--max-turns 4] [--max-tokens 192] [--request-timeout 900]
        [--json OUT.json]

Runs `-n` episodes of each task folder (default: the echo fixture, write {"word": "violet"} to
output/answer.json) through the real rollout path (sandbox, agent loop, the task's own verifier)
and prints per task: passes, end reasons, turns and seconds per turn, the forms the replies wrote
their tool calls in (hermes | fenced | bare), calls read as Python literals, replies the agent
answered with a parse error or with "No tool call found", and the first reply of each episode.

It uses only the rollout API that main also has, so the same script measures the parser before
and after a change: run it with PYTHONPATH at a checkout of each (the `.shim` of a worktree).
`--model-dir` serves a model folder (or a .gguf file, converted once and cached) with the local
server for the run; `--base-url/--model` use a server already up (one model load for many runs).
Figures measured here (2 shared cores): docs/environment.md, "Real pretrained models on PyPI".
Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ECHO_TASK = ROOT / "tests" / "fixtures" / "tasks" / "echo_violet"


def episode_summary(row: dict[str, Any]) -> dict[str, Any]:
    """What one trajectory row says about how the model wrote its calls (pure)."""
    turns = json.loads(row["turns_json"])
    messages = json.loads(row["messages_json"])
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"][1:]
    forms = sorted({f for t in turns for f in t.get("tool_call_forms") or []})
    if any(t.get("tool_calls_native") for t in turns):
        forms.append("native")
    return {
        "passed": bool(row["passed"]),
        "reward": row["reward"],
        "end_reason": row["end_reason"],
        "turns": len(turns),
        "latency_s": [t.get("latency_s") for t in turns],
        "forms": forms,
        "repaired": sum(int(t.get("tool_calls_repaired") or 0) for t in turns),
        "parse_errors": sum(u.startswith("error:") for u in users),
        "no_call": sum(u.startswith("No tool call found") for u in users),
        "first_reply": (turns[0].get("raw_content") or "")[:400] if turns else "",
        # every reply as sampled and what the agent answered it with, clipped: the forms seen
        "replies": [(t.get("raw_content") or "")[:600] for t in turns],
        "nudges": [u[:300] for u in users if u.startswith(("error:", "No tool call found"))],
    }


def task_summary(task: str, rows: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    eps = [episode_summary(r) for r in rows]
    lat = [x for e in eps for x in e["latency_s"] if isinstance(x, int | float)]
    return {
        "task": task,
        "episodes": len(eps),
        "passes": sum(e["passed"] for e in eps),
        "end_reasons": [e["end_reason"] for e in eps],
        "turns": sum(e["turns"] for e in eps),
        "s_per_turn_median": round(statistics.median(lat), 1) if lat else None,
        "s_per_turn_max": round(max(lat), 1) if lat else None,
        "forms": sorted({f for e in eps for f in e["forms"]}),
        "repaired_calls": sum(e["repaired"] for e in eps),
        "parse_error_replies": sum(e["parse_errors"] for e in eps),
        "no_call_replies": sum(e["no_call"] for e in eps),
        "wall_s": round(wall_s, 1),
        "episodes_detail": eps,
    }


def endpoint(
    stack: ExitStack, model_dir: Path | None, base_url: str | None, model: str | None
) -> tuple[str, str]:
    """(base URL, model name): `model_dir` (a folder or .gguf) served by the local server for as
    long as `stack` is open, else the running server given."""
    if not model_dir:
        return str(base_url), str(model)
    from clawloop.harness.serve import local_policy_server
    from clawloop.training.gguf import model_folder

    folder = model_folder(model_dir)
    url = stack.enter_context(local_policy_server(folder, startup_timeout_s=900))
    return url, model or str(folder)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", type=Path, help="model folder or .gguf file to serve locally")
    p.add_argument("--base-url", help="a running OpenAI-compatible server's /v1 URL")
    p.add_argument("--model", help="its served model name")
    p.add_argument("--tasks", type=Path, nargs="*", default=[ECHO_TASK], help="task folders")
    p.add_argument("-n", type=int, default=4, help="episodes per task")
    p.add_argument("--max-turns", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=192)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--request-timeout", type=float, default=900.0, help="seconds per reply")
    p.add_argument("--episode-timeout", type=float, default=1800.0)
    p.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    p.add_argument("--json", type=Path, help="write the summary here too")
    args = p.parse_args(argv)
    if not args.model_dir and not (args.base_url and args.model):
        p.error("give --model-dir, or --base-url and --model")
    return args


def main(argv: list[str] | None = None) -> int:
    from clawloop.harness.llm import PolicyConfig
    from clawloop.harness.rollout import RolloutConfig, rollout_task, task_row_from_folder
    from clawloop.harness.sandbox.base import SandboxConfig

    args = _args(argv)
    cfg = RolloutConfig(
        n=args.n,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        episode_timeout_s=args.episode_timeout,
        workers=1,  # the local server answers one request at a time anyway
    )
    out: dict[str, Any] = {"model": args.model or str(args.model_dir), "tasks": []}
    with ExitStack() as stack:
        base_url, model = endpoint(stack, args.model_dir, args.base_url, args.model)
        policy = PolicyConfig(base_url, model, "", request_timeout_s=args.request_timeout)
        for task_dir in args.tasks:
            start = time.monotonic()
            rows = rollout_task(
                task_dir,
                task_row_from_folder(task_dir),
                policy,
                args.n,
                SandboxConfig(backend=args.backend),
                1,
                cfg,
            )
            summary = task_summary(task_dir.name, rows, time.monotonic() - start)
            out["tasks"].append(summary)
            brief = {k: v for k, v in summary.items() if k != "episodes_detail"}
            print(json.dumps(brief), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
