"""Verify drops a task only on a certain signal (issue 24 item 1): a check that reads prose
(the decision fields) drops on a name written as code and only warns on a plain word; a corpus
of sound hand-written generators is kept whole and a hostile one dropped, each for its reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clawloop.generators.candidates import candidate_row
from clawloop.generators.forge import forge_candidate
from clawloop.generators.verify import is_warning, verify_task
from clawloop.generators.verify.leaks import decision_field_signals, unheld_decision_fields
from clawloop.harness.sandbox.base import SandboxConfig

FIXTURES = Path(__file__).parents[1] / "fixtures" / "generators"
SOUND = sorted((FIXTURES / "sound").glob("*.py"))
HOSTILE = sorted((FIXTURES / "hostile").glob("*.py"))
BWRAP = SandboxConfig(backend="bwrap")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")

PROSE = ["Keys are plot codes exactly as written; values are sums rounded to 2 decimals."]


def test_a_plain_word_opening_a_rule_is_a_guess_and_code_is_certain() -> None:
    assert decision_field_signals(PROSE) == {"values": "guess"}
    rules = [
        "Ignore test rows; total sums the usable kg values.",
        "share_pct = total / group total. top_hive is the hive with the largest total.",
        "`peak` is the largest reading; kind = category; HoneyYield = kg; topHive is it.",
        "Total = a sentence's opening word; 1 lb = 0.4536 kg is a unit, not a field.",
    ]
    assert decision_field_signals(rules) == {
        "total": "guess",
        "share_pct": "certain",
        "top_hive": "certain",
        "peak": "certain",
        "kind": "certain",
        "HoneyYield": "certain",
        "topHive": "certain",
        "Total": "guess",
    }


def test_unheld_fields_keep_their_certainty() -> None:
    contract = {
        "outputs": [{"path": "o.json", "format": "json", "schema": {}}],
        "decisions": PROSE + ["grand_total sums every plot."],
    }
    answer = {"o.json": {"P01": 2.5}}
    assert unheld_decision_fields(contract, answer, {"log.csv": "plot,kg\nP01,2.5\n"}) == {
        "values": "guess",
        "grand_total": "certain",
    }


def forged(path: Path, seed: int) -> dict:
    row = forge_candidate(candidate_row(path.read_text(), seed), BWRAP)
    assert row["status"] == "ok", row["error"]
    return row


@needs_bwrap
def test_the_issue_prose_decision_generator_is_kept_with_a_warning() -> None:
    """The issue 24 report: oracle, no-op, leak, probes and determinism pass, and the old check
    dropped it with "the decisions define values, which no output holds"."""
    checks, verdict = verify_task(forged(FIXTURES / "sound/plot_totals.py", 4), BWRAP)
    assert verdict["kept"], verdict["reason"]
    row = next(c for c in checks if c["check"] == "decision_fields")
    assert is_warning(row) and "values" in row["reason"], row
    assert [c["check"] for c in checks if is_warning(c)] == ["decision_fields"]
