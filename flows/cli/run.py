"""CLI verbs for the pipeline: run, rerun, runs, sweep, serve (registered into flows/cli.py).

clawloop run [--config FILE] [--iterations K] [--run-id ID] [--force STAGE ...] [--no-prefect]
             [--runner threads|dask|ray]
clawloop rerun --run-id ID --iteration K --stage NAME
clawloop runs [--root DIR]
clawloop sweep
clawloop serve [--config FILE] [--port 4200]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from clawloop.flows.cli.config_flags import add_config_flags
from clawloop.flows.names import run_id_arg
from clawloop.flows.pipeline import ORDER
from clawloop.tasks.config import RunConfig
from clawloop.tasks.settings import ExecutionSettings, StorageSettings
from clawloop.tasks.stage import resume_command

console = Console(
    width=None if sys.stdout.isatty() else 200
)  # a pipe or log file: no 80-column wrap


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("clawloop").setLevel(logging.INFO)


def _error_text(error: str, verbose: bool) -> str:
    """A stage's error for the terminal: the message; the traceback too with -v (it is always in
    the stage's failure.json and the Prefect logs)."""
    from clawloop.flows.runs import without_traceback

    return error.strip() if verbose else without_traceback(error)


def _cmd_run(args: argparse.Namespace) -> int:
    from clawloop.flows import lease, runs
    from clawloop.storage import fs
    from clawloop.tasks.config import ConfigError

    _logging(args.verbose)
    if args.runner and args.no_prefect and args.runner != "threads":
        raise ConfigError(
            f"--runner {args.runner} is a Prefect task runner: drop --no-prefect to use it"
        )
    # Flags go into the config before it is validated: `--runner dask` wins over the file's
    # `runner: threads` (with an execution.address that alone would be a contradiction).
    execution = {"runner": args.runner} if args.runner else None
    cfg = runs.resolve_config(
        args.config, args.run_id, root=args.root, iterations=args.iterations, execution=execution
    )
    run_id = args.run_id or runs.new_run_id()
    fs.check_root(cfg.storage.root)  # a missing bucket or refused credentials: said up front
    if not args.no_prefect:
        from clawloop.flows.pipeline import check_preconditions

        check_preconditions(cfg)  # before any stage: not at forge, after synthesize ran
    # The lease first: a second writer is refused before it writes anything (run.json included).
    with lease.hold(cfg.storage.root, run_id, "clawloop run"):
        return _drive(args, cfg, run_id)


def _drive(args: argparse.Namespace, cfg: RunConfig, run_id: str) -> int:
    from clawloop.flows import report, runs
    from clawloop.flows.pipeline import STAGES

    # Checked here, before any flow starts, so a user error is one line in both modes (inside a
    # flow Prefect would log it with a traceback first): a storage root we cannot write.
    runs.save_run_config(cfg, run_id)
    names = [s.name for s in STAGES]
    console.print(
        f"[bold]clawloop run[/] {run_id}: {cfg.iterations} iteration(s) of {' -> '.join(names)}; artifacts in {cfg.storage.root}/{run_id}/"
    )
    if args.no_prefect:
        from clawloop.tasks.mapping import thread_mapper

        summary = runs.run_loop(cfg, run_id, STAGES, thread_mapper(), force=args.force or [])
    else:
        from clawloop.flows.pipeline import loop_flow

        state = loop_flow(run_id, cfg.model_dump(mode="json"), args.force or [], return_state=True)
        summary = state.result(raise_on_failure=False)
        if isinstance(summary, BaseException):
            raise summary  # a user error prints as one line (flows/cli.py); anything else crashes
        if not isinstance(summary, runs.RunSummary):
            console.print(f"[red]the loop flow crashed:[/] {escape(str(state.message))}")
            return 1
        summary.duration_s = summary.duration_s or sum(o.duration_s for o in summary.outcomes)
    console.print(report.summary_table(summary))
    learning = _learning_table(cfg, run_id)
    if learning is not None:
        console.print(learning)
    console.print(
        f"artifacts: {cfg.storage.root}/{run_id}/iter-<k>/<stage>/   re-run one stage: clawloop rerun --run-id {run_id} --iteration K --stage NAME"
    )
    for o in summary.outcomes:
        if o.error or o.status == "blocked":
            console.print(
                f"[red]{o.stage} iteration {o.iteration} {o.status}:[/]\n"
                f"{escape(_error_text(o.error, args.verbose) or o.reason)}\n"
                f"nothing of it was committed; fix the cause, then resume (completed stages "
                f"skip, {o.stage} runs again): {resume_command(cfg.storage.root, run_id)}"
            )
    return 0 if summary.ok else 1


