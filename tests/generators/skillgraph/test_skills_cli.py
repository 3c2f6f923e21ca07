"""`clawloop skills graph | sample`: the --json shapes and the one-line errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawloop.flows.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "skills"


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
