"""`llm.reload`: how a running vLLM endpoint gets each iteration's checkpoint, through the engine.

A stand-in train stage writes CHECKPOINT rows (a LoRA adapter or full weights); a probe stage asks
`serve_policy` for the policy after its iteration and sends one real chat to a FakeOpenAI that
speaks vLLM's runtime LoRA API and /v1/models `root`."""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

import pyarrow as pa
from doubles.fake_openai import FakeOpenAI

from clawloop.flows import runs
from clawloop.harness.llm import chat, make_client
from clawloop.storage import schemas
from clawloop.storage.artifacts import empty_row
from clawloop.tasks import policy as ag
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageResult, StageSpec

PROBE = pa.schema([("model", pa.string()), ("policy_id", pa.string()), ("note", pa.string())])
BASE = "/models/base-8b"


def _train(kind: str, adapter_base: str = BASE):
    def run(ctx):
        out = Path(ag.local_stage_dir(ctx)) / "model"
        out.mkdir(parents=True, exist_ok=True)
        adapter = ""
        if kind == "lora":
            a = out / "adapter"
            a.mkdir(exist_ok=True)
            (a / "adapter_config.json").write_text(
                json.dumps({"base_model_name_or_path": adapter_base, "r": 16})
            )
            adapter = str(a)
        row = empty_row(
            schemas.CHECKPOINT,
            status="trained",
            checkpoint_path=str(out),
            adapter_path=adapter,
            base_model=BASE,
            kind=kind,
        )
        return StageResult({"checkpoint": (schemas.CHECKPOINT, [row])})

    return StageSpec("train", run, lambda c, k: {"kind": kind}, previous=("train",))


def _probe(ctx):
    with ag.serve_policy(ctx, ctx.iteration) as (policy, note):
        ep = policy.endpoint()
        chat(make_client(ep), ep.model, [{"role": "user", "content": "hi"}], max_tokens=4)
    row = {"model": policy.model, "policy_id": policy.id, "note": note}
    return StageResult({"probe": (PROBE, [row])}, summary={"policy": note})


def _stages(kind: str, **kw):
    return [
        _train(kind, **kw),
        StageSpec("probe", _probe, lambda c, k: {}, upstream=("train",)),
    ]


def _cfg(tmp_path, fake, reload, iterations=2):
    return parse_config(
        {
            "iterations": iterations,
            "storage": {"root": str(tmp_path / "runs")},
            "llm": {"base_url": fake.base_url, "model": "policy", "reload": reload},
            # reload: lora is only accepted with unmerged LoRA adapters (checked at load)
            "train": {"base_model": BASE}
            | ({"lora": True, "merge_lora": False} if reload == "lora" else {}),
        }
    )


def _probes(out):
    return [o.manifest.summary["policy"] for o in out.outcomes if o.stage == "probe"]


def test_lora_loads_each_iterations_adapter_and_rolls_out_with_it(tmp_path):
    with FakeOpenAI("chatty", model="policy") as fake:
        cfg = _cfg(tmp_path, fake, "lora")
        out = runs.run_loop(cfg, "r", _stages("lora"), thread_mapper(False))
        assert out.ok, [o.error for o in out.outcomes if o.error]
        adapters = [str(tmp_path / f"runs/r/iter-{k}/train/model/adapter") for k in (1, 2)]
        assert fake.lora_loads == [
            {"lora_name": "clawloop-r-iter-1", "lora_path": adapters[0], "load_inplace": True},
            {"lora_name": "clawloop-r-iter-2", "lora_path": adapters[1], "load_inplace": True},
        ]
        chats = [b["model"] for b in fake.requests]
        assert chats == ["clawloop-r-iter-1", "clawloop-r-iter-2"]
        assert "LoRA adapter of iteration 2" in _probes(out)[1]
        assert all(b.get("load_inplace") is True for b in fake.lora_loads)
        # a forced re-run loads the adapter again, in place: the server may hold an older one of
        # that name (a re-run train stage writes new weights to the same name and path)
        runs.rerun_stage(cfg, "r", 2, "probe", _stages("lora"), thread_mapper(False))
        assert len(fake.lora_loads) == 3 and fake.lora_loads[-1]["load_inplace"] is True
        assert fake.requests[-1]["model"] == "clawloop-r-iter-2"


def test_lora_load_failure_says_what_where_and_what_to_do(tmp_path):
    with FakeOpenAI("chatty", model="policy", lora_load_status=404) as fake:
        out = runs.run_loop(
            _cfg(tmp_path, fake, "lora", 1), "r", _stages("lora"), thread_mapper(False)
        )
    bad = out.outcomes[-1]
    assert bad.stage == "probe" and bad.status == "failed" and not fake.requests
    assert "clawloop-r-iter-1" in bad.error and "/v1/load_lora_adapter" in bad.error
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True" in bad.error and "--enable-lora" in bad.error


