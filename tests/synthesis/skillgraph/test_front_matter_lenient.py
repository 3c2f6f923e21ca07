"""SKILL.md front matter that YAML refuses only for an unquoted colon in a value (two skills of
the shared corpus were skipped for it) is read leniently, field by field; a block that is not
front matter at all still is a problem."""

from __future__ import annotations

from clawloop.synthesis.skillgraph.corpus import lenient_front_matter, read_skill


def _skill(tmp_path, front: str):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n\n# Body\n\nText.\n")
    return read_skill(folder)


def test_an_unquoted_colon_in_the_description_is_read(tmp_path):
    rec = _skill(
        tmp_path,
        "name: transcribe\ndescription: Transcribe audio. Use when: the user gives a recording\n"
        "license: MIT",
    )
    assert rec.problem == ""
    assert rec.name == "transcribe"
    assert rec.description == "Transcribe audio. Use when: the user gives a recording"


def test_continuations_quotes_and_lists():
    meta = lenient_front_matter(
        [
            "name: 'pdf-tools'",
            "description: Read PDFs: split, merge",
            "  and rotate them",
            "tags:",
            "  - pdf",
            "  - documents",
            "# a comment",
        ]
    )
    assert meta == {
        "name": "pdf-tools",
        "description": "Read PDFs: split, merge and rotate them",
        "tags": ["pdf", "documents"],
    }


def test_what_is_not_front_matter_stays_a_problem(tmp_path):
    assert lenient_front_matter(["name: x", "a stray line of prose"]) is None
    rec = _skill(tmp_path, "name: x\ndescription: a: b\nprose without a field")
    assert "not valid YAML" in rec.problem


def test_valid_yaml_is_read_as_yaml(tmp_path):
    rec = _skill(tmp_path, 'name: ok\ndescription: "quoted: fine"\nmetadata: {a: 1}')
    assert rec.problem == "" and rec.description == "quoted: fine"
