"""`clawloop report` over a hand-written K=2 run (manifests and the small tables it reads): one
row per iteration with the manifests' numbers, the held-out pass rate per capability from
diagnose's pass_rates, mean SFT / GRPO loss from train's metrics, an external eval pass rate when
diagnose's summary has one; report.md and report.png beside the run. And the train stage's
progress bar (the one long stage without one)."""

from __future__ import annotations

import importlib.util
import io
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image
from rich.console import Console

from clawloop.flows.cli import main
from clawloop.flows.cli.report import external_figures, run_figures
from clawloop.storage import artifacts, fs, schemas
from clawloop.storage.schemas import EXTERNAL_PASS_RATES
from clawloop.training.progress import TrainProgress, progress_callbacks

RUN = "rep"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def commit(root: Path, k: int, stage: str, tables: dict, summary: dict) -> None:
    url = fs.stage_url(str(root), RUN, k, stage)
    files = [artifacts.write_table(url, n, rows, schema) for n, (schema, rows) in tables.items()]
    artifacts.commit_stage(
        url,
        stage=stage,
        iteration=k,
        run_id=RUN,
        inputs_hash="x",
        code_version="x",
        upstream={},
        files=files,
        started_at=time.time(),
        summary=summary,
    )


def candidate(i: int) -> dict:
    return artifacts.empty_row(schemas.CANDIDATES, task_id=f"c{i}", capability="tally")


def metric(phase: str, step: int, loss: float) -> dict:
    return artifacts.empty_row(schemas.TRAIN_METRICS, phase=phase, step=step, loss=loss)


def rate(k: int, cap: str, passed: int, n: int) -> dict:
    return {
        "iteration": k,
        "capability": cap,
        "n_episodes": n,
        "n_passed": passed,
        "n_tasks": n,
        "pass_rate": passed / n,
    }


def external(k: int, cap: str, passed: int, n: int) -> dict:
    return {
        **rate(k, cap, passed, n),
        "eval_set": "bench",
        "mean_reward": passed / n,
        "external": True,
    }


# per iteration: candidates, forged ok/failed, verify kept/kept_train, rollout tasks/episodes/
# passed/band kept, losses (phase, loss...), held-out (capability, passed, n), external summary
ITERATIONS = {
    1: dict(
        cands=6, forge=(5, 1), verify=(4, 3), rollout=(3, 6, 2, 2),
        losses={"sft": [2.0, 1.0], "grpo": [0.5]},
        heldout=[("tally", 1, 2), ("audit", 0, 1)], external={},
    ),
    2: dict(
        cands=8, forge=(8, 0), verify=(6, 4), rollout=(4, 8, 5, 3),
        losses={"sft": [0.75], "grpo": [0.25, 0.125]},
        heldout=[("tally", 2, 2), ("audit", 1, 2)],
        external={"external_pass_rate": 0.25, "external_pass_rates": {"bench": 0.25}},
    ),
}  # fmt: skip


def write_run(root: Path) -> None:
    (root / RUN).mkdir(parents=True)
    (root / RUN / "run.json").write_text(json.dumps({"run_id": RUN, "config": {"iterations": 2}}))
    for k, it in ITERATIONS.items():
        commit(
            root,
            k,
            "synthesize",
            {"candidates": (schemas.CANDIDATES, [candidate(i) for i in range(it["cands"])])},
            {},
        )  # noqa: E501
        commit(root, k, "forge", {}, {"forged": it["forge"][0], "failed": it["forge"][1]})
        commit(root, k, "verify", {}, {"kept": it["verify"][0], "kept_train": it["verify"][1]})
        tasks, episodes, passed, kept = it["rollout"]
        summary = {"tasks": tasks, "episodes": episodes, "passed": passed, "kept_tasks": kept}
        commit(root, k, "rollout", {}, summary)
        rows = [metric(p, s + 1, v) for p, vs in it["losses"].items() for s, v in enumerate(vs)]
        steps = len(rows)
        commit(
            root,
            k,
            "train",
            {"metrics": (schemas.TRAIN_METRICS, rows)},
            {"status": "trained", "steps": steps},
        )  # noqa: E501
        rates = [rate(k, c, p, n) for c, p, n in it["heldout"]]
        summary = {
            "eval_episodes": sum(n for *_, n in it["heldout"]),
            "eval_tasks": 3,
            **it["external"],
        }  # noqa: E501
        tables = {"pass_rates": (schemas.PASS_RATES, rates)}
        if it["external"]:  # diagnose.eval_tasks: one external set, "bench"
            ext = [external(k, "*", 1, 4), external(k, "tally", 1, 2), external(k, "audit", 0, 2)]
            tables["external_pass_rates"] = (EXTERNAL_PASS_RATES, ext)
        commit(root, k, "diagnose", tables, summary)


