"""What a task is made of: the instruction, the workspace files, the answer key and the contract.

The generator contract (clawloop.generators.contract) validates a generator's build() into these
records; the task-folder writer, the grader and the probes read them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

# What an output may relax (`OutputSpec.lenient`). The grader, a standalone file copied into each
# task, keeps its own copy of this tuple; tests/harness/test_grader.py checks they agree.
LENIENCIES = ("column_order", "extra_columns", "extra_fields", "int_as_float", "bool_words")


@dataclass(frozen=True)
class OutputSpec:
    path: str  # relative to the workspace, e.g. output/report.csv
    format: str  # json | csv | report
    columns: list[str] = field(default_factory=list)  # csv
    key: list[str] = field(default_factory=list)  # csv: columns identifying a row
    schema: dict[str, Any] = field(default_factory=dict)  # json / report sidecar (JSON-Schema-like)
    sidecar: str = ""  # report: the machine-checkable JSON file holding the graded facts
    # What the grader relaxes for this output (grader.LENIENCIES; default strict: columns in the
    # listed order and no others, no extra fields or keys, whole integers, true/false booleans).
    lenient: list[str] = field(default_factory=list)
    # report: what its text must state, names only, never values: [{"per": [key columns],
    # "fields": [...]}] (each row's fields next to its key; "per": [] = overall figures, each next
    # to its name). The values to find are the hidden answer key's, under the report's path.
    covers: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Contract:
    outputs: list[OutputSpec]
    tolerance: dict[str, float]
    decisions: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BuildResult:
    instruction: str
    files: dict[str, str]
    answer: dict[str, Any]
    contract: Contract

    def to_dict(self) -> dict[str, Any]:
        return {
            "instruction": self.instruction,
            "files": self.files,
            "answer": self.answer,
            "contract": self.contract.to_dict(),
        }

    def digest(self) -> str:
        """sha256 of the canonical JSON form: equal digests = identical tasks (determinism check)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()
