"""SkillSynth's heuristic types a skill by artifact (issue 24, item 7): input kind -> output kind
read from the SKILL.md body (labelled lines, clauses cut before their manner), not keywords
alone; and the merge joins two phrasings only when their artifact kinds agree."""

from __future__ import annotations

import numpy as np

from clawloop.synthesis.skillgraph.merge import merge_scenarios
from clawloop.synthesis.skillgraph.model import SkillRecord
from clawloop.synthesis.skillgraph.scenarios import body_io, clause_kinds, heuristic_scenarios


def _skill(name: str, description: str, body: str = "") -> SkillRecord:
    return SkillRecord(name, name, description, body, (), "0" * 64)


def test_a_clause_names_the_artifact_not_the_tool_it_runs_in():
    """The corpus's transcribe skill read as audio -> "new container setup" (Docker is how it
    runs, not what it writes)."""
    skill = _skill(
        "transcribe",
        "Transcribe audio files to text using local Whisper (Docker). Use when receiving voice "
        "messages.",
    )
    s = heuristic_scenarios(skill)
    assert (s.artifacts_in, s.artifacts_out) == (("audio",), ("text",))
    assert clause_kinds("text using local Whisper (Docker)") == ["text"]


def test_the_body_states_input_and_output_where_the_description_does_not():
    body = (
        "# Ledger tidy\n\nTidies the books.\n\n- **Input**: a CSV export of the bank account\n"
        "- **Output**: an Excel workbook with one sheet per month\n"
    )
    assert body_io(body) == (["csv"], ["xlsx"])
    s = heuristic_scenarios(_skill("ledger-tidy", "Tidy the monthly books for review.", body))
    assert (s.artifacts_in, s.artifacts_out) == (("csv",), ("xlsx",))


def test_a_name_side_may_be_a_bare_kind():
    s = heuristic_scenarios(_skill("md-to-docx", "Office documents from notes."))
    assert (s.artifacts_in, s.artifacts_out) == (("md",), ("docx",))


def _same(texts: list[str]) -> np.ndarray:  # every phrasing worded alike: only kinds can split
    return np.ones((len(texts), 4))


def test_the_merge_joins_phrasings_only_when_their_artifacts_agree():
    pdf, md, md2 = "a PDF report of findings", "a Markdown report of findings", "a Markdown report"
    alike = merge_scenarios([pdf, md, md2], _same)
    assert alike.merged == 1  # on wording alone, one node
    kinds = {pdf: frozenset({"pdf"}), md: frozenset({"md"}), md2: frozenset({"md", "report"})}
    typed = merge_scenarios([pdf, md, md2], _same, kinds=kinds)
    assert typed.merged == 2 and typed.node_of[md] == typed.node_of[md2] != typed.node_of[pdf]
    unknown = merge_scenarios([pdf, md], _same, kinds={pdf: frozenset({"pdf"})})
    assert unknown.merged == 1  # a phrasing of unknown kind merges on wording