def table(md: str, heading: str) -> list[list[str]]:
    """The data rows of the markdown table under `heading`."""
    lines = md.split(heading, 1)[1].splitlines()
    rows = [ln for ln in lines[lines.index(next(ln for ln in lines if ln.startswith("|"))) :]]
    rows = rows[: next((i for i, ln in enumerate(rows) if not ln.startswith("|")), len(rows))]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in rows[2:]]


def test_report_one_row_per_iteration_with_the_manifests_numbers(tmp_path, capsys):
    root = tmp_path / "runs"
    write_run(root)
    assert main(["report", "--run", RUN, "--root", str(root)]) == 0
    printed = capsys.readouterr().out
    md = (root / RUN / "report.md").read_text()
    png = (root / RUN / "report.png").read_bytes()
    assert png.startswith(PNG_MAGIC)
    with Image.open(io.BytesIO(png)) as img:
        assert img.format == "PNG" and img.size == (1300, 900)
    assert "![per-iteration figures](report.png)" in md
    assert f"wrote {root / RUN / 'report.md'}" in printed and "held-out pass rate" in printed

    rows = table(md, "## Per iteration")
    assert [r[0] for r in rows] == ["1", "2"]
    for row, (k, it) in zip(rows, ITERATIONS.items(), strict=True):
        tasks, episodes, passed, kept = it["rollout"]
        n_eval = sum(n for *_, n in it["heldout"])
        n_pass = sum(p for _, p, _ in it["heldout"])
        mean = {p: sum(v) / len(v) for p, v in it["losses"].items()}
        ext = it["external"].get("external_pass_rate")
        assert row == [
            str(k),
            str(it["cands"]),
            str(it["forge"][0]),
            str(it["verify"][0]),
            str(it["verify"][1]),
            str(tasks),
            str(kept),
            f"{100 * kept / tasks:.1f}%",
            f"{passed}/{episodes}",
            f"trained ({sum(len(v) for v in it['losses'].values())})",
            f"{mean['sft']:.4f}",
            f"{mean['grpo']:.4f}",
            f"{100 * n_pass / n_eval:.1f}%",
            "-" if ext is None else f"{100 * ext:.1f}%",
            "-",  # the external mean score: not in these summaries
        ], row
    caps = {r[0]: r[1:] for r in table(md, "## Held-out pass rate per capability")}
    assert caps == {
        "audit": ["0.0% (0/1)", "50.0% (1/2)"],
        "tally": ["50.0% (1/2)", "100.0% (2/2)"],
    }
    ext = {r[0]: r[1:] for r in table(md, "## External eval pass rate per eval set and capability")}
    assert ext == {
        "bench": ["-", "25.0%"],
        "bench / tally": ["-", "50.0%"],
        "bench / audit": ["-", "0.0%"],
    }