def _learning_table(cfg: RunConfig, run_id: str) -> Any:
    """The per-iteration table of a run that graded the base policy (diagnose.baseline): held-out
    pass rate per iteration beside row base with the paired test, and what train did. None for a
    run without row base, or whose figures cannot be read (`clawloop report` says why)."""
    if not cfg.diagnose.baseline:
        return None
    from clawloop.flows.cli.report import ReportError, run_figures
    from clawloop.flows.report import run_report_table

    try:
        figures = run_figures(cfg.storage.root, run_id)
    except ReportError:
        return None
    return run_report_table(figures) if figures.has_base else None


def _cmd_rerun(args: argparse.Namespace) -> int:
    from clawloop.flows import report, runs
    from clawloop.flows.pipeline import STAGES
    from clawloop.tasks.stage import StageError

    _logging(args.verbose)
    cfg = runs.load_run_config(args.root, args.run_id)
    if cfg is None:
        raise StageError(
            f"no run {args.run_id!r} under {args.root}: list runs with `clawloop runs`"
        )
    if not 1 <= args.iteration <= cfg.iterations:
        raise StageError(
            f"--iteration {args.iteration} is outside run {args.run_id}'s 1..{cfg.iterations}"
        )
    from clawloop.flows import lease

    with lease.hold(cfg.storage.root, args.run_id, f"clawloop rerun --stage {args.stage}"):
        if args.no_prefect:
            from clawloop.tasks.mapping import thread_mapper

            outcome = runs.rerun_stage(
                cfg, args.run_id, args.iteration, args.stage, STAGES, thread_mapper()
            )
        else:
            from clawloop.flows.pipeline import rerun_stage_flow

            state = rerun_stage_flow(
                args.run_id, args.iteration, args.stage, args.root, return_state=True
            )
            outcome = state.result(raise_on_failure=False)
            if isinstance(outcome, BaseException):
                raise outcome
    summary = runs.RunSummary(args.run_id, cfg.storage.root, [outcome], outcome.duration_s)
    console.print(report.summary_table(summary))
    if outcome.error:
        console.print(f"[red]{escape(_error_text(outcome.error, args.verbose))}[/]")
    if outcome.status == "ran":
        info = runs.run_info(cfg.storage.root, args.run_id, STAGES, cfg)
        stale = [
            f"iter {k} {s.stage}"
            for k, ss in info.iterations.items()
            for s in ss
            if s.status == "stale"
        ]
        resume = resume_command(cfg.storage.root, args.run_id)
        console.print(
            f"the next `{resume}` re-runs: {', '.join(stale)}"
            if stale
            else f"{args.stage}'s output did not change: the next `{resume}` re-runs nothing"
        )
    return 0 if outcome.status == "ran" else 1


