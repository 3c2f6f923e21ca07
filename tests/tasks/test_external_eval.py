"""An external held-out eval set (`diagnose.eval_tasks`, issue 14 item 3): a Harbor dataset folder
of foreign tasks is rolled out by the diagnose stage every iteration beside our own held-out
split, graded by the tasks' own tests, and its pass rate is tracked per iteration apart from ours
(external_pass_rates, external_trajectories, the report's section, the stage summary).

The loop runs K=2 with stub synthesize/forge/verify/train stages (one own eval task: the
hive_totals fixture) and the real diagnose stage, on bubblewrap, against a routed fake policy: it
solves the own task and external task A every time, and external task B only from iteration 2
on (the stub train stage says which iteration it is), so the external pass rate goes 0.5 -> 1.0.
On Docker, count-b has its own image (built offline) and works in /app.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from doubles.fake_openai import FakeOpenAI, first_user_text, solution_steps, wrong_steps

from clawloop.flows import runs
from clawloop.harness.taskfolder.packing import pack_dir
from clawloop.harness.taskfolder.rows import forged_row
from clawloop.storage import schemas
from clawloop.storage.artifacts import empty_row
from clawloop.tasks import diagnose, rollout
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageResult, StageSpec

HIVE = Path(__file__).parents[1] / "fixtures" / "tasks" / "hive_totals"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def _foreign():
    """tests/harness/test_foreign_harbor.py's writer of a foreign Harbor task (loaded by path:
    test folders are not packages)."""
    path = Path(__file__).parents[1] / "harness" / "test_foreign_harbor.py"
    spec = importlib.util.spec_from_file_location("foreign_harbor_tasks", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stub(name: str, tables: dict, on_run=None) -> StageSpec:
    def run(ctx):
        if on_run:
            on_run(ctx)
        return StageResult(tables)

    return StageSpec(name, run, lambda c, k: {})


def _stages(state: dict, with_rollout: bool = False) -> list[StageSpec]:
    own = forged_row(
        {"task_id": "fixture-hive-totals", "capability": "aggregation", "split": "eval"},
        status="ok",
        task_tar=pack_dir(HIVE),
    )
    verdict = empty_row(
        schemas.VERDICTS, task_id=own["task_id"], kept=True, capability="aggregation", split="eval"
    )
    candidate = empty_row(schemas.CANDIDATES, task_id=own["task_id"], capability="aggregation")
    checkpoint = empty_row(schemas.CHECKPOINT, kind="base")  # the policy: the endpoint's model

    def trained(ctx):
        fake = state.get("fake")
        state.update(iteration=ctx.iteration)
        state.setdefault("requests_at_train", []).append(len(fake.requests) if fake else 0)

    return [
        _stub("synthesize", {"candidates": (schemas.CANDIDATES, [candidate])}),
        _stub("forge", {"tasks": (schemas.FORGED, [own])}),
        _stub("verify", {"verdicts": (schemas.VERDICTS, [verdict])}),
        *([rollout.STAGE] if with_rollout else []),  # no train task: rollout runs row 0 alone
        _stub("train", {"checkpoint": (schemas.CHECKPOINT, [checkpoint])}, on_run=trained),
        diagnose.STAGE,
    ]


def _dataset(tmp_path: Path, build_b: bool = False) -> Path:
    """count-a on the sandbox base image; count-b too, or (build_b) with its own image and /app."""
    foreign = _foreign()
    dataset = tmp_path / "acme-bench"
    for name in ("count-a", "count-b"):
        own = build_b and name == "count-b"
        task = foreign.write_foreign_task(
            dataset / name,
            name,
            dockerfile=foreign.DOCKERFILE_BUILD if own else foreign.DOCKERFILE_BASE,
            root="/app" if own else "/workspace",
        )
        with (task / "instruction.md").open("a") as f:
            f.write(f"\nTask {name}.\n")
    return dataset


def _cfg(tmp_path: Path, base_url: str, eval_tasks: list[str], backend: str = "bwrap") -> object:
    return parse_config(
        {
            "iterations": 2,
            "storage": {"root": str(tmp_path / "runs")},
            "sandbox": {"backend": backend},
            "rollout": {"max_turns": 10},
            "llm": {"base_url": base_url, "model": "fake-policy"},
            "diagnose": {"embedder": "hashed", "eval_tasks": eval_tasks},
        }
    )


def _docker_or_skip() -> None:
    from clawloop.harness.sandbox.backend import docker_available

    why = docker_available() or docker_available("clawloop-rootfs:bookworm")
    if why:
        pytest.skip(f"docker not usable: {why}")


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("bwrap", marks=needs_bwrap),
        # count-b has its own image (built offline), count-a and the own task the base image
        pytest.param("docker", marks=pytest.mark.docker),
    ],
)
def test_external_eval_set_is_rolled_out_every_iteration_and_tracked_apart(tmp_path, backend):
    if backend == "docker":
        _docker_or_skip()
    dataset = _dataset(tmp_path, build_b=backend == "docker")
    state = {"iteration": 0}

    def route(messages):
        text = first_user_text(messages)
        if "Task count-a." in text:
            return solution_steps(dataset / "count-a")
        if "Task count-b." in text:  # learnt in iteration 2
            solve = state["iteration"] >= 2
            return (solution_steps if solve else wrong_steps)(dataset / "count-b")
        return solution_steps(HIVE)  # the own held-out task

    with FakeOpenAI("routed", router=route) as fake:
        cfg = _cfg(tmp_path, fake.base_url, [str(dataset)], backend)
        out = runs.run_loop(cfg, "r", _stages(state), thread_mapper(False))
    assert out.ok, [o.error for o in out.outcomes if o.error]

    stage = [tmp_path / f"runs/r/iter-{k}/diagnose" for k in (1, 2)]
    ext = [pd.read_parquet(s / "external_pass_rates.parquet") for s in stage]
    whole = [e[e["capability"] == "*"].iloc[0] for e in ext]
    assert [(w["iteration"], w["eval_set"], w["n_tasks"], w["n_episodes"]) for w in whole] == [
        (1, "acme-bench", 2, 2),
        (2, "acme-bench", 2, 2),
    ]
    assert [w["pass_rate"] for w in whole] == [0.5, 1.0]
    assert all(e["external"].all() for e in ext)
    assert set(ext[0]["capability"]) == {"*", "file-operations"}  # [metadata] category

    # graded by their own tests, recorded as external episodes
    traj = pd.read_parquet(stage[0] / "external_trajectories.parquet")
    assert set(traj["split"]) == {"external"}
    graded = dict(zip(traj["task_id"], traj["passed"], strict=True))
    assert graded == {"count-a": True, "count-b": False}
    log = json.loads(traj.set_index("task_id").loc["count-b", "checks_json"])["log"]
    assert re.search(r"FAILED \S*test_count_is_the_number_of_words", log), log

    # never mixed with the own held-out split: its pass rates and episodes hold only its task
    for s in stage:
        own = pd.read_parquet(s / "pass_rates.parquet")
        assert list(own["capability"]) == ["aggregation"] and list(own["pass_rate"]) == [1.0]
        assert list(pd.read_parquet(s / "eval_trajectories.parquet")["task_id"]) == [
            "fixture-hive-totals"
        ]

    # per iteration in the stage summary and in the report (with its plot)
    summaries = [o.manifest.summary for o in out.outcomes if o.stage == "diagnose"]
    assert [(s["external_tasks"], s["external_pass_rate"]) for s in summaries] == [
        (2, 0.5),
        (2, 1.0),
    ]
    assert summaries[1]["external_pass_rates"] == {"acme-bench": 1.0}
    report = (stage[1] / "report.md").read_text()
    section = report[report.index("## External held-out eval") :]
    assert "| 1 | acme-bench | 2 | 2 | 1 | 50% [" in section  # + its 95 % Wilson interval
    assert "| 2 | acme-bench | 2 | 2 | 2 | 100% [" in section
    assert (stage[1] / "external_pass_rates.png").read_bytes().startswith(b"\x89PNG")


@needs_bwrap
def test_an_external_task_bubblewrap_cannot_run_stops_diagnose_before_any_episode(tmp_path):
    foreign = _foreign()
    dataset = tmp_path / "bench"
    foreign.write_foreign_task(dataset / "ok")
    foreign.write_foreign_task(
        dataset / "needs-build", "needs-build", dockerfile=foreign.DOCKERFILE_BUILD, root="/app"
    )
    with FakeOpenAI("routed", router=lambda m: "no") as fake:
        cfg = _cfg(tmp_path, fake.base_url, [str(dataset)])
        out = runs.run_loop(cfg, "r", _stages({"iteration": 0}), thread_mapper(False))
        assert not fake.requests  # no episode ran, own or external
    assert not out.ok
    [failed] = [o for o in out.outcomes if o.status == "failed"]
    assert failed.stage == "diagnose"
    assert "diagnose.eval_tasks: 1 external task(s) cannot run here" in failed.error
    assert "task needs-build" in failed.error and "cannot run on bubblewrap" in failed.error


@needs_bwrap
def test_a_baseline_rolls_the_base_policy_out_on_the_same_tasks_in_iteration_1_only(tmp_path):
    """diagnose.baseline: iteration 1's rollout stage rolls out the base policy on the same own
    held-out and external tasks before train (it is the policy served then: no second serving
    of the base weights); diagnose carries the episodes (baseline_trajectories) and figures
    (summary `baseline`) into its artifacts; later iterations don't repeat it. The fake policy
    here fails count-b, so the figures are 2/3 held-in."""
    dataset = _dataset(tmp_path)
    state = {"iteration": 0}

    def route(messages):
        text = first_user_text(messages)
        if "Task count-a." in text:
            return solution_steps(dataset / "count-a")
        if "Task count-b." in text:
            return wrong_steps(dataset / "count-b")
        return solution_steps(HIVE)

    with FakeOpenAI("routed", router=route) as fake:
        state["fake"] = fake
        cfg = _cfg(tmp_path, fake.base_url, [str(dataset)])
        cfg = cfg.model_copy(
            update={"diagnose": cfg.diagnose.model_copy(update={"baseline": True})}
        )
        out = runs.run_loop(cfg, "r", _stages(state, with_rollout=True), thread_mapper(False))
    assert out.ok, [o.error for o in out.outcomes if o.error]
    # row 0's three episodes ran before iteration 1's train; nothing more before iteration 2's
    first, second = state["requests_at_train"]
    assert first > 0 and second > first  # iteration 1's diagnose ran in between
    rolled = pd.read_parquet(tmp_path / "runs/r/iter-1/rollout/baseline_trajectories.parquet")
    assert (
        len(rolled) == 3
        and not (tmp_path / "runs/r/iter-2/rollout/baseline_trajectories.parquet").exists()
    )

    one, two = (tmp_path / f"runs/r/iter-{k}/diagnose" for k in (1, 2))
    base = pd.read_parquet(one / "baseline_trajectories.parquet")
    assert sorted(zip(base["split"], base["task_id"], base["passed"], strict=True)) == [
        ("eval", "fixture-hive-totals", True),
        ("external", "count-a", True),
        ("external", "count-b", False),
    ]
    assert not (two / "baseline_trajectories.parquet").exists()
    summaries = [o.manifest.summary for o in out.outcomes if o.stage == "diagnose"]
    figures = summaries[0]["baseline"]
    assert figures["heldout"] == {"aggregation": [1, 1]}
    assert (figures["heldout_passed"], figures["heldout_episodes"]) == (1, 1)
    assert (figures["external_tasks"], figures["external_passed"]) == (2, 1)
    assert figures["external_pass_rate"] == 0.5 and figures["external_pass_rates"] == {
        "acme-bench": 0.5
    }
    assert "baseline" not in summaries[1]
    # the iterations' own figures are untouched by it
    assert [(s["external_tasks"], s["external_pass_rate"]) for s in summaries] == [
        (2, 0.5),
        (2, 0.5),
    ]


@needs_bwrap
def test_a_baseline_without_iteration_1s_rollout_stage_is_an_error(tmp_path):
    """Row 0 is graded by iteration 1's rollout stage: a pipeline without it cannot have row 0,
    and diagnose says so instead of leaving the row out."""
    dataset = _dataset(tmp_path)
    with FakeOpenAI("routed", router=lambda m: "no") as fake:
        cfg = _cfg(tmp_path, fake.base_url, [str(dataset)])
        cfg = cfg.model_copy(
            update={"diagnose": cfg.diagnose.model_copy(update={"baseline": True})}
        )
        out = runs.run_loop(cfg, "r", _stages({}), thread_mapper(False))
        assert not fake.requests
    [failed] = [o for o in out.outcomes if o.status == "failed"]
    assert failed.stage == "diagnose"
    assert "iteration 1's rollout stage grades row 0" in failed.error
    assert "has no baseline_trajectories" in failed.error and "--force rollout" in failed.error
