"""Candidates: the one place a CANDIDATES row and its `task_id` are made, from generator code
read on the host with `ast` only (the code itself runs only in a sandbox).

    row = candidate_row(code, seed=7, origin="user", split="train")
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
import threading
from dataclasses import dataclass
from typing import Any

from clawloop.generators.meta import ContractError, GeneratorMeta

# CPython 3.11.7 and older can fail ast.parse in concurrent threads ("AST constructor recursion
# depth mismatch", gh-106905); forge runs in thread pools, so parsing is serialised.
_AST_LOCK = threading.Lock()

# Where a module splits into pieces that parse and compile on their own: a line opening a
# top-level def or class, or its first decorator. Built-in generators share every piece but
# their head, so the host parses (here) and compiles (runner.compiled) each piece once.
_PIECE_START = re.compile(rb"^(?:def |class |async def |@)", re.M)


def source_pieces(source: bytes) -> list[tuple[int, bytes]]:
    """(first line - 1, text) of each piece: the module's head, then each top-level def or
    class with its decorators. A piece that ends inside a string or brackets does not parse;
    callers then take the whole source instead."""
    starts = [0]
    for m in _PIECE_START.finditer(source):
        head = source.rfind(b"\n", 0, m.start() - 1) + 1
        if m.start() and not source.startswith(b"@", head):  # not a def after its decorator
            starts.append(m.start())
    out, line = [], 0
    for a, b in zip(starts, starts[1:] + [len(source)], strict=True):
        out.append((line, source[a:b]))
        line += source.count(b"\n", a, b)
    return out


@functools.lru_cache(maxsize=8192)
def _piece_body(text: bytes) -> list[ast.stmt]:
    return ast.parse(text).body


def _module(code: str) -> ast.Module:
    """The module's top-level statements, parsed piece by piece (each piece once per process;
    their line numbers are the piece's own), or whole when a piece does not parse alone."""
    with _AST_LOCK:
        try:
            body = [n for _, text in source_pieces(code.encode()) for n in _piece_body(text)]
            return ast.Module(body=body, type_ignores=[])
        except (SyntaxError, ValueError):
            return ast.parse(code)  # the whole file's error, with its line numbers


@dataclass(frozen=True)
class ParsedGenerator:
    """What the host may know about generator code without running it."""

    meta: GeneratorMeta
    sha256: str
    title: str

    @property
    def label(self) -> str:
        """Names the generator in error messages."""
        return f"generator {self.title!r} (sha256 {self.sha256[:12]})"


def code_sha256(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def parse_meta(code: str) -> ParsedGenerator:
    """Read GENERATOR and the docstring title with `ast` only; raise ContractError if absent/odd.
    Cached per code text: a candidate is parsed when it is made, when it is forged and when it is
    verified; parsing a built-in generator (~30 KB) whole costs ~15 ms of CPU, piece by piece
    (_module) a fraction of that once its shared pieces were seen."""
    return _parse_meta_cached(code)


@functools.lru_cache(maxsize=256)
def _parse_meta_cached(code: str) -> ParsedGenerator:
    sha = code_sha256(code)
    try:
        tree = _module(code)
    except (SyntaxError, ValueError) as exc:
        raise ContractError(f"generator (sha256 {sha[:12]}) is not valid Python: {exc}") from exc
    doc = ast.get_docstring(tree) or ""
    title = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    literal = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "GENERATOR" for t in node.targets
        ):
            try:
                literal = ast.literal_eval(node.value)
            except ValueError as exc:
                raise ContractError(
                    f"generator {title!r} (sha256 {sha[:12]}): GENERATOR must be a literal dict"
                ) from exc
    if literal is None:
        raise ContractError(f"generator {title!r} (sha256 {sha[:12]}) has no GENERATOR = {{...}}")
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [f for f in ("build", "solve") if f not in names]
    if missing:
        raise ContractError(
            f"generator {title!r} (sha256 {sha[:12]}) does not define {', '.join(missing)}()"
        )
    return ParsedGenerator(
        meta=GeneratorMeta.from_dict(literal, title=title), sha256=sha, title=title
    )


def parse_meta_at(code: str, where: str = "") -> ParsedGenerator:
    """parse_meta, its ContractError naming `where` (the file the code came from)."""
    try:
        return parse_meta(code)
    except ContractError as exc:
        raise ContractError(f"{where}: {exc}" if where else str(exc)) from None


def task_id_for(generator_sha256: str, seed: int) -> str:
    """Stable id of (generator, seed): the same candidate always forges to the same task id."""
    return hashlib.sha256(f"{generator_sha256}:{seed}".encode()).hexdigest()[:16]


def candidate_row(
    code: str, seed: int, origin: str = "user", split: str = "train", where: str = ""
) -> dict[str, Any]:
    """A storage.schemas.CANDIDATES row for generator code; ContractError (naming `where`, e.g. the
    file it came from) if its GENERATOR metadata is missing or malformed."""
    gen = parse_meta_at(code, where)
    return {
        "task_id": task_id_for(gen.sha256, seed),
        "generator_code": code,
        "generator_sha256": gen.sha256,
        "seed": int(seed),
        "capability": gen.meta.capability,
        "domain": gen.meta.domain,
        "multihop": gen.meta.multihop,
        "dirtiness": gen.meta.dirtiness,
        "output_format": gen.meta.output_format,
        "split": split,
        "origin": origin,
        "skill_path": None,  # SkillSynth sets it (synthesis/skillgraph/instantiate.py)
    }