def _cmd_runs(args: argparse.Namespace) -> int:
    from clawloop.flows import report, runs
    from clawloop.flows.pipeline import STAGES
    from clawloop.storage import fs
    from clawloop.tasks.stage import StageError

    named, args.root = args.root is not None, args.root or "runs"
    if fs.is_local(args.root) and not fs.exists(args.root):
        if named:  # a root the user named that is not there: a typo, not "no runs yet"
            raise StageError(
                f"no storage root {args.root}: pass the --root your runs were made under"
            )
        console.print("no runs under runs yet: start one with `clawloop run`")
        return 0
    if fs.is_local(args.root) and not Path(args.root).is_dir():
        raise StageError(
            f"--root {args.root} is a file, not a storage root folder: pass the folder your runs "
            "were made under (default: runs)"
        )
    found = runs.list_runs(args.root, STAGES, args.run_id)
    if args.run_id and found and found[0].status == "unreadable":
        from clawloop.flows.records import RunRecordError

        raise RunRecordError(found[0].reason)  # the one run asked for: its damage is the answer
    if not found:
        console.print(f"no runs under {args.root} yet: start one with `clawloop run`")
        return 0
    console.print(report.runs_table(found, ORDER))
    if args.run_id:
        console.print(report.stages_table(found[0], ORDER))
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    """Remove the sandboxes (Docker containers, bwrap roots, temp dirs, helper processes) whose
    owner process is gone: what killed runs left. Live runs' sandboxes are kept."""
    from clawloop.harness.sandbox.backend import sweep

    removed = sweep()
    for kind, items in removed.items():
        for item in items:
            print(f"removed {kind} {item}")
    total = sum(len(v) for v in removed.values())
    print(f"swept {total} leftover(s) of dead runs" if total else "nothing left by dead runs")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from clawloop.flows.server import local_server
    from clawloop.tasks.config import load_config

    cron = load_config(args.config).prefect.nightly_cron  # a bad config: before any server starts

    with local_server(
        port=args.port,
        log_path=Path(args.root) / "prefect-server.log" if Path(args.root).is_dir() else None,
    ) as api_url:
        os.environ["PREFECT_API_URL"] = api_url
        from prefect.settings import PREFECT_API_URL, temporary_settings

        from clawloop.flows.server import serve_deployments

        ui = api_url.removesuffix("/api")
        console.print(
            f"[bold]Prefect UI:[/] {ui}   deployments: nightly ({cron}), rerun-stage, loop   (Ctrl-C to stop)"
        )
        with temporary_settings({PREFECT_API_URL: api_url}):
            serve_deployments(cron, args.config, args.root)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add run, rerun, runs and serve to the `clawloop` parser."""
    p = sub.add_parser("run", help="run the loop (K iterations); resumes an existing --run-id")
    p.add_argument(
        "--config",
        help="YAML run config, or a shipped profile's name (default: local; tasks/profiles/)",
    )
    # The run config's settings a flag overrides: generated from their classes (help, type,
    # choices), each None when not given so the config's value stands.
    add_config_flags(p, RunConfig, only={"iterations"}, overrides="")
    p.add_argument(
        "--run-id",
        type=run_id_arg,
        help="run id; an existing one resumes, skipping completed stages",
    )
    p.add_argument(
        "--force",
        nargs="+",
        metavar="STAGE",
        choices=ORDER,
        help="re-run these stages and what depends on them",
    )
    add_config_flags(p, StorageSettings, only={"root"}, overrides="storage")
    p.add_argument(
        "--no-prefect", action="store_true", help="run without Prefect (same artifacts, no UI)"
    )
    add_config_flags(p, ExecutionSettings, only={"runner"}, overrides="execution")
    p.add_argument("-v", "--verbose", action="store_true", help="log every stage decision")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("rerun", help="re-run one stage of one iteration from cached artifacts")
    p.add_argument("--run-id", type=run_id_arg, required=True, help="the run (see `clawloop runs`)")
    p.add_argument("--iteration", type=int, required=True, help="which iteration, 1..K")
    p.add_argument("--stage", required=True, choices=ORDER, help="the stage to re-run")
    p.add_argument("--root", default="runs", help="storage root the run lives under")
    p.add_argument("--no-prefect", action="store_true", help="run without Prefect")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=_cmd_rerun)

    p = sub.add_parser("runs", help="list runs: status, start, duration; --run-id: its stages")
    p.add_argument("--root", help="storage root (default: runs)")
    p.add_argument(
        "--run-id", type=run_id_arg, help="show this run's stages (complete, stale, failed, why)"
    )
    p.set_defaults(func=_cmd_runs)

    p = sub.add_parser(
        "sweep",
        help="remove sandboxes (Docker containers named clawloop-<run>-<stage>-...) of dead runs",
    )
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser(
        "serve", help="start (or use) a Prefect server and serve nightly + rerun-stage"
    )
    p.add_argument("--config", help="YAML run config for the nightly loop")
    p.add_argument("--port", type=int, default=4200, help="port of the local Prefect server")
    p.add_argument("--root", default="runs", help="storage root")
    p.set_defaults(func=_cmd_serve)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the `clawloop` command")
