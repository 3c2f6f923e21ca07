"""The skill corpus loader: fixtures (good and broken folders) and the shared real corpus."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clawloop.synthesis.skillgraph.corpus import (
    CorpusError,
    corpus_sha256,
    default_corpus_root,
    load_corpus,
    skipped_folders,
    usable,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "skills"


def test_loader_reads_good_folders_and_marks_broken_ones() -> None:
    records = {r.folder: r for r in load_corpus(FIXTURES)}
    assert set(records) == {
        "pdf-to-markdown", "markdown-to-html", "csv-summary-report",
        "broken-yaml", "no-front-matter", "no-description",
    }  # fmt: skip
    good = records["pdf-to-markdown"]
    assert good.problem == "" and good.name == "pdf-to-markdown"
    assert good.description.startswith("Convert PDF documents into Markdown")
    assert good.body.startswith("# PDF to Markdown") and good.files == ("scripts/convert.py",)
    assert "not valid YAML" in records["broken-yaml"].problem
    assert "no YAML front matter" in records["no-front-matter"].problem
    assert "no `description`" in records["no-description"].problem
    assert [r.folder for r in usable(list(records.values()))] == [
        "csv-summary-report", "markdown-to-html", "pdf-to-markdown",
    ]  # fmt: skip
    assert skipped_folders(FIXTURES) == [("not-a-skill", "no SKILL.md")]


def test_content_hash_covers_files_beside_skill_md(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "pdf-to-markdown", tmp_path / "pdf-to-markdown")
    before = load_corpus(tmp_path)
    (tmp_path / "pdf-to-markdown" / "scripts" / "convert.py").write_text("print('changed')\n")
    after = load_corpus(tmp_path)
    assert before[0].content_sha256 != after[0].content_sha256
    assert corpus_sha256(before) != corpus_sha256(after)
    assert corpus_sha256(after) == corpus_sha256(load_corpus(tmp_path))


def test_unreadable_and_duplicate_skills_are_rows(tmp_path: Path) -> None:
    (tmp_path / "binary").mkdir()
    (tmp_path / "binary" / "SKILL.md").write_bytes(b"---\nname: x\n\xff\xfe\n---\n")
    for folder in ("a", "b"):
        shutil.copytree(FIXTURES / "markdown-to-html", tmp_path / folder)
    records = {r.folder: r for r in load_corpus(tmp_path)}
    assert "not UTF-8" in records["binary"].problem
    assert records["a"].problem == "" and "already used by folder a" in records["b"].problem


def test_missing_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist or is not a folder"):
        load_corpus(tmp_path / "nope")


def test_real_corpus_loads_without_crashing() -> None:
    root = default_corpus_root()
    if root is None:
        pytest.skip("shared skills corpus absent (set CLAWLOOP_SKILLS_CORPUS)")
    records = load_corpus(root)
    assert len(records) >= 150 and len(usable(records)) >= 150
    assert all(r.problem or r.description for r in records)
    assert ("LICENSES", "no SKILL.md") in skipped_folders(root)
