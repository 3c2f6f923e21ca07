"""Read a corpus of skill folders (ClawHub / GitHub style) into `SkillRecord`s.

A skill is a folder holding a `SKILL.md`: YAML front matter (`name`, `description`, ...) between
`---` lines, then a markdown body; scripts and examples may sit beside it. Users point at their own
corpora, which are messy, so a folder that cannot be used (no front matter, YAML that does not
parse even read leniently, no description, a file that is not UTF-8) becomes a record with
`problem` set, never a crash; front matter that YAML refuses only for an unquoted colon in a value
is read as `key: rest of the line` (`lenient_front_matter`); folders with no SKILL.md at all (licence folders) are listed by `skipped_folders`.

Nothing in a skill folder is executed here: the files are read as bytes for the content hash and
as text for the scenario prompt. The content hash covers SKILL.md and every file beside it (sorted,
each read capped) and is the scenario cache key: edit a skill and its scenarios are inferred again.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from clawloop.synthesis.skillgraph.model import SkillRecord

SKILL_FILE = "SKILL.md"
MAX_READ_BYTES = 1 << 20  # per file, for the hash: a stray dataset must not stall the loader
MAX_FILES = 200  # per skill folder, listed and hashed
_SKIP_NAMES = {"__pycache__", "node_modules", ".git"}
CORPUS_ENV = "CLAWLOOP_SKILLS_CORPUS"


class CorpusError(ValueError):
    """The corpus root cannot be read at all (missing, not a folder)."""


def default_corpus_root() -> Path | None:
    """The shared real corpus: $CLAWLOOP_SKILLS_CORPUS, <repo>/../shared/data/skills, or
    /work/shared/data/skills — the first that is a folder, else None (tests skip on None)."""
    repo = Path(__file__).resolve().parents[2]
    candidates = [os.environ.get(CORPUS_ENV, ""), repo.parent / "shared/data/skills"]
    candidates.append("/work/shared/data/skills")
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return None


def _check_root(root: str | Path) -> Path:
    path = Path(root)
    if not path.is_dir():
        raise CorpusError(
            f"skills folder {path} does not exist or is not a folder: pass a folder whose "
            f"sub-folders each hold a {SKILL_FILE}"
        )
    return path


def _folder_files(folder: Path) -> list[str]:
    """Files beside SKILL.md, relative, sorted, hidden and cache folders left out, capped."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_NAMES and not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), folder)
            if rel != SKILL_FILE:
                out.append(rel)
    return sorted(out)[:MAX_FILES]


def _content_sha256(folder: Path, files: list[str]) -> str:
    h = hashlib.sha256()
    for rel in [SKILL_FILE, *files]:
        h.update(rel.encode() + b"\0")
        try:
            with open(folder / rel, "rb") as f:
                h.update(f.read(MAX_READ_BYTES))
        except OSError as exc:  # unreadable file: hash its error so the key still changes
            h.update(f"<unreadable: {exc.strerror}>".encode())
        h.update(b"\0")
    return h.hexdigest()


_FIELD = re.compile(r"^([A-Za-z_][\w-]*):(?:\s+(.*))?$")


def lenient_front_matter(lines: list[str]) -> dict[str, Any] | None:
    """The front matter as people write it when YAML refuses it, most often an unquoted colon
    (`description: Use when: the user asks`): each unindented `key: value` line is a field whose
    value is the rest of the line as text (surrounding quotes removed); indented lines continue
    the field above (`- item` lines make it a list). None when a line is neither: then it is not
    front matter misread, and the YAML error stands."""
    out: dict[str, Any] = {}
    key = ""
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _FIELD.match(line)
        if m and not line[0].isspace():
            key, value = m.group(1), (m.group(2) or "").strip()
            quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
            out[key] = value[1:-1] if quoted else value
            continue
        if not key or not line[0].isspace():
            return None
        item = line.strip()
        if item.startswith("- "):
            prev = out[key]
            out[key] = ([] if prev == "" else prev if isinstance(prev, list) else [prev]) + [
                item[2:]
            ]
        elif isinstance(out[key], str):
            out[key] = f"{out[key]} {item}".strip()
        else:
            return None
    return out or None


