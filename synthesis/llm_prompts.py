"""What the generator writer is told: the contract text, the first request, the repair follow-up.

`WriterSpec` is one generator to write. `writer_prompt(spec, example_code, patterns)` is the first request for one generator: the contract
(`CONTRACT_TEXT`), the metadata wanted, the recent failure patterns and a built-in generator as
an example (`example_for`). `repair_message(stage, error)` sends a failed check, forge or verify
back to the writer. synthesis/llm_writer.py drives the write / check / repair loop with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clawloop.synthesis import library
from clawloop.synthesis.vocabularies import domain_names


@dataclass(frozen=True)
class WriterSpec:
    """One generator to write."""

    capability: str
    domain: str
    multihop: int = 0
    dirtiness: int = 0
    output_format: str = "json"
    split: str = "train"
    seed: int = 0  # the seed the candidate is forged and verified with


CONTRACT_TEXT = '''A generator is ONE Python file, standard library only, that runs in an isolated sandbox
(no network, no host files, a few seconds of CPU). It must define:

"""<one-line title>"""
GENERATOR = {"capability": ..., "domain": ..., "multihop": int 0-3, "dirtiness": int 0-3,
             "output_format": "json" | "csv" | "multi" | "report"}   # a literal dict

def build(seed: int) -> dict:
    # Deterministic in seed (use random.Random(seed); never time, os.urandom or set order).
    return {"instruction": str,            # what the agent is told
            "files": {relpath: str},       # the starting workspace (several sources)
            "answer": {output_relpath: value},   # the answer key, COMPUTED BY CODE from the data
            "contract": {"outputs": [{"path": "output/x.csv", "format": "csv",
                                      "columns": [...], "key": [...]}   # or "format": "json",
                                                                         # "schema": {...}
                                     ],                                  # report: "format": "report",
                                                                         # "sidecar": "output/facts.json"
                         "tolerance": {"abs": 0.01, "rel": 0.0},
                         "decisions": ["hidden rules the agent cannot infer: filters, rounding,
                                        tie-breaks, join keys"]}}

def solve(workspace: str) -> None:
    # The reference solution: reads the files in `workspace`, writes every output the contract names.

Grading is strict: CSV columns exactly as listed, in that order; JSON objects exactly the expected
keys (a map keyed by entity: schema "additionalProperties"); every list of records needs a schema
"key": [fields] (any order) or "ordered": true (by position); integers whole, booleans true/false.
A report's text is graded too: it must state every value of its sidecar, each record's fields in the
table row or sentence that names its key and each other value next to its name, so solve() writes
such a report; answer[report path] may add {"forbidden": [facts it must not state]}.
Every field a decision defines ("x = ...", "x counts ...") must be in some output.
Rules: the answer keys equal the graded output paths; no answer value may appear in the instruction,
the contract or the files; the untouched workspace must fail the verifier; solve() must pass it.
multihop = how many sources must be joined (index file, per-entity files, cross-reference);
dirtiness = injected distractors, missing fields, schema and unit mismatches (handled by the
stated decisions so the reference logic stays well defined).'''


def writer_prompt(spec: WriterSpec, example_code: str, patterns: str) -> list[dict[str, Any]]:
    """The first request to the writer LLM."""
    system = (
        "You write task generators for training a shell-and-files agent. Follow the contract "
        "exactly. Reply with one ```python fenced block holding the whole file and nothing else."
    )
    want = (
        f'GENERATOR = {{"capability": "{spec.capability}", "domain": "{spec.domain}", '
        f'"multihop": {spec.multihop}, "dirtiness": {spec.dirtiness}, "output_format": "{spec.output_format}"}}'
    )
    parts = [
        "The contract:\n" + CONTRACT_TEXT,
        f"Write a NEW generator with exactly this metadata:\n{want}",
    ]
    if patterns.strip():
        parts.append(
            "The agent recently failed in these recurring ways; make the task exercise them "
            "(without giving answers away):\n" + patterns.strip()
        )
    if example_code.strip():
        parts.append(
            "A working generator from the built-in library, as an example of the form (do not copy "
            "it; write a different task for the requested domain and difficulty):\n```python\n"
            + example_code.strip()
            + "\n```"
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def repair_message(stage: str, error: str, max_chars: int) -> dict[str, Any]:
    """The follow-up that sends a failure back to the writer."""
    what = {
        "reply": "I could not find usable Python code in your reply",
        "static": "Your generator fails a static check",
        "forge": "Building your generator in the sandbox failed",
        "verify": "Your generator built, but the forged task failed verification",
        "duplicate": "Your generator is the same code as one already accepted",
    }.get(stage, "Your generator failed")
    cut = (
        error
        if len(error) <= max_chars
        else error[: max_chars // 2] + "\n...\n" + error[-max_chars // 2 :]
    )
    return {
        "role": "user",
        "content": f"{what}:\n{cut}\n\nFix it and reply with the complete corrected file in one "
        "```python block.",
    }


def example_for(spec: WriterSpec) -> str:
    """A built-in generator of the same capability (another domain when possible) as the example."""
    others = [d for d in domain_names() if d != spec.domain] or [spec.domain]
    for domain in (others[0], spec.domain):
        try:
            return library.render_generator(
                spec.capability, domain, spec.multihop, spec.dirtiness, spec.output_format
            )
        except (KeyError, ValueError, OSError):
            continue
    return ""
