"""SkillSynth's heuristic reads a skill's flow in the right direction (issue 24, item 7).

The issue found subagent-driven-development read backwards: "Use when executing implementation
plans" made it a planning skill (the category verb matched the noun "plans", the thing executed),
and the plan it starts from was never taken as its input (plans and reports were skipped as
inputs), so it read code -> plan. What a description says the skill starts from ("you have",
"executing", "receiving", "working with") is its input, whatever the kind; what comes "before ..."
is a later step's; "extract <what> from <where>" writes <what>.

The hand labels in data/skill_io_labels.json were read from the SKILL.md files of the shared
corpus by a person, independently of the heuristic; the heuristic must not fall below what it
reaches on them now.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawloop.synthesis.skillgraph.corpus import default_corpus_root, load_corpus, usable
from clawloop.synthesis.skillgraph.model import SkillRecord
from clawloop.synthesis.skillgraph.scenarios import (
    KINDS,
    category_of,
    clause_kinds,
    heuristic_scenarios,
    kinds_in,
    labelled_io,
    situation,
)

LABELS = Path(__file__).resolve().parent / "data" / "skill_io_labels.json"


def _skill(name: str, description: str, body: str = "") -> SkillRecord:
    return SkillRecord(name, name, description, body, (), "0" * 64)


def _io(skill: SkillRecord) -> tuple[tuple[str, ...], tuple[str, ...]]:
    s = heuristic_scenarios(skill)
    return s.artifacts_in, s.artifacts_out


# A body shaped like the obra/superpowers skill's (written here, not copied): a "When to Use"
# section that names the plan first, and the code its workers write.
_DELEGATE_BODY = (
    "# Delegated development\n\nRun the plan one task at a time, each by a fresh worker.\n\n"
    "## When to Use\n\nYou have an implementation plan whose tasks are independent; each worker "
    "writes the code for its task and commits it.\n"
)


def test_executing_a_plan_reads_plan_to_code_not_backwards():
    """The issue's case: subagent-driven-development's description, read code -> plan before."""
    skill = _skill(
        "subagent-driven-development",
        "Use when executing implementation plans with independent tasks in the current session",
        _DELEGATE_BODY,
    )
    assert _io(skill) == (("plan",), ("code",))
    assert category_of(skill) != "plan"  # "plans" is what it executes, not what it does


def test_the_mechanism_is_not_the_name():
    """The same reading under other names and wordings (executing-plans was plan -> report)."""
    for name, desc in (
        ("run-the-plan", "Use when executing implementation plans with independent tasks"),
        ("plan-runner", "Use when you have a written implementation plan to execute"),
        ("carry-it-out", "Carries out a written plan, task by task, with review checkpoints"),
    ):
        assert _io(_skill(name, desc)) == (("plan",), ("code",)), name


def test_a_stated_plan_is_an_input_and_a_later_step_is_not():
    """writing-plans read code -> plan: "before touching code" names a later step's artifact."""
    skill = _skill(
        "draft-steps", "Use when you have a spec or requirements for a task, before touching code"
    )
    assert _io(skill) == (("plan",), ("plan",))
    assert situation(skill.description).consumed == ("plan",)
    # a plan merely mentioned is still what skills write, not their input
    assert _io(_skill("refactor-outline", "Create a plan before refactoring the codebase"))[1] == (
        "plan",
    )


def test_review_feedback_received_is_read_then_code_is_written():
    """receiving-code-review read code -> report, backwards too: the head of "code review
    feedback" is the feedback (a report about code), and its name repeats the cue the
    description starts with, so the description's own "receiving ..." was swallowed."""
    skill = _skill(
        "receiving-code-review",
        "Use when receiving code review feedback, before implementing suggestions",
    )
    assert _io(skill) == (("report",), ("code",))
    assert situation("Use when given review feedback on a pull request").consumed[0] == "report"


def test_nouns_that_look_like_verbs_carry_nothing_out():
    """ "implementation plan" and "execution plan" are nouns: not a plan being executed."""
    assert not situation("Create a new implementation plan file for new features").carries_out_plan
    assert not situation("Provides execution plan analysis for SQL queries").carries_out_plan
    assert situation("Use when implementing the plan you were given").carries_out_plan


def test_extract_what_from_where_writes_what():
    """smart-ocr read pdf -> image: a step of its body ("convert PDF pages to images") beat the
    description, which says it extracts text from images."""
    body = "# OCR\n\nFor scanned files, first convert PDF pages to images, then run the engine.\n"
    skill = _skill(
        "ocr-tool", "Extract text from images and scanned documents using an engine", body
    )
    assert _io(skill) == (("image",), ("text",))


def test_sections_headed_inputs_and_outputs_are_labels():
    body = (
        "# Log export\n\n## Inputs\n\n- **Session file**: a `.jsonl` session log\n\n"
        "## Outputs\n\n- Writes a markdown transcript\n\n## Examples\n\nSee PDF docs.\n"
    )
    assert labelled_io(body) == (["json", "logs"], ["md"])


def test_a_transcript_is_text_and_transcribing_reads_audio():
    assert "audio" not in kinds_in("conversation transcripts from session logs")
    assert clause_kinds("conversation transcripts") == ["text"]
    assert kinds_in("Transcribe meetings; a transcription tool") == ["audio"]


def _labels() -> dict[str, dict]:
    rows = json.loads(LABELS.read_text())["labels"]
    return {r["folder"]: r for r in rows}


def test_hand_labels_are_well_formed():
    labels = _labels()
    assert len(labels) >= 25
    for folder, row in labels.items():
        assert set(row["in"]) | set(row["out"]) <= set(KINDS), folder
        assert row["in"] or row["out"], folder
        assert row["why"] and row["set"] in ("dev", "held_out"), folder


def test_heuristic_agrees_with_the_hand_labels():
    """On the hand-labelled skills of the shared corpus (set "dev", the one looked at while the
    heuristic was changed; "held_out" is only measured, by benchmarks/skill_artifacts.py): the
    heuristic's input kind among the hand's inputs for at least 20 of 27, its output kind among
    the hand's outputs for at least 27 of 31 (25 of 31 before this change: executing-plans read
    plan -> report, smart-ocr pdf -> image)."""
    root = default_corpus_root()
    if root is None:
        pytest.skip("shared skills corpus absent (set CLAWLOOP_SKILLS_CORPUS)")
    labels = {f: row for f, row in _labels().items() if row["set"] == "dev"}
    records = [r for r in usable(load_corpus(root)) if r.folder in labels]
    assert len(records) == len(labels)
    ins = outs = n_in = n_out = 0
    for r in records:
        got_in, got_out = _io(r)
        row = labels[r.folder]
        if row["in"]:
            n_in, ins = n_in + 1, ins + (got_in[0] in row["in"])
        if row["out"]:
            n_out, outs = n_out + 1, outs + (got_out[0] in row["out"])
    assert (n_in, n_out) == (27, 31)
    assert ins >= 20 and outs >= 27, (ins, outs)