def test_lora_refuses_full_weights_and_adapters_not_on_the_served_base(tmp_path):
    with FakeOpenAI("chatty", model="policy") as fake:
        full = runs.run_loop(
            _cfg(tmp_path / "a", fake, "lora", 1), "r", _stages("full"), thread_mapper(False)
        )
        merged = runs.run_loop(
            _cfg(tmp_path / "b", fake, "lora", 1),
            "r",
            _stages("lora", adapter_base="/runs/r/iter-0/train/model/sft/model"),
            thread_mapper(False),
        )
    assert "set train.lora: true" in full.outcomes[-1].error
    assert "train.merge_lora: false" in merged.outcomes[-1].error
    assert not fake.lora_loads and not fake.requests


def test_none_keeps_the_old_weights_and_says_how_to_restart(tmp_path, caplog):
    with FakeOpenAI("chatty", model="policy") as fake, caplog.at_level(logging.WARNING):
        out = runs.run_loop(
            _cfg(tmp_path, fake, "none", 1), "r", _stages("full"), thread_mapper(False)
        )
    assert out.ok and fake.requests[-1]["model"] == "policy" and not fake.lora_loads
    assert _probes(out)[0].startswith("policy: STALE")
    ckpt = str(tmp_path / "runs/r/iter-1/train/model")
    warning = next(r.getMessage() for r in caplog.records if "OLD weights" in r.getMessage())
    assert f"vllm serve {ckpt} --served-model-name policy --enable-auto-tool-choice" in warning
    assert "clawloop run --run-id r" in warning


def test_restart_waits_for_the_server_to_serve_the_checkpoint(tmp_path):
    ckpt = str(tmp_path / "runs/r/iter-1/train/model")
    with FakeOpenAI("chatty", model="policy", served_root=BASE) as fake:
        stale = runs.run_loop(
            _cfg(tmp_path, fake, "restart", 1), "r", _stages("full"), thread_mapper(False)
        )
        assert stale.outcomes[-1].status == "failed" and not fake.requests
        assert f"serves 'policy' from {BASE}" in stale.outcomes[-1].error
        assert f"vllm serve {ckpt}" in stale.outcomes[-1].error
        fake.served_root = ckpt  # the user restarted vLLM on the checkpoint, then resumes
        url = fake.base_url
        resumed = runs.run_loop(
            _cfg(tmp_path, fake, "restart", 1), "r", _stages("full"), thread_mapper(False)
        )
    assert [o.status for o in resumed.outcomes] == ["skipped", "ran"]
    assert fake.requests[-1]["model"] == "policy"
    assert (
        _probes(resumed)[0] == f"policy: iteration 1's checkpoint {ckpt}, served by {url} as policy"
    )


def _timeout_probe(ctx):
    """The request timeouts of the policy before this iteration's train (the base model) and
    after it (the trained checkpoint)."""
    timeouts = []
    for after in (ctx.iteration - 1, ctx.iteration):
        with ag.serve_policy(ctx, after) as (policy, note):
            timeouts.append([policy.request_timeout_s, policy.endpoint().request_timeout_s])
    row = {"model": policy.model, "policy_id": policy.id, "note": note}
    return StageResult({"probe": (PROBE, [row])}, summary={"timeouts": timeouts})


def test_llm_request_timeout_reaches_every_policy_the_stages_are_given(tmp_path, monkeypatch):
    """llm.request_timeout_s is the policy's per-request limit whichever way it is served: the
    base model at an endpoint, each llm.reload mode after training, and the local server."""

    @contextlib.contextmanager
    def local_server(model_dir):
        yield "http://127.0.0.1:9/v1"

    monkeypatch.setattr(ag, "local_policy_server", local_server)
    seen = {}
    for reload, kind in (
        ("none", "full"),
        ("lora", "lora"),
        ("restart", "full"),
        ("local", "full"),
    ):
        ckpt = str(tmp_path / reload / "runs/r/iter-1/train/model")
        with FakeOpenAI("chatty", model="policy", served_root=ckpt) as fake:
            data = _cfg(tmp_path / reload, fake, reload if reload != "local" else "none", 1)
            data = data.model_dump(mode="json")
            data["llm"]["request_timeout_s"] = 900.0
            if reload == "local":
                data["llm"]["base_url"] = None
                data["train"]["base_model"] = None
            stages = [
                _train(kind),
                StageSpec("probe", _timeout_probe, lambda c, k: {}, upstream=("train",)),
            ]
            out = runs.run_loop(parse_config(data), "r", stages, thread_mapper(False))
            assert out.ok, [o.error for o in out.outcomes if o.error]
        seen[reload] = [o.manifest.summary["timeouts"] for o in out.outcomes if o.stage == "probe"]
    assert seen == {mode: [[[900.0, 900.0]] * 2] for mode in ("none", "lora", "restart", "local")}
