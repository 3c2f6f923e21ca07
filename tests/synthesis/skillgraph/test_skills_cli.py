"""`clawloop skills graph | sample`: the --json shapes and the one-line errors (exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI
from doubles.skillsynth import generator, plan_for, router_for

from clawloop.flows.cli import main
from clawloop.generators.verify import verify_task
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.rows import import_folder

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "skills"
PATH = ["pdf-to-markdown", "markdown-to-html"]  # the fixtures' one chain


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_graph_then_sample_json_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "graph"
    built = _json(capsys, ["skills", "graph", str(FIXTURES), "--out", str(out), "--json"])
    assert main(["skills", "graph", str(FIXTURES), "--out", str(out), "--json"]) == 0
    assert "heuristic scenarios (no LLM endpoint configured" in capsys.readouterr().err
    for key in ("skills", "scenarios", "raw_scenarios", "edges"):
        assert isinstance(built[key], int)
    assert (built["skills"], built["raw_scenarios"], built["edges"]) == (3, 6, 3)
    assert {s["folder"] for s in built["skipped"]} >= {"broken-yaml", "not-a-skill"}
    visits = tmp_path / "visits.parquet"
    argv = [
        "skills",
        "sample",
        str(out),
        "--n",
        "4",
        "--seed",
        "0",
        "--json",
        "--visits",
        str(visits),
    ]
    got = _json(capsys, argv)
    assert isinstance(got["paths"], list) and visits.is_file()
    for path in got["paths"]:  # pdf -> markdown -> html is the fixtures' one chain
        assert [s["skill"] for s in path] == ["pdf-to-markdown", "markdown-to-html"]
        assert set(path[0]) == {"skill", "pre", "post"} and path[0]["post"].startswith("sc-")
    for key in ("scenario_entropy", "skill_entropy", "mean_length"):
        assert isinstance(got[key], float)
    assert got["coverage"]["skills"] == pytest.approx(2 / 3, abs=1e-5)
    uni = _json(
        capsys,
        ["skills", "sample", str(out), "--n", "2", "--seed", "1", "--sampler", "uniform", "--json"],
    )
    assert len(uni["paths"]) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["skills", "graph", "/nonexistent/skills", "--out", "X", "--heuristic"],
            "is not a folder",
        ),
        (["skills", "sample", "/nonexistent/graph", "--n", "3"], "not a skill-graph folder"),
        (["skills", "sample", str(FIXTURES), "--n", "0"], "need --n >= 1"),
    ],
)
def test_errors_are_one_line_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("X", "/tmp/never-written") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_graph_with_no_skills_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty" / "notes").mkdir(parents=True)
    assert (
        main(
            [
                "skills",
                "graph",
                str(tmp_path / "empty"),
                "--out",
                str(tmp_path / "g"),
                "--heuristic",
            ]
        )
        == 2
    )
    assert "no usable skill folders" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_synth_writes_verified_harbor_folders_and_reports_repairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph, out = tmp_path / "graph", tmp_path / "tasks"
    assert main(["skills", "graph", str(FIXTURES), "--out", str(graph), "--heuristic"]) == 0
    # the first construction grades a field it never asks for: the judge says so, one repair
    route = router_for(lambda n: generator(asks=n > 0), plan_for(PATH))
    with FakeOpenAI("routed", router=route, model="fake") as fake:
        argv = ["skills", "synth", str(graph), "--n", "1", "--out", str(out), "--backend",
                "bwrap", "--base-url", fake.base_url, "--model", "fake", "--json"]  # fmt: skip
        capsys.readouterr()
        report = _json(capsys, argv)
        # the Planner saw each skill's SKILL.md body, read again through meta.json's skills_dirs
        planner = fake.requests[0]["messages"][-1]["content"]
    assert "One `.md` file per PDF, next to the original." in planner
    assert (report["kept"], report["paths"], report["repairs"]) == (1, 1, 1)
    (task,) = report["tasks"]
    assert task["skills"] == PATH and task["kept"]
    assert [(a["stage"], a["passed"]) for a in task["attempts"]] == [
        ("rubric", False),
        ("kept", True),
    ]
    (folder,) = out.iterdir()
    assert folder.name == task["attempts"][-1]["task_id"]
    checks, verdict = verify_task(import_folder(folder), SandboxConfig(backend="bwrap"))
    assert verdict["kept"], verdict["reason"]


def test_synth_without_an_endpoint_exits_2(tmp_path: Path, capsys) -> None:
    graph = tmp_path / "graph"
    assert main(["skills", "graph", str(FIXTURES), "--out", str(graph), "--heuristic"]) == 0
    capsys.readouterr()
    assert main(["skills", "synth", str(graph), "--n", "1", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "needs an LLM endpoint" in err and len(err.strip().splitlines()) == 1
