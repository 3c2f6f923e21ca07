"""Infrastructure faults are not results: an endpoint that does not answer, an endpoint that dies
mid-episode, a sandbox engine without its image. The stage fails with what to fix, nothing of it
is committed, and the resumed run re-runs it (and only what follows)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.harness.serve import free_port
from clawloop.storage import fs
from clawloop.storage.manifest import read_manifest, why_incomplete
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
UP_TO_ROLLOUT = [s for s in STAGES if s.name in ("synthesize", "forge", "verify", "rollout")]


def _cfg(tmp_path: Path, base_url: str, **extra) -> object:
    return parse_config(
        {
            "iterations": 1,
            "storage": {"root": str(tmp_path)},
            "sandbox": {"backend": "bwrap"},
            "llm": {"base_url": base_url, "model": "fake-policy"},
            "synthesize": {"n_train": 2, "n_eval": 1},
            "rollout": {"n": 1, "band": [0, 1], "max_turns": 2},
            "train": {"phases": "sft"},  # groups of one: GRPO is refused at load
            **extra,
        }
    )


def _status(summary: runs.RunSummary) -> dict[str, str]:
    return {o.stage: o.status for o in summary.outcomes}


def test_an_unreachable_endpoint_fails_rollout_and_the_resume_reruns_only_rollout(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    cfg = _cfg(tmp_path, url)
    first = runs.run_loop(cfg, "bad-url", UP_TO_ROLLOUT, thread_mapper(False))
    assert not first.ok
    assert _status(first) == {
        "synthesize": "ran",
        "forge": "ran",
        "verify": "ran",
        "rollout": "failed",
    }
    error = first.outcomes[-1].error
    assert f"nothing answers at {url}" in error and "clawloop run --run-id bad-url" in error
    stage = fs.stage_url(str(tmp_path), "bad-url", 1, "rollout")
    assert read_manifest(stage) is None and "failed last time" in why_incomplete(stage)
    with FakeOpenAI("chatty", port=port):
        again = runs.run_loop(cfg, "bad-url", UP_TO_ROLLOUT, thread_mapper(False))
    assert again.ok, [o.error for o in again.outcomes if o.error]
    assert _status(again) == {
        "synthesize": "skipped",
        "forge": "skipped",
        "verify": "skipped",
        "rollout": "ran",
    }


def test_an_endpoint_that_drops_every_chat_is_not_a_rollout_result(tmp_path):
    with FakeOpenAI("drop") as fake:  # /v1/models answers, every chat request is dropped
        cfg = _cfg(tmp_path, fake.base_url)
        out = runs.run_loop(cfg, "r", UP_TO_ROLLOUT, thread_mapper(False))
    assert _status(out)["rollout"] == "failed"
    assert "episodes hit infrastructure faults" in out.outcomes[-1].error
    assert "server_error" in out.outcomes[-1].error
    assert read_manifest(fs.stage_url(str(tmp_path), "r", 1, "rollout")) is None


def test_an_endpoint_serving_another_model_is_named(tmp_path):
    with FakeOpenAI("chatty", model="someone-else") as fake:
        out = runs.run_loop(_cfg(tmp_path, fake.base_url), "r", UP_TO_ROLLOUT, thread_mapper(False))
    assert _status(out)["rollout"] == "failed"
    assert "serves ['someone-else'], not 'fake-policy'" in out.outcomes[-1].error


@pytest.mark.docker
def test_a_missing_sandbox_image_fails_forge_once_with_what_to_do(tmp_path):
    from clawloop.harness.sandbox.backend import docker_available

    if docker_available() is not None:
        pytest.skip(f"needs a Docker engine with the base image: {docker_available()}")
    cfg = _cfg(
        tmp_path,
        "http://127.0.0.1:9/v1",
        sandbox={"backend": "docker", "image": "nope-missing:latest"},
    )
    cfg.synthesize.domain.share = 0  # domain tasks run in the sandbox already at synthesis
    out = runs.run_loop(cfg, "r", UP_TO_ROLLOUT, thread_mapper(False))
    assert _status(out) == {"synthesize": "ran", "forge": "failed"}
    error = out.outcomes[-1].error
    assert "nope-missing:latest" in error and "sandbox.image" in error
    assert read_manifest(fs.stage_url(str(tmp_path), "r", 1, "forge")) is None