def split_front_matter(text: str) -> tuple[dict | None, str, str]:
    """(front matter mapping or None, body, problem). Front matter is the YAML between a first
    line `---` and the next `---` line; its absence or a YAML error is a problem, not an error."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return None, text, "no YAML front matter (SKILL.md must start with a `---` line)"
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        return None, text, "front matter is not closed (no second `---` line)"
    body = "\n".join(lines[end + 1 :]).strip("\n")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        meta = lenient_front_matter(lines[1:end])
        if meta is None:
            where = getattr(exc, "problem_mark", None)
            at = f" at front-matter line {where.line + 1}" if where is not None else ""
            problem = getattr(exc, "problem", exc)
            return None, body, f"front matter is not valid YAML{at}: {problem}"
    if not isinstance(meta, dict):
        return None, body, f"front matter is a {type(meta).__name__}, not a mapping of fields"
    return meta, body, ""


def read_skill(folder: Path) -> SkillRecord:
    """One folder holding a SKILL.md -> a record (with `problem` set when unusable)."""
    files = _folder_files(folder)
    sha = _content_sha256(folder, files)

    def broken(problem: str, body: str = "", name: str = "", description: str = "") -> SkillRecord:
        return SkillRecord(
            name or folder.name, folder.name, description, body, tuple(files), sha, problem
        )

    try:
        text = (folder / SKILL_FILE).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return broken(f"{SKILL_FILE} is not UTF-8 text (byte {exc.start})")
    except OSError as exc:
        return broken(f"cannot read {SKILL_FILE}: {exc.strerror or exc}")
    meta, body, problem = split_front_matter(text)
    if meta is None:
        return broken(problem, body)
    name = str(meta.get("name") or "").strip()
    description = meta.get("description")
    description = " ".join(str(description).split()) if description is not None else ""
    if not name:
        return broken("front matter has no `name`", body, description=description)
    if not description:
        return broken("front matter has no `description`", body, name=name)
    return SkillRecord(name, folder.name, description, body, tuple(files), sha)


def _skill_dirs(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name not in _SKIP_NAMES
    )


Roots = str | Path | Sequence[str | Path]


def roots_of(root: Roots) -> list[Path]:
    return [Path(root)] if isinstance(root, str | Path) else [Path(r) for r in root]


def load_corpus(root: Roots) -> list[SkillRecord]:
    """Every sub-folder of `root` (one folder or several) holding a SKILL.md, sorted by folder
    within each root; duplicate skill names after the first are marked as problems (skills are
    graph edge keys, so names must be unique across roots)."""
    records = [
        read_skill(d)
        for base in map(_check_root, roots_of(root))
        for d in _skill_dirs(base)
        if (d / SKILL_FILE).is_file()
    ]
    seen: dict[str, str] = {}
    out: list[SkillRecord] = []
    for r in records:
        if not r.problem and r.name in seen:
            r = SkillRecord(
                r.name, r.folder, r.description, r.body, r.files, r.content_sha256,
                f"skill name {r.name!r} already used by folder {seen[r.name]}: rename one",
            )  # fmt: skip
        elif not r.problem:
            seen[r.name] = r.folder
        out.append(r)
    return out


def skipped_folders(root: Roots) -> list[tuple[str, str]]:
    """Sub-folders of `root` (one folder or several) that are not skills: (folder, reason)."""
    return [
        (d.name, f"no {SKILL_FILE}")
        for base in map(_check_root, roots_of(root))
        for d in _skill_dirs(base)
        if not (d / SKILL_FILE).is_file()
    ]


def usable(records: list[SkillRecord]) -> list[SkillRecord]:
    return [r for r in records if not r.problem]


def corpus_sha256(records: list[SkillRecord]) -> str:
    """One hash for the whole corpus (folder names and content hashes): the graph's cache key."""
    h = hashlib.sha256()
    for r in sorted(records, key=lambda r: r.folder):
        h.update(f"{r.folder}\0{r.content_sha256}\0".encode())
    return h.hexdigest()