def test_a_baseline_in_iteration_1s_diagnose_is_row_base(tmp_path, capsys):
    """diagnose.baseline: the base policy on iteration 1's held-out and external tasks is the
    report's first row ("base"), beside the iterations, in every table and in the plot."""
    root = tmp_path / "runs"
    write_run(root)
    url = fs.stage_url(str(root), RUN, 1, "diagnose")
    manifest = json.loads(fs.read_bytes(fs.join(url, "manifest.json")))
    manifest["summary"]["baseline"] = {
        "policy": "base",
        "heldout": {"tally": [0, 2], "audit": [0, 1]},
        "heldout_passed": 0,
        "heldout_episodes": 3,
        "external_pass_rate": 0.0,
        "external_pass_rate_ci": [0.0, 0.49],
        "external_mean_reward": 0.125,
        "external_mean_reward_ci": [0.0, 0.3],
        "external_pass_rates": {"bench": 0.0},
    }
    (root / RUN / "iter-1" / "diagnose" / "manifest.json").write_text(json.dumps(manifest))
    figures = run_figures(str(root), RUN)
    assert [it.label for it in figures.iterations] == ["base", "1", "2"]
    assert main(["report", "--run", RUN, "--root", str(root)]) == 0
    md = (root / RUN / "report.md").read_text()
    base = table(md, "## Per iteration")[0]
    assert base[0] == "base" and base[1:12] == ["-"] * 11
    assert base[12:15] == ["0.0%", "0.0% [0.0%, 49.0%]", "0.125 [0.000, 0.300]"]
    assert base[15:] == ["-", "-", "-"]  # paired tests: none on row base (nor without episodes)
    caps = {r[0]: r[1:] for r in table(md, "## Held-out pass rate per capability")}
    assert caps["tally"] == ["0.0% (0/2)", "50.0% (1/2)", "100.0% (2/2)"]
    assert "| capability | iter base | iter 1 | iter 2 |" in md
    assert f"# Run `{RUN}`: 2 of 2 iterations and row base" in md  # base is not an iteration
    assert (root / RUN / "report.png").read_bytes().startswith(PNG_MAGIC)
    # iteration 1 still reads its own figures, not the baseline's
    assert figures.iterations[1].heldout == {"tally": (1, 2), "audit": (0, 1)}


def test_clawloop_run_closes_with_the_learning_table_when_the_run_has_row_base(tmp_path):
    """`clawloop run`'s closing table (flows/cli/run.py): with diagnose.baseline the per-iteration
    table follows the stage table, row base first and the paired test beside each iteration;
    a run without row base (the embedded profile) prints the stage table alone."""
    from clawloop.flows.cli.run import _learning_table
    from clawloop.tasks.config import parse_config

    root = tmp_path / "runs"
    write_run(root)
    url = fs.stage_url(str(root), RUN, 1, "diagnose")
    manifest = json.loads(fs.read_bytes(fs.join(url, "manifest.json")))
    manifest["summary"]["baseline"] = {"heldout": {"tally": [0, 2]}, "heldout_passed": 0}
    (root / RUN / "iter-1" / "diagnose" / "manifest.json").write_text(json.dumps(manifest))
    storage = {"root": str(root)}
    cfg = parse_config({"storage": storage, "diagnose": {"baseline": True}})
    out = io.StringIO()
    Console(file=out, width=400).print(_learning_table(cfg, RUN))
    assert "held-out vs base (McNemar)" in out.getvalue()
    rows = [ln for ln in out.getvalue().splitlines() if "│" in ln]
    labels = [ln.split("│")[1].strip() for ln in rows]
    assert labels == ["base", "1", "2"]
    assert _learning_table(parse_config({"storage": storage}), RUN) is None
    assert _learning_table(cfg, "no-such-run") is None


def test_unfinished_run_shows_dashes_and_missing_stages(tmp_path, capsys):
    root = tmp_path / "runs"
    (root / RUN).mkdir(parents=True)
    (root / RUN / "run.json").write_text(json.dumps({"run_id": RUN, "config": {"iterations": 3}}))
    commit(root, 1, "forge", {}, {"forged": 2, "failed": 0})
    figures = run_figures(str(root), RUN)
    assert [it.iteration for it in figures.iterations] == [1]  # 2 and 3 never started
    assert figures.iterations[0].missing == ["synthesize", "verify", "rollout", "train", "diagnose"]
    assert main(["report", "--run", RUN, "--root", str(root)]) == 0
    md = (root / RUN / "report.md").read_text()
    assert table(md, "## Per iteration") == [["1", "-", "2"] + ["-"] * 10]
    assert "iteration 1: synthesize, verify, rollout, train, diagnose" in md
    assert (root / RUN / "report.png").read_bytes().startswith(PNG_MAGIC)
    capsys.readouterr()
    assert main(["report", "--run", "nope", "--root", str(root)]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("summary", "rows", "want"),
    [
        ({"eval_tasks": 3}, [], (None, {})),  # our own eval task count is not a rate
        (
            {"external_pass_rate": 0.5, "external_pass_rates": {"a": 0.5, "b": None}},
            [],
            (0.5, {"a": 0.5}),
        ),
        ({"external_pass_rate": None}, [external(1, "x", 1, 2)], (None, {"bench / x": 0.5})),
        (
            {"external_pass_rate": math.nan},
            [{**external(1, "*", 0, 1), "pass_rate": math.nan}],
            (None, {}),
        ),
    ],
)
def test_external_pass_rate_shapes(summary, rows, want):
    assert external_figures(summary, rows) == want


