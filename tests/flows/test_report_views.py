"""What the UI artifacts and the CLI summary say about a stage."""

from __future__ import annotations

from rich.console import Console

from clawloop.flows.report import (
    runs_table,
    stage_markdown,
    stage_table,
    stages_table,
    summary_table,
)
from clawloop.flows.runs import RunInfo, RunSummary, StageInfo
from clawloop.storage.manifest import FileEntry, Manifest
from clawloop.tasks.engine import StageOutcome

M = Manifest(
    "forge",
    1,
    "r",
    "k" * 64,
    "c" * 64,
    {},
    [FileEntry("tasks.parquet", "a" * 64, 7, 123), FileEntry("report.md", "b" * 64, -1, 9)],
    summary={"forged": 6, "failed": 1},
)


def _text(renderable) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def test_stage_table_and_markdown_list_files_rows_and_figures():
    ran = StageOutcome("forge", 1, "ran", "inputs changed", 2.5, M)
    assert stage_table(ran)[0] == {
        "file": "tasks.parquet",
        "rows": 7,
        "bytes": 123,
        "sha256": "a" * 16,
        "status": "ran",
    }
    md = stage_markdown("r", ran, "runs/r/iter-1/forge", appendix="# report")
    assert "| tasks.parquet | 7 | 123 |" in md and "| report.md | - | 9 |" in md
    assert "| forged | 6 |" in md and "inputs changed" in md and md.endswith("# report")
    failed = StageOutcome("verify", 1, "failed", "new", 0.1, None, "ValueError: boom")
    assert stage_table(failed)[0]["status"] == "failed" and "ValueError: boom" in stage_markdown(
        "r", failed
    )


def test_a_stage_that_did_no_work_is_not_a_plain_ok():
    """A run whose train stage trained nothing says so in its title and the stage's row."""
    idle = Manifest(
        "train",
        2,
        "r",
        "k" * 64,
        "c" * 64,
        {},
        [],
        summary={"status": "nothing_to_train", "reason": "sft: 0 passed episodes"},
    )
    done = Manifest("train", 1, "r", "k" * 64, "c" * 64, {}, [], summary={"status": "trained"})
    s = RunSummary(
        "r",
        "runs",
        [
            StageOutcome("train", 1, "ran", "no manifest yet", 1.0, done),
            StageOutcome("train", 2, "ran", "no manifest yet", 1.0, idle),
        ],
        2.0,
    )
    text = _text(summary_table(s))
    assert "run r — ok, but did no work: train 2 in" in text
    assert "ran: nothing_to_train" in text and "sft: 0 passed episodes" in text


def test_summary_and_runs_tables_show_status_and_rows():
    s = RunSummary(
        "r",
        "runs",
        [StageOutcome("forge", 1, "skipped", "manifest matches its inputs", 0.01, M)],
        1.0,
    )
    text = _text(summary_table(s))
    assert "skipped" in text and "tasks=7" in text and "run r — ok" in text
    info = RunInfo(
        "r",
        {
            1: [
                StageInfo("verify", "stale", {}, 0.0, "inputs changed"),
                StageInfo("forge", "complete", {"tasks.parquet": 7}, 1.0),
            ]
        },
        0.0,
        status="stale from iter 1 verify",
        reason="inputs changed",
        k=1,
    )
    text = _text(runs_table([info], ["forge", "verify"]))
    assert "stale from iter 1 verify" in text and "inputs changed" in text
    text = _text(stages_table(info, ["forge", "verify"]))
    body = text[text.index("why") :]
    assert body.index("forge") < body.index("verify") and "stale" in body
