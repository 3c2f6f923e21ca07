"""SkillSynth in the synthesize stage, through the engine (no Prefect): skill folders -> graph
(cached per corpus) -> sampled paths -> Planner / Constructor / judge over real HTTP -> a
`skill_graph` candidate that forge and verify keep; visit counts carried to the next iteration;
the source off (and said so) without skill folders or an endpoint; a dead endpoint fails the stage
instead of committing an empty source."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI
from doubles.skillsynth import generator, plan_for, router_for

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.storage import artifacts, fs
from clawloop.storage.manifest import read_manifest
from clawloop.synthesis.skillgraph.weights import failure_weights
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.synthesize import config_slice

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

SKILLS = Path(__file__).resolve().parents[1] / "fixtures" / "skills"
PATH = ["pdf-to-markdown", "markdown-to-html"]  # the fixture corpus's one path of two skills


def _cfg(tmp_path: Path, base_url: str | None, **skills) -> object:
    return parse_config(
        {
            "iterations": 2,
            "storage": {"root": str(tmp_path / "runs")},
            "sandbox": {"backend": "bwrap"},
            "llm": {"base_url": base_url, "model": "fake"},
            "synthesize": {
                "n_train": 4,
                "n_eval": 1,
                "domain": {"share": 0},
                "skills": {
                    "share": 0.5,
                    "dirs": [str(SKILLS)],
                    "scenarios": "heuristic",
                    "path_len": [2, 2],
                    **skills,
                },
                "cache_dir": str(tmp_path / "cache"),
            },
        }  # fmt: skip
    )


def _rows(tmp_path: Path, k: int, stage: str, table: str) -> list[dict]:
    return artifacts.read_rows(fs.stage_url(str(tmp_path / "runs"), "r", k, stage), table)


def _summary(tmp_path: Path, k: int) -> dict:
    return read_manifest(fs.stage_url(str(tmp_path / "runs"), "r", k, "synthesize")).summary


def _stages(*names: str) -> list:
    return [s for s in STAGES if s.name in names]


def test_skill_graph_tasks_are_made_forged_and_kept_and_visits_carry_over(tmp_path: Path) -> None:
    route = router_for(lambda n: generator(asks=True), plan_for(PATH))
    with FakeOpenAI("routed", router=route, model="fake") as fake:
        cfg = _cfg(tmp_path, fake.base_url)
        out = runs.run_loop(
            cfg, "r", _stages("synthesize", "forge", "verify"), thread_mapper(False)
        )
    assert out.ok, [o.error for o in out.outcomes if o.error]
    for k in (1, 2):
        cands = _rows(tmp_path, k, "synthesize", "candidates")
        (task,) = [c for c in cands if c["origin"] == "skill_graph"]
        assert [s["skill"] for s in json.loads(task["skill_path"])["steps"]] == PATH
        assert all(c["skill_path"] is None for c in cands if c["origin"] != "skill_graph")
        assert len(cands) == 5 and task["split"] == "train"
        verdicts = {v["task_id"]: v for v in _rows(tmp_path, k, "verify", "verdicts")}
        assert verdicts[task["task_id"]]["kept"], verdicts[task["task_id"]]["reason"]
        (path,) = _rows(tmp_path, k, "synthesize", "skill_paths")
        assert path["kept"] and path["task_id"] == task["task_id"] and path["attempts"] == 1
        (plan,) = _rows(tmp_path, k, "synthesize", "skill_plans")
        assert json.loads(plan["plan"])["domain"] == "rain_gauges"
        (attempt,) = _rows(tmp_path, k, "synthesize", "skill_attempts")
        assert attempt["stage"] == "kept" and attempt["passed"]
        s = _summary(tmp_path, k)
        assert s["skill_graph"] == 1 and s["skill_graph_asked"] == 2
        assert s["skill_graph_cached"] is (k == 2)  # built once for the corpus, then read back
    visits = [
        {(r["kind"], r["id"]): r["count"] for r in _rows(tmp_path, k, "synthesize", "skill_visits")}
        for k in (1, 2)
    ]
    for skill in PATH:  # ν grows across iterations: iteration 2 started from iteration 1's counts
        assert visits[1][("skill", skill)] > visits[0][("skill", skill)] > 0
    assert visits[1][("meta", "paths")] == 2 * visits[0][("meta", "paths")]


def test_a_corpus_edit_changes_the_cache_key(tmp_path: Path) -> None:
    corpus = tmp_path / "skills"
    shutil.copytree(SKILLS, corpus)
    cfg = _cfg(tmp_path, "http://127.0.0.1:9/v1", dirs=[str(corpus)])
    before = json.dumps(config_slice(cfg, 1), sort_keys=True)
    (corpus / "pdf-to-markdown" / "SKILL.md").write_text(
        (corpus / "pdf-to-markdown" / "SKILL.md").read_text() + "\nAlso handles scanned pages.\n"
    )
    assert json.dumps(config_slice(cfg, 1), sort_keys=True) != before


def test_the_source_is_off_and_says_why_without_folders_or_an_endpoint(tmp_path: Path) -> None:
    for cfg, why in (
        (_cfg(tmp_path / "a", None, dirs=[]), "no synthesize.skills.dirs"),
        (_cfg(tmp_path / "b", None), "SkillSynth needs an LLM"),
    ):
        root = Path(cfg.storage.root).parent
        out = runs.run_loop(cfg, "r", _stages("synthesize"), thread_mapper(False))
        assert out.ok, [o.error for o in out.outcomes if o.error]
        s = _summary(root, 1)
        assert s["skill_graph"] == 0 and why in s["skill_graph_note"]
        assert {c["origin"] for c in _rows(root, 1, "synthesize", "candidates")} == {"builtin"}


def test_an_endpoint_that_stops_answering_fails_the_stage_not_an_empty_source(tmp_path) -> None:
    with FakeOpenAI("drop", model="fake") as fake:  # /v1/models answers, chat drops
        cfg = _cfg(tmp_path, fake.base_url)
        out = runs.run_loop(cfg, "r", _stages("synthesize"), thread_mapper(False))
    (bad,) = [o for o in out.outcomes if o.status == "failed"]
    assert bad.stage == "synthesize" and "infrastructure faults" in bad.error
    assert "LLM fault in the Planner (connection)" in bad.error
    assert read_manifest(fs.stage_url(str(tmp_path / "runs"), "r", 1, "synthesize")) is None


def test_skills_whose_tasks_fail_are_weighted_up() -> None:
    path = json.dumps({"steps": [{"skill": "a"}, {"skill": "b"}]})
    cands = [{"task_id": "t1", "skill_path": path}, {"task_id": "t2", "skill_path": None}]
    trajs = [
        {"task_id": "t1", "passed": False, "end_reason": "finished"},
        {"task_id": "t1", "passed": True, "end_reason": "finished"},
        {"task_id": "t1", "passed": False, "end_reason": "server_error"},  # not the policy's
        {"task_id": "t2", "passed": False, "end_reason": "finished"},
    ]
    assert failure_weights(cands, trajs) == {"a": 1.5, "b": 1.5}
