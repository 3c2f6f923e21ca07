"""`clawloop rollout`: run N episodes of one task folder against a policy endpoint.

    clawloop rollout TASK_DIR --base-url http://127.0.0.1:8000/v1 --model policy -n 8 --json
    clawloop rollout TASK_DIR --serve-tiny -n 2       # build + serve the tiny offline model
    clawloop rollout TASK_DIR --vllm MODEL_DIR -n 8   # a vLLM clawloop starts (log: OUT/vllm.log)

`--api tokens` (the default with --vllm) talks token in, token out (`/v1/completions` with the
prompt's ids, rendered here with the served model's tokenizer: --tokenizer, or the --vllm folder),
so each episode is one exact token sequence; `--api chat` asks the chat endpoint, whose template
re-renders the history. `--tool-choice required` forces a tool call on every reply.

TASK_DIR may be any task folder `clawloop import auto` recognises: a ClawGym one (data_entry.json
and reward/reward.sh) runs as the Harbor folder its import writes, graded by its own reward.sh;
any Harbor task folder, not only one clawloop made: a foreign task whose
Dockerfile needs a build is built offline on the Docker backend first (harness/taskfolder/foreign.py)
and refused on bubblewrap with the reason; it is graded by its own tests (reward.json or reward.txt).
Prints the pass count (`passes`), the rewards, end reasons, and where the trajectories
(trajectories.parquet, band.parquet) were written. Registered into flows/cli.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from clawloop.flows.cli.config_flags import add_config_flags, config_from_args
from clawloop.harness.rollout import (
    PolicyConfig,
    RolloutConfig,
    band_filter,
    pass_rates,
    rollout_task,
    task_row_from_folder,
    write_rollout_tables,
)
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.serve import ServeError
from clawloop.harness.taskfolder.folder import TaskFolderError
from clawloop.training.tiny_model import TinyModelError

# RolloutConfig fields this verb does not take as flags (band: [min(1, n), min(5, n)]), and the
# spellings its flags had before they were generated.
ROLLOUT_SKIP = {"band"}
ROLLOUT_FLAGS = {
    "n": ["-n"],
    "episode_timeout_s": ["--episode-timeout"],
    "workers": ["--concurrency"],
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rollout",
        help="run N agent episodes of one task folder against a policy endpoint",
        description="Run N episodes of a Harbor task folder with an OpenAI-compatible policy, "
        "grade each with the task's verifier, and write the trajectories.",
    )
    p.add_argument(
        "task_dir", type=Path, help="a Harbor task folder (task.toml, instruction.md, ...)"
    )
    p.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", help="served model name")
    p.add_argument(
        "--api-key-env", default=PolicyConfig.api_key_env, help="variable holding the API key"
    )
    p.add_argument(
        "--tokenizer", default="", help="served model's tokenizer folder (exact token budget)"
    )
    # The rollout: settings' flags, generated from RolloutConfig (a field added there is a flag
    # here); band follows -n on this verb, and it keeps its own spellings and concurrency 2.
    add_config_flags(
        p, RolloutConfig, skip=ROLLOUT_SKIP, names=ROLLOUT_FLAGS, defaults={"workers": 2}
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=PolicyConfig.request_timeout_s,
        help=f"seconds per model reply (default {PolicyConfig.request_timeout_s:g}; a CPU-served "
        "model may need more)",
    )
    p.add_argument("--backend", choices=["auto", "bwrap", "docker"], default="auto", help="sandbox")
    p.add_argument("--out", type=Path, help="output folder (default runs/adhoc/rollout-<time>)")
    p.add_argument(
        "--serve-tiny",
        action="store_true",
        help="build (if missing) and serve the tiny offline model with the local policy server "
        "(plumbing check only: it has no skill)",
    )
    p.add_argument(
        "--vllm",
        type=Path,
        metavar="MODEL_DIR",
        help="start a vLLM (harness/vllm.py; `make vllm` builds it) on this model folder, "
        "for this command only; its log is OUT/vllm.log",
    )
    p.add_argument(
        "--api",
        choices=["chat", "tokens"],
        help="chat: /v1/chat/completions; tokens: prompt ids to /v1/completions, one exact "
        "sequence per episode (needs the tokenizer; default with --vllm)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _fail(msg: str) -> int:
    print(f"clawloop rollout: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from clawloop.harness.taskfolder.clawgym import is_clawgym_folder

    task_dir: Path = args.task_dir
    if not is_clawgym_folder(task_dir) and not (task_dir / "instruction.md").is_file():
        return _fail(
            f"{task_dir} is not a task folder (no instruction.md), nor a ClawGym one (no "
            "data_entry.json and reward/reward.sh); pass a Harbor or a ClawGym task folder"
        )
    if not (args.serve_tiny or args.vllm) and not (args.base_url and args.model):
        return _fail(
            "give --base-url and --model (or --serve-tiny for the local tiny model, or --vllm "
            "MODEL_DIR for a vLLM clawloop starts)"
        )
    if args.api == "tokens" and not (args.tokenizer or args.vllm):
        return _fail(
            "--api tokens renders prompts here: give --tokenizer (the served model's folder)"
        )
    if args.n < 1 or args.workers < 1:
        return _fail("-n and --concurrency must be >= 1")
    if args.request_timeout <= 0:
        return _fail("--request-timeout must be a positive number of seconds")
    out = args.out or Path("runs", "adhoc", time.strftime("rollout-%Y%m%d-%H%M%S"))
    try:
        cfg = config_from_args(
            args, RolloutConfig, skip=ROLLOUT_SKIP, band=(min(1, args.n), min(5, args.n))
        )
    except ValueError as exc:  # RolloutConfig names the setting; the flag is its dashed name
        return _fail(str(exc))
    try:
        rows = _rollout(args, task_dir, cfg, out)
    except (ServeError, TinyModelError, TaskFolderError) as exc:
        return _fail(str(exc))  # TaskFolderError: a foreign task this backend cannot run
    band = band_filter(rows, cfg.n, cfg.band_lo, cfg.band_hi)
    paths = write_rollout_tables(out, rows, band, pass_rates(rows, band))
    result = {
        "task_dir": str(task_dir),
        "n": len(rows),
        "passes": sum(bool(r["passed"]) for r in rows),
        "rewards": [r["reward"] for r in rows],
        "end_reasons": [r["end_reason"] for r in rows],
        "errors": [r["error"] for r in rows],
        "trajectories": paths["trajectories"],
        "band": paths["band"],
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['passes']}/{result['n']} episodes passed")
        print("rewards:     " + " ".join(f"{r:.2f}" for r in result["rewards"]))
        print("end reasons: " + " ".join(result["end_reasons"]))
        first_error = next((e for e in result["errors"] if e), "")
        if first_error:
            print(f"first error: {first_error}")
        print(f"trajectories: {paths['trajectories']}")
    return 0


def _rollout(args: argparse.Namespace, task_dir: Path, cfg: RolloutConfig, out: Path) -> list[dict]:
    """Run the episodes, first starting the tiny local model server when asked to."""
    from clawloop.harness import owned
    from clawloop.harness.taskfolder.clawgym import (
        is_clawgym_folder,
        read_task,
        write_harbor_folder,
    )
    from clawloop.harness.taskfolder.foreign import prepare_task

    with ExitStack() as stack:
        # A foreign Harbor task runs from a prepared copy (its workspace laid out, its image
        # built on Docker); before the policy server starts, so a refusal costs nothing.
        work = Path(stack.enter_context(owned.temp_dir("clawloop-rollout-")))
        if is_clawgym_folder(task_dir):  # the Harbor folder `import clawgym` makes of it
            task_dir = write_harbor_folder(read_task(task_dir), work / "clawgym" / task_dir.name)
        prepared = prepare_task(task_dir, SandboxConfig(backend=args.backend), work)
        if prepared.note:
            print(f"clawloop rollout: {task_dir}: {prepared.note}", file=sys.stderr)
        base_url, model, tokenizer = args.base_url, args.model, args.tokenizer
        if args.serve_tiny:
            from clawloop.harness.serve import local_policy_server
            from clawloop.training.tiny_model import ensure_tiny_model

            model_dir = ensure_tiny_model()
            base_url = stack.enter_context(local_policy_server(model_dir))
            model = model or str(model_dir)
            tokenizer = tokenizer or str(model_dir)
        api = args.api or "chat"
        if args.vllm:
            from clawloop.harness.vllm import ManagedVLLM, model_len

            server = stack.enter_context(
                ManagedVLLM(out / "vllm.log", context_len=model_len(args.vllm, args.context_len))
            )
            base_url = server.serve(args.vllm)
            model, tokenizer, api = server.name, tokenizer or str(args.vllm), args.api or "tokens"
        policy = PolicyConfig(
            base_url=base_url,
            model=model,
            api_key_env=args.api_key_env,
            tokenizer=tokenizer,
            request_timeout_s=args.request_timeout,
            api=api,
            tool_choice=args.tool_choice,
        )
        return rollout_task(
            prepared.task_dir,
            task_row_from_folder(task_dir),
            policy,
            args.n,
            prepared.sandbox,
            args.workers,
            cfg,
        )
