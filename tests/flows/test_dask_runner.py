"""execution.runner: dask runs forge and verify's per-item Prefect tasks in the worker processes of
a local Dask cluster (2 workers), through the real stage flows, and writes the same rows as the
thread pool; a bad runner value, or ray without prefect-ray, is refused with the field and fix."""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import sys
import threading

import pytest
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from clawloop.storage import artifacts, fs
from clawloop.tasks.config import ConfigError, parse_config

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


# ---- config: refused with the field and the fix (no Prefect, no cluster) -------------------


def test_a_runner_that_does_not_exist_is_refused_naming_the_choices():
    with pytest.raises(ConfigError) as err:
        parse_config({"execution": {"runner": "spark"}})
    text = str(err.value)
    assert "execution.runner" in text and "'spark'" in text
    assert "'threads', 'dask' or 'ray'" in text


def test_ray_without_prefect_ray_is_refused_with_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "prefect_ray", None)  # as if the extra were not installed
    with pytest.raises(ConfigError) as err:
        parse_config({"execution": {"runner": "ray"}})
    text = str(err.value)
    assert "execution.runner" in text and "prefect-ray" in text and "clawloop[ray]" in text


def test_an_address_needs_a_cluster_runner_and_threads_stay_the_default():
    with pytest.raises(
        ConfigError, match=r"execution: address tcp://sched:8786 .* runner is threads"
    ):
        parse_config({"execution": {"address": "tcp://sched:8786"}})
    cfg = parse_config({})
    assert cfg.execution.runner == "threads" and cfg.execution.address is None
    ok = parse_config({"execution": {"runner": "dask", "address": "tcp://sched:8786"}})
    assert ok.execution.address == "tcp://sched:8786"


def test_the_runner_is_in_no_stage_cache_key():
    from clawloop.flows.pipeline import STAGES

    threads = parse_config({})
    dask = parse_config({"execution": {"runner": "dask", "processes": 3}})
    for spec in STAGES:
        assert spec.config_slice(threads, 1) == spec.config_slice(dask, 1), spec.name


def test_stage_runners_threads_by_default_dask_sized_from_the_stage_workers():
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    from clawloop.flows.pipeline import local_cluster_size, task_runner

    threads = parse_config({}).execution
    dask = parse_config({"execution": {"runner": "dask"}}).execution
    assert isinstance(task_runner("forge", threads, 4), ThreadPoolTaskRunner)
    assert isinstance(task_runner("synthesize", dask, 4), ThreadPoolTaskRunner)  # not per-item
    runner = task_runner("verify", dask, 5)
    assert isinstance(runner, DaskTaskRunner)
    procs, each = local_cluster_size(5, None)
    assert runner.cluster_kwargs["n_workers"] == procs and procs * each >= 5
    assert local_cluster_size(5, 2) == (2, 3) and local_cluster_size(1, 8) == (1, 1)
    joined = parse_config({"execution": {"runner": "dask", "address": "tcp://s:8786"}}).execution
    assert task_runner("rollout", joined, 8).address == "tcp://s:8786"


# ---- shipping shared arguments to worker processes (no Prefect) -----------------------------


def test_shared_values_with_locks_and_clients_ship_and_land_once_per_process(monkeypatch):
    from collections import OrderedDict

    import openai

    from clawloop.harness.llm import LLMEndpoint, circuit_breaker, endpoint_chat
    from clawloop.tasks import mapping

    chat = circuit_breaker(endpoint_chat(LLMEndpoint("http://127.0.0.1:9/v1", "m")))
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    lock = threading.Lock()
    out = mapping.ship("t", {"chat": chat, "client": client, "retries": 3, "lock": lock})
    assert out["retries"] == 3
    assert all(isinstance(out[k], mapping.Shipped) for k in ("chat", "client", "lock"))
    assert out["client"].unwrap() is client  # in the flow's own process: the value itself
    # Pickled on the way (a scheduler unpickles and pickles it again), it stays the bytes ...
    travelled = {
        k: pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(v)))) for k, v in out.items()
    }
    assert travelled["client"] == out["client"]
    # ... and a fresh process (nothing landed yet) rebuilds each value once, then shares it.
    monkeypatch.setattr(mapping, "_LANDED", OrderedDict())
    landed = travelled["client"].unwrap()
    assert isinstance(landed, openai.OpenAI) and landed is not client
    assert str(landed.base_url) == str(client.base_url) and landed.max_retries == 0
    assert travelled["client"].unwrap() is landed
    assert callable(travelled["chat"].unwrap()) and travelled["chat"].unwrap() is not chat
    fresh = travelled["lock"].unwrap()
    assert isinstance(fresh, type(lock)) and fresh is not lock


