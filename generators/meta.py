"""A generator's GENERATOR metadata, read on the host from its source without running it, and
the contract's error (the generator contract, docs/architecture.md; generators/contract.py validates what
build() returns).

Apart from the build validator (which follows the grader's report facts) so that what only reads
metadata (candidate rows, the built-in library) does not import the grader: their cache keys
follow imports (storage/cache_key.py), and a grader edit must not re-synthesize the library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

CAPABILITY_KEYS = ("capability", "domain", "multihop", "dirtiness", "output_format")
OutputFormat = Literal["json", "csv", "multi", "report"]
OUTPUT_FORMATS: tuple[str, ...] = ("json", "csv", "multi", "report")  # the library's rotation
# What GENERATOR["output_format"] may say: also "state", a domain task graded on its end state.
META_FORMATS: tuple[str, ...] = (*OUTPUT_FORMATS, "state")


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
        if meta.output_format not in META_FORMATS:
            raise ContractError(
                f"GENERATOR output_format must be one of {META_FORMATS}, got {meta.output_format!r}"
            )
        return meta
