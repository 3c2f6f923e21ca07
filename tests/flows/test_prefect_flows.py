"""The Prefect layer over the engine: loop -> iteration -> stage flows, skips, rerun, artifacts."""

from __future__ import annotations

import pyarrow as pa
import pytest
from prefect import task

pytestmark = pytest.mark.prefect

SCHEMA = pa.schema([("task_id", pa.string()), ("score", pa.float64())])


@task(name="bump")
def _bump(row: dict, by: float) -> dict:
    return {**row, "score": row["score"] + by}


def _stages():
    from clawloop.tasks.stage import StageResult, StageSpec

    def make(ctx):
        return StageResult(
            {"items": (SCHEMA, [{"task_id": f"t{i}", "score": float(i)} for i in range(4)])},
            summary={"made": 4},
        )

    def bump(ctx):
        rows = ctx.map(_bump, ctx.rows("synthesize", "items"), lambda r, e: r, workers=2, by=1.0)
        return StageResult({"bumped": (SCHEMA, rows)})

    return (
        StageSpec("synthesize", make, lambda c, k: {"k": k}),
        StageSpec("forge", bump, lambda c, k: {}, upstream=("synthesize",)),
    )


def test_loop_skips_on_resume_reruns_one_stage_and_publishes_artifacts(
    harness, tmp_path, monkeypatch
):
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from clawloop.flows import pipeline
    from clawloop.tasks.config import parse_config

    monkeypatch.setattr(pipeline, "STAGES", _stages())
    config = parse_config({"storage": {"root": str(tmp_path)}, "iterations": 1}).model_dump(
        mode="json"
    )

    first = pipeline.loop_flow("run-a", config)
    assert [(o.iteration, o.stage, o.status) for o in first.outcomes] == [
        (1, "synthesize", "ran"),
        (1, "forge", "ran"),
    ]
    again = pipeline.loop_flow("run-a", config)
    assert {o.status for o in again.outcomes} == {"skipped"}
    out = pipeline.rerun_stage_flow("run-a", 1, "forge", str(tmp_path))
    assert out.status == "ran" and out.rows == {"bumped.parquet": 4}

    async def artifact_keys() -> set[str]:
        async with get_client() as client:
            arts = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_="run-a"))
            )
            return {a.key for a in arts}

    keys = asyncio.run(artifact_keys())
    assert {"run-a-iter-1-synthesize", "run-a-iter-1-forge", "run-a-iter-1-forge-summary"} <= keys


def test_each_stage_flow_runs_as_many_items_at_once_as_its_own_workers():
    from clawloop.flows.pipeline import stage_spec
    from clawloop.tasks.config import parse_config

    cfg = parse_config(
        {
            "synthesize": {"writer": {"workers": 12}},
            "forge": {"workers": 3},
            "rollout": {"workers": 5},
            "diagnose": {"workers": 7},
        }
    )
    got = {n: stage_spec(n).workers(cfg) for n in ("synthesize", "forge", "rollout", "diagnose")}
    assert got == {"synthesize": 12, "forge": 3, "rollout": 5, "diagnose": 7}


def test_resuming_a_run_marks_its_killed_flow_runs_crashed_and_names_runs_by_id(
    harness, tmp_path, monkeypatch
):
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    from clawloop.flows import pipeline
    from clawloop.tasks.config import parse_config

    @flow(name="stand-in")
    def stand_in() -> None:
        return None

    with get_client(sync_client=True) as client:
        ids = {}
        for name in ("killed-run-iter-1", "killed-run-iter-1-forge", "other-run-iter-1"):
            fr = client.create_flow_run(stand_in, name=name)
            client.set_flow_run_state(fr.id, Running(), force=True)
            ids[name] = fr.id
    # what a kill -9 leaves: Running forever. Resuming the run marks its own, not others'.
    monkeypatch.setattr(pipeline, "STAGES", _stages())
    config = parse_config({"storage": {"root": str(tmp_path)}, "iterations": 1}).model_dump(
        mode="json"
    )
    state = pipeline.loop_flow("killed-run", config, return_state=True)
    assert state.is_completed()
    with get_client(sync_client=True) as client:
        states = {n: client.read_flow_run(i).state for n, i in ids.items()}
        loop_run = client.read_flow_run(state.state_details.flow_run_id)
    assert states["killed-run-iter-1"].is_crashed()
    assert "killed-run was resumed" in states["killed-run-iter-1-forge"].message
    assert states["other-run-iter-1"].is_running()
    assert loop_run.name == "killed-run"