def test_a_shared_value_that_cannot_travel_names_the_task_and_argument():
    from clawloop.tasks.mapping import UnshippableArgument, ship

    with socket.socket() as sock, pytest.raises(UnshippableArgument) as err:
        ship("forge-one", {"sandbox": sock})
    assert "forge-one" in str(err.value) and "'sandbox'" in str(err.value)


def test_an_infra_fault_keeps_its_row_across_processes():
    from clawloop.tasks.mapping import InfraFault

    back = pickle.loads(pickle.dumps(InfraFault("endpoint down", {"task_id": "t1"})))
    assert str(back) == "endpoint down" and back.row == {"task_id": "t1"}


# ---- through Prefect on a local Dask cluster ------------------------------------------------


@task(name="where", cache_policy=NO_CACHE, persist_result=False)
def _where(item: int, guard: threading.Lock, tag: str) -> tuple[int, int]:
    with guard:  # a fresh lock in the worker process, shared by its threads
        return item * 10, os.getpid()


@pytest.mark.prefect
def test_mapped_items_run_in_two_dask_worker_processes_and_come_back_in_order(harness):
    from clawloop.flows.pipeline import task_runner
    from clawloop.tasks.mapping import prefect_mapper

    execution = parse_config({"execution": {"runner": "dask"}}).execution

    @flow(name="dask-map", persist_result=False)
    def mapped() -> list[tuple[int, int]]:
        return prefect_mapper(
            _where, list(range(8)), lambda i, e: (-1, 0), workers=2, guard=threading.Lock(), tag="x"
        )

    out = mapped.with_options(task_runner=task_runner("forge", execution, 2))()
    assert [v for v, _ in out] == [i * 10 for i in range(8)]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def _rows(root: str, run_id: str, stage: str, table: str) -> list[dict]:
    return artifacts.read_rows(fs.stage_url(root, run_id, 1, stage), table)


@pytest.mark.prefect
@pytest.mark.slow
@needs_bwrap
def test_forge_and_verify_on_a_two_worker_dask_cluster_write_the_threads_rows(
    harness, tmp_path, monkeypatch
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName
    from prefect_dask import DaskTaskRunner

    from clawloop.flows import pipeline
    from clawloop.tasks.verify import batches

    made = []
    real = pipeline.task_runner
    monkeypatch.setattr(
        pipeline, "task_runner", lambda *a: made.append(real(*a)) or made[-1], raising=True
    )

    def run(runner: str) -> str:
        root = str(tmp_path / runner)
        config = parse_config(
            {
                "iterations": 1,
                "storage": {"root": root},
                "sandbox": {"backend": "bwrap"},
                "synthesize": {"n_train": 3, "n_eval": 1, "domain": {"share": 0.0}},
                "forge": {"workers": 2},
                "verify": {"workers": 2},
                "execution": {"runner": runner},
            }
        ).model_dump(mode="json")
        for name in ("synthesize", "forge", "verify"):
            spec = pipeline.stage_spec(name)
            out = pipeline._call_stage(spec, "same", 1, config, False, 2)
            assert out.status == "ran", (runner, name, out.error[-2000:])
        return root

    threads, dask = run("threads"), run("dask")
    assert [type(r).__name__ for r in made[3:]] == [
        "ThreadPoolTaskRunner",
        "DaskTaskRunner",
        "DaskTaskRunner",
    ]
    assert all(
        r.cluster_kwargs["n_workers"] == 2 for r in made[4:] if isinstance(r, DaskTaskRunner)
    )
    for stage, table in (("forge", "tasks"), ("verify", "checks"), ("verify", "verdicts")):
        want, got = _rows(threads, "same", stage, table), _rows(dask, "same", stage, table)
        assert want and got == want, (stage, table)
    assert any(v["kept"] for v in _rows(dask, "same", "verify", "verdicts"))
    # verify maps batches of forged tasks (one task run each, named verify-<first id>+<more>),
    # the same batches under both runners
    forged = _rows(dask, "same", "forge", "tasks")
    groups = batches(forged, parse_config({}).verify.batch, 2)
    assert len(forged) == 4 and len(groups) == 2, [len(g) for g in groups]
    with get_client(sync_client=True) as client:  # the workers reported their task runs
        runs = client.read_task_runs(
            task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="verify-"))
        )
    assert sum(r.state_type.value == "COMPLETED" for r in runs) == 2 * len(groups)