def test_train_progress_bar_counts_steps_and_shows_the_loss():
    assert progress_callbacks("sft") == []  # pytest's stderr is no terminal
    (cb,) = progress_callbacks("sft", enabled=True)
    assert isinstance(cb, TrainProgress)
    out = io.StringIO()
    bar = TrainProgress("grpo", Console(file=out, force_terminal=True, width=120))
    state = SimpleNamespace(is_world_process_zero=True, max_steps=3, global_step=0)
    bar.on_train_begin(None, state, None)
    for step in (1, 2):
        state.global_step = step
        bar.on_log(None, state, None, logs={"loss": 1.0 / step})
        bar.on_step_end(None, state, None)
    bar.on_train_end(None, state, None)
    text = out.getvalue()
    assert "train grpo" in text and "2/3" in text and "loss 0.5000" in text
    # other ranks draw nothing
    quiet = io.StringIO()
    other = TrainProgress("sft", Console(file=quiet, force_terminal=True))
    other.on_train_begin(None, SimpleNamespace(is_world_process_zero=False, max_steps=3), None)
    other.on_step_end(None, state, None)
    other.on_train_end(None, state, None)
    assert quiet.getvalue() == ""


def test_report_json_is_the_tables_figures_in_a_stable_shape(tmp_path, capsys):
    """`clawloop report --run ID --json`: run_id and one object per row (base first) with the
    held-out passed/n, the external passed/n/mean score (null without an eval set) and train's
    status and steps (null for base); nothing is written beside the run."""
    root = tmp_path / "runs"
    write_run(root)
    for k, summary in (
        (1, {"baseline": {"heldout": {"tally": [0, 2], "audit": [1, 1]}, "heldout_episodes": 3,
                          "external_passed": 1, "external_episodes": 8,
                          "external_mean_reward": 0.25}}),
        (2, {"external_passed": 3, "external_episodes": 8, "external_mean_reward": 0.5}),
    ):  # fmt: skip
        path = root / RUN / f"iter-{k}" / "diagnose" / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["summary"].update(summary)
        path.write_text(json.dumps(manifest))
    assert main(["report", "--run", RUN, "--root", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "run_id": RUN,
        "iterations": [
            {
                "label": "base",
                "heldout": {"passed": 1, "n": 3},
                "external": {"passed": 1, "n": 8, "mean_score": 0.25},
                "train": None,
            },
            {
                "label": "1",
                "heldout": {"passed": 1, "n": 3},
                "external": None,
                "train": {"status": "trained", "steps": 3},
            },
            {
                "label": "2",
                "heldout": {"passed": 3, "n": 4},
                "external": {"passed": 3, "n": 8, "mean_score": 0.5},
                "train": {"status": "trained", "steps": 3},
            },
        ],
    }
    assert not (root / RUN / "report.md").exists() and not (root / RUN / "report.png").exists()
    # a run not yet diagnosed: held-out 0/0, no train row yet
    (root / "fresh").mkdir()
    (root / "fresh" / "run.json").write_text(
        json.dumps({"run_id": "fresh", "config": {"iterations": 1}})
    )
    assert main(["report", "--run", "fresh", "--root", str(root), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == {
        "run_id": "fresh",
        "iterations": [
            {"label": "1", "heldout": {"passed": 0, "n": 0}, "external": None, "train": None}
        ],
    }


def episode(task: str, attempt: int, passed: bool, split: str = "eval") -> dict:
    return artifacts.empty_row(
        schemas.TRAJECTORIES, task_id=task, capability="tally", split=split, attempt=attempt,
        passed=passed, reward=float(passed), end_reason="finished",
    )  # fmt: skip


def test_each_iteration_is_tested_against_base_on_the_same_episodes(tmp_path, capsys):
    """With row base, every later row carries the exact McNemar p-value over held-out episodes
    paired by (task, attempt), in report.md, the terminal table and benchmarks/learning.py's."""
    root = tmp_path / "runs"
    (root / RUN).mkdir(parents=True)
    (root / RUN / "run.json").write_text(json.dumps({"run_id": RUN, "config": {"iterations": 2}}))
    keys = [(t, a) for t in "abcd" for a in range(2)]  # 4 tasks x 2 episodes
    base = [episode(t, a, t == "a" and a == 0) for t, a in keys]  # 1/8
    # iteration 1: a0 lost, b0 b1 gained -> +2/-1; iteration 2: 6 gained, none lost -> +6/-0
    now = {1: {("b", 0), ("b", 1)}, 2: {("a", 0)} | {(t, a) for t in "bcd" for a in range(2)}}
    for k, passing in now.items():
        rows = [episode(t, a, (t, a) in passing) for t, a in keys]
        tables = {
            "pass_rates": (schemas.PASS_RATES, [rate(k, "tally", len(passing), 8)]),
            "eval_trajectories": (schemas.TRAJECTORIES, rows),
        }
        summary = {}
        if k == 1:
            tables["baseline_trajectories"] = (schemas.TRAJECTORIES, base)
            summary["baseline"] = {"heldout": {"tally": [1, 8]}, "heldout_episodes": 8}
        commit(root, k, "diagnose", tables, summary)
    figures = run_figures(str(root), RUN)
    tests = [it.heldout_test for it in figures.iterations]
    assert tests[0] is None
    assert (tests[1].pairs, tests[1].gained, tests[1].lost) == (8, 2, 1)
    assert tests[1].p_value == 1.0  # 2 * (1 + 3) / 8 > 1
    assert (tests[2].gained, tests[2].lost, tests[2].p_value) == (6, 0, 2 / 64)
    assert main(["report", "--run", RUN, "--root", str(root)]) == 0
    rows = table((root / RUN / "report.md").read_text(), "## Per iteration")
    assert [r[-1] for r in rows] == ["-", "p=1 (+2/-1 of 8)", "p=0.0312 (+6/-0 of 8)"]
    assert "held-out vs base (McNemar)" in capsys.readouterr().out

    spec = importlib.util.spec_from_file_location(
        "learning_benchmark", Path(__file__).resolve().parents[2] / "benchmarks" / "learning.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    lines = bench.table(figures).splitlines()
    assert "held-out vs base (McNemar)" in lines[0]
    assert lines[4].startswith("| 2 | 7/8 87.5% [") and "| p=0.0312 (+6/-0 of 8) |" in lines[4]


def test_a_run_whose_lease_is_held_is_reported_as_partial(tmp_path, capsys):
    """Issue 34 item 5: while another live process holds the run's lease, `report` marks its
    figures partial (report.md, stderr; the JSON keeps issue 33 item 6's exact shape) and says it
    writes into a run it does not own."""
    import time

    from clawloop.flows import lease

    root = tmp_path / "runs"
    (root / RUN).mkdir(parents=True)
    (root / RUN / "run.json").write_text(json.dumps({"run_id": RUN, "config": {"iterations": 1}}))
    commit(root, 1, "forge", {}, {"forged": 2, "failed": 0})
    assert main(["report", "--run", RUN, "--root", str(root), "--json"]) == 0
    out = capsys.readouterr()
    assert set(json.loads(out.out)) == {"run_id", "iterations"} and "partial" not in out.err
    now = time.time()
    holder = {"host": "other-host", "pid": 4242, "start": "1", "started_at": now,
              "heartbeat": now, "token": "someone-else", "command": "clawloop run"}  # fmt: skip
    (root / RUN / lease.LEASE_FILE).write_text(json.dumps(holder))
    assert main(["report", "--run", RUN, "--root", str(root), "--json"]) == 0
    out = capsys.readouterr()
    assert set(json.loads(out.out)) == {"run_id", "iterations"}
    assert "these figures are partial" in out.err and "other-host, pid 4242" in out.err
    assert not (root / RUN / "report.md").exists()
    assert main(["report", "--run", RUN, "--root", str(root)]) == 0
    err = capsys.readouterr().err
    assert "writing report.md and report.png into run" in err and "another process" in err
    assert "**Partial:** run " in (root / RUN / "report.md").read_text()
