"""LLM-written generators in the synthesize stage, through the engine (no Prefect): a FakeOpenAI
writer over real HTTP, guidance patterns in the prompt, the built-in library (said so) when there is
no endpoint, and the repair loop: a generator that forge rejects goes back to the writer with the
error in the next iteration's synthesize."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.storage import artifacts, fs
from clawloop.synthesis.synthesize import llm_picks
from clawloop.tasks.config import parse_config
from clawloop.tasks.llm_source import writer_guidance as _writer_guidance
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageResult, StageSpec
from clawloop.tasks.synthesize import config_slice as _synthesize_slice

PATTERN = "[merge] agent skipped the precedence rule when two sources disagree"
_WANT = re.compile(r"exactly this metadata:\nGENERATOR = (\{.*?\})\n", re.DOTALL)


class GeneratorWriter(FakeOpenAI):
    """Answers a generator-writing prompt with the built-in generator for the requested spec,
    marked so it differs from the built-in candidate it replaces."""

    def __init__(self, broken_first: bool = False) -> None:
        super().__init__("chatty", model="fake-writer")
        self.broken_first = broken_first  # first writes raise in build(); repairs are good

    def respond(self, body):
        resp = super().respond(body)
        from clawloop.synthesis import library

        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        want = json.loads(_WANT.search(user).group(1))
        code = library.render_generator(
            want["capability"],
            want["domain"],
            want["multihop"],
            want["dirtiness"],
            want["output_format"],
        )
        code += "\nWRITTEN_BY = 'the synthesis LLM'\n"
        repairing = any(m["role"] == "assistant" for m in body["messages"])
        if self.broken_first and not repairing:
            code += "\n\ndef build(seed):\n    raise RuntimeError('planted bug in build')\n"
        resp["choices"][0]["message"] = {
            "role": "assistant",
            "content": f"```python\n{code}```",
        }
        return resp


def _synth_only():
    return [s for s in STAGES if s.name == "synthesize"]


def _guidance_stage():
    """A stand-in diagnose: writes the guidance.json the next synthesize reads."""

    def run(ctx):
        guidance = {
            "capability_weights": {},
            "patterns": {},
            "pattern_text": PATTERN,
        }
        return StageResult({}, files={"guidance.json": json.dumps(guidance).encode()})

    return StageSpec("diagnose", run, lambda c, k: {}, upstream=("synthesize",))


def _writer_cfg(tmp_path: Path, fake: FakeOpenAI) -> object:
    """K=2 over bwrap, half the train candidates written by `fake` (the policy endpoint)."""
    return parse_config(
        {
            "iterations": 2,
            "storage": {"root": str(tmp_path)},
            "sandbox": {"backend": "bwrap"},
            "llm": {"base_url": fake.base_url, "model": "fake-writer"},
            "synthesize": {
                "n_train": 2,
                "n_eval": 1,
                "llm": {"share": 0.5},
                "domain": {"share": 0},
            },
        }
    )


def _summary(root: Path, run_id: str, k: int) -> dict:
    from clawloop.storage.manifest import read_manifest

    return read_manifest(fs.stage_url(str(root), run_id, k, "synthesize")).summary


def test_picks_are_a_deterministic_fraction_of_train_rows():
    rows = [{"task_id": f"t{i}", "split": "train" if i % 3 else "eval"} for i in range(12)]
    picks = llm_picks(rows, 0.25, 0, 1)
    assert picks == llm_picks(rows, 0.25, 0, 1) and len(picks) == 2  # ceil(0.25 * 8)
    assert all(rows[i]["split"] == "train" for i in picks)
    assert llm_picks(rows, 0.01, 0, 1) and not llm_picks(rows, 0.0, 0, 1)
    assert len(llm_picks(rows, 1.0, 0, 1)) == 8 and llm_picks(rows, 0.25, 0, 2) != picks


def test_guidance_pattern_text_reaches_every_capability_without_its_own_patterns():
    g = _writer_guidance(
        {"capability_weights": {"merge": 0.7, "audit": 0.3}, "patterns": {"audit": "A"}}
        | {"pattern_text": "ALL"},
        {"tally"},
    )
    assert g == {"patterns": {"audit": "A", "merge": "ALL", "tally": "ALL"}}
    assert _writer_guidance(None, {"tally"}) == {}


def test_the_knob_is_in_the_cache_key(tmp_path):
    base = {"storage": {"root": str(tmp_path)}}
    off = parse_config(base)
    on = parse_config({**base, "synthesize": {"llm": {"share": 0.5}}})
    other = parse_config(
        {**base, "synthesize": {"llm": {"share": 0.5}}, "llm": {"base_url": "http://x/v1"}}
    )
    keys = {json.dumps(_synthesize_slice(c, 1), sort_keys=True) for c in (off, on, other)}
    assert len(keys) == 3


def test_without_an_endpoint_synthesis_uses_the_builtin_library_and_says_so(tmp_path):
    cfg = parse_config(
        {
            "storage": {"root": str(tmp_path)},
            "synthesize": {
                "n_train": 4,
                "n_eval": 1,
                "llm": {"share": 0.5},
                "domain": {"share": 0},
            },
        }
    )
    out = runs.run_loop(cfg, "r", _synth_only(), thread_mapper(False))
    assert out.ok, out.outcomes[-1].error
    rows = artifacts.read_rows(fs.stage_url(str(tmp_path), "r", 1, "synthesize"), "candidates")
    assert {r["origin"] for r in rows} == {"builtin"}
    s = _summary(tmp_path, "r", 1)
    assert s["synthesis"].startswith("built-in library: no generator-writer endpoint")
    assert s["llm_written"] == 0 and s["llm_asked"] == 2


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_the_policy_endpoint_writes_generators_that_are_forged_and_verified(tmp_path):
    with GeneratorWriter() as fake:
        cfg = _writer_cfg(tmp_path, fake)
        stages = [*_synth_only(), _guidance_stage()]
        first = runs.run_loop(cfg, "r", stages, thread_mapper(False))
        assert first.ok, [o.error for o in first.outcomes if o.error]
        n_requests = len(fake.requests)
        again = runs.run_loop(cfg, "r", stages, thread_mapper(False))
    assert {o.status for o in again.outcomes} == {"skipped"} and len(fake.requests) == n_requests
    for k in (1, 2):
        rows = artifacts.read_rows(fs.stage_url(str(tmp_path), "r", k, "synthesize"), "candidates")
        by_origin = {}
        for r in rows:
            by_origin.setdefault(r["origin"], []).append(r)
        assert len(by_origin["llm:fake-writer"]) == 1 and len(by_origin["builtin"]) == 2
        written = by_origin["llm:fake-writer"][0]
        assert written["split"] == "train" and "WRITTEN_BY" in written["generator_code"]
        s = _summary(tmp_path, "r", k)
        assert s["llm_written"] == 1 and s["synthesis"].startswith("LLM writer, the policy")
    # iteration 1 had no diagnosis; iteration 2's prompt carries its pattern text
    prompts = [m["content"] for b in fake.requests for m in b["messages"] if m["role"] == "user"]
    assert sum(PATTERN in p for p in prompts) == 1
    assert all(b["model"] == "fake-writer" for b in fake.requests)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_generator_forge_rejects_is_repaired_in_the_next_iteration(tmp_path):
    with GeneratorWriter(broken_first=True) as fake:
        cfg = _writer_cfg(tmp_path, fake)
        stages = [s for s in STAGES if s.name in ("synthesize", "forge", "verify")]
        out = runs.run_loop(cfg, "r", stages, thread_mapper(False))
        assert out.ok, [o.error for o in out.outcomes if o.error]
        repair_prompts = [
            b for b in fake.requests if any(m["role"] == "assistant" for m in b["messages"])
        ]

    def rows(k, stage, table):
        return artifacts.read_rows(fs.stage_url(str(tmp_path), "r", k, stage), table)

    # iteration 1: written once, forged once (by forge), rejected with the planted bug
    written = [r for r in rows(1, "synthesize", "candidates") if r["origin"] == "llm:fake-writer"]
    assert len(written) == 1
    forged = {r["task_id"]: r for r in rows(1, "forge", "tasks")}
    assert "planted bug in build" in forged[written[0]["task_id"]]["error"]
    # iteration 2: the writer saw its code and forge's error, and the repair forged and verified
    assert len(repair_prompts) == 1
    assert "planted bug in build" in repair_prompts[0]["messages"][-1]["content"]
    repaired = [r for r in rows(2, "synthesize", "candidates") if ":repair:" in r["origin"]]
    assert [r["origin"] for r in repaired] == ["llm:fake-writer:repair:1"]
    kept = {v["task_id"]: v["kept"] for v in rows(2, "verify", "verdicts")}
    assert kept[repaired[0]["task_id"]] is True
    assert _summary(tmp_path, "r", 2)["llm_repaired"] == 1
