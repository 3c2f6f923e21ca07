"""The generator contract (fixed; see docs/design.md) as typed records and a strict validator.

A generator is one standard-library Python file with a `GENERATOR` metadata dict, `build(seed)`
and `solve(workspace)`. It always runs inside a sandbox (generators/runner.py); this module only
checks what came back, on the host, so a hostile generator cannot hand us a malformed task.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Literal

from clawloop.harness.taskfolder.spec import BuildResult, Contract, OutputSpec

CAPABILITY_KEYS = ("capability", "domain", "multihop", "dirtiness", "output_format")
OutputFormat = Literal["json", "csv", "multi", "report"]
OUTPUT_FORMATS: tuple[str, ...] = ("json", "csv", "multi", "report")
FILE_FORMATS = ("json", "csv", "report")  # what one contract output entry may be
MAX_FILES = 400
MAX_TOTAL_BYTES = 8 * 1024 * 1024


class ContractError(ValueError):
    """A generator's metadata or build() result breaks the contract. Not retryable."""


@dataclass(frozen=True)
class GeneratorMeta:
    capability: str
    domain: str
    multihop: int = 0
    dirtiness: int = 0
    output_format: str = "json"
    title: str = ""

    @classmethod
    def from_dict(cls, d: Any, title: str = "") -> GeneratorMeta:
        if not isinstance(d, dict):
            raise ContractError(
                "GENERATOR must be a dict literal with keys " + ", ".join(CAPABILITY_KEYS)
            )
        missing = [
            k for k in ("capability", "domain") if not isinstance(d.get(k), str) or not d.get(k)
        ]
        if missing:
            raise ContractError(f"GENERATOR is missing string field(s): {', '.join(missing)}")
        meta = cls(
            capability=d["capability"],
            domain=d["domain"],
            multihop=int(d.get("multihop", 0)),
            dirtiness=int(d.get("dirtiness", 0)),
            output_format=str(d.get("output_format", "json")),
            title=title,
        )
        if not 0 <= meta.multihop <= 3 or not 0 <= meta.dirtiness <= 3:
            raise ContractError("GENERATOR multihop and dirtiness must be integers in 0..3")
        if meta.output_format not in OUTPUT_FORMATS:
            raise ContractError(
                f"GENERATOR output_format must be one of {OUTPUT_FORMATS}, got {meta.output_format!r}"
            )
        return meta


def check_relpath(p: Any, what: str) -> str:
    """A workspace-relative POSIX path with no escape (no absolute path, no `..`)."""
    if not isinstance(p, str) or not p or p.startswith("/") or "\\" in p or "\x00" in p:
        raise ContractError(f"{what}: {p!r} is not a relative POSIX path")
    norm = posixpath.normpath(p)
    if norm != p.rstrip("/") or norm.startswith("..") or norm == ".":
        raise ContractError(f"{what}: {p!r} escapes the workspace or is not normalised")
    return norm


def _output_spec(o: Any, i: int) -> OutputSpec:
    where = f"contract.outputs[{i}]"
    if not isinstance(o, dict):
        raise ContractError(f"{where} must be an object")
    fmt = o.get("format")
    if fmt not in FILE_FORMATS:
        raise ContractError(f"{where}.format must be one of {FILE_FORMATS}, got {fmt!r}")
    spec = OutputSpec(
        path=check_relpath(o.get("path"), f"{where}.path"),
        format=fmt,
        columns=[str(c) for c in o.get("columns", [])],
        key=[str(c) for c in o.get("key", [])],
        schema=dict(o.get("schema", {}) or {}),
        sidecar=check_relpath(o["sidecar"], f"{where}.sidecar") if o.get("sidecar") else "",
    )
    if fmt == "csv" and not spec.columns:
        raise ContractError(f"{where}: a csv output must list its columns")
    if not set(spec.key) <= set(spec.columns):
        raise ContractError(f"{where}: key columns {spec.key} must be among columns {spec.columns}")
    if fmt == "report" and not spec.sidecar:
        raise ContractError(f"{where}: a report output needs a machine-checkable sidecar path")
    return spec


def graded_paths(contract: Contract) -> list[str]:
    """The files whose contents the answer key holds: each output, or a report's sidecar."""
    return [o.sidecar if o.format == "report" else o.path for o in contract.outputs]


def validate_build(obj: Any) -> BuildResult:
    """Check a build() return value against the contract; raise ContractError saying what is wrong."""
    if not isinstance(obj, dict):
        raise ContractError(f"build() must return a dict, got {type(obj).__name__}")
    missing = {"instruction", "files", "answer", "contract"} - obj.keys()
    if missing:
        raise ContractError(f"build() result is missing key(s): {', '.join(sorted(missing))}")
    instruction, files, answer, c = obj["instruction"], obj["files"], obj["answer"], obj["contract"]
    if not isinstance(instruction, str) or not instruction.strip():
        raise ContractError("build()['instruction'] must be a non-empty string")
    if not isinstance(files, dict) or not files:
        raise ContractError("build()['files'] must be a non-empty {relpath: str} dict")
    if len(files) > MAX_FILES:
        raise ContractError(f"build()['files'] has {len(files)} files; the limit is {MAX_FILES}")
    total = 0
    for p, text in files.items():
        check_relpath(p, "build()['files'] key")
        if not isinstance(text, str):
            raise ContractError(f"build()['files'][{p!r}] must be a str, got {type(text).__name__}")
        total += len(text.encode())
    if total > MAX_TOTAL_BYTES:
        raise ContractError(f"build()['files'] total {total} bytes; the limit is {MAX_TOTAL_BYTES}")
    if not isinstance(c, dict) or not isinstance(c.get("outputs"), list) or not c["outputs"]:
        raise ContractError("build()['contract']['outputs'] must be a non-empty list")
    tol = c.get("tolerance", {"abs": 0.0, "rel": 0.0})
    if not isinstance(tol, dict) or not all(
        isinstance(v, int | float) and v >= 0 for v in tol.values()
    ):
        raise ContractError(
            "build()['contract']['tolerance'] must be {'abs': float>=0, 'rel': float>=0}"
        )
    decisions = c.get("decisions", [])
    if not isinstance(decisions, list) or not all(isinstance(d, str) for d in decisions):
        raise ContractError("build()['contract']['decisions'] must be a list of strings")
    contract = Contract(
        outputs=[_output_spec(o, i) for i, o in enumerate(c["outputs"])],
        tolerance={"abs": float(tol.get("abs", 0.0)), "rel": float(tol.get("rel", 0.0))},
        decisions=list(decisions),
    )
    if not isinstance(answer, dict):
        raise ContractError("build()['answer'] must be a {output_relpath: value} dict")
    expected = set(graded_paths(contract))
    if set(answer) != expected:
        raise ContractError(
            f"build()['answer'] keys {sorted(answer)} must equal the graded outputs {sorted(expected)}"
        )
    clash = expected & set(files)
    if clash:
        raise ContractError(
            f"output path(s) {sorted(clash)} already exist in the starting workspace"
        )
    return BuildResult(instruction=instruction, files=dict(files), answer=answer, contract=contract)
