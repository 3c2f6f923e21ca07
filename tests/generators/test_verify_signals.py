"""Verify drops a task only on a certain signal (issue 24 item 1): a check that reads prose
(the decision fields) drops on a name written as code and only warns on a plain word; a corpus
of sound hand-written generators is kept whole and a hostile one dropped, each for its reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawloop.generators.candidates import candidate_row
from clawloop.generators.forge import forge_candidate
from clawloop.generators.verify import check_leak, is_warning, verify_task
from clawloop.generators.verify.leaks import (
    decision_field_signals,
    find_leak_signals,
    is_data,
    unheld_decision_fields,
)
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


def test_a_step_another_rule_uses_is_no_orphan_field() -> None:
    """A programmer's notation: net_kg is an intermediate the output's rule uses, and Total_kg
    opens a sentence (the output column is total_kg); grand_total only has a rule about it."""
    rules = [
        "net_kg = gross_kg - tare_kg, with the tare of the crate used.",
        "Total_kg sums net_kg over a hive's weighings. grand_total sums every hive.",
        "Round grand_total to 2 decimals.",
    ]
    assert decision_field_signals(rules) == {
        "net_kg": "guess",
        "Total_kg": "certain",
        "grand_total": "certain",
    }
    contract = {"outputs": [{"path": "o.csv", "format": "csv", "columns": ["hive", "total_kg"]}]}
    contract["decisions"] = rules
    files = {"w.csv": "hive,gross_kg\n", "c.csv": "crate,tare_kg\n"}
    assert unheld_decision_fields(contract, {"o.csv": []}, files) == {
        "net_kg": "guess",
        "grand_total": "certain",
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


FLAGS = {
    "o.json": {
        "weeks": [{"week_id": f"W-{i:03d}", "flagged": i in (3, 7)} for i in range(1, 13)],
        "flagged": 2,
        "top_hive": "HV-102",
    }
}
INPUTS = "week_id,hive,mites\n" + "".join(f"W-{i:03d},HV-10{i % 3},{i}\n" for i in range(1, 13))


def signals(text: str) -> list[tuple[str, str]]:
    found = find_leak_signals(FLAGS, {"i": text}, INPUTS, {"abs": 0.0}, frozenset({"week_id"}))
    return [(what, how) for what, _, how in found]


@pytest.mark.parametrize(
    ("text", "how"),
    [
        ("The summary's top_hive is HV-102.", "certain"),  # the field written as code
        ("Hint: the top hive is HV-102.", "certain"),  # a label, stated in words
        ("Name it as written, e.g. the top hive is HV-102.", "guess"),  # an example
        ("busiest: none; flagged: 2", "certain"),  # tied to its value by a colon
        ('{"flagged": 2}', "certain"),
        ("A hive with 2 flagged weeks goes into quarantine.", "guess"),  # a rule's parameter
        ("Weeks look like W-007.", "guess"),  # one example id that happens to be flagged
        ("Check W-003 and W-007 first.", "certain"),  # the selection, listed
    ],
)
def test_a_leak_read_from_prose_says_how_sure_it_is(text: str, how: str) -> None:
    found = signals(text)
    assert found and {h for _, h in found} == {how}, found


LOANS = "loan,due,returned\nLN-1,2024-03-01,2024-03-02\nLN-2,2024-03-01,2024-03-12\n"


def test_a_rate_a_rule_gives_is_a_parameter_not_a_leak() -> None:
    """library_fines with a 1.25 fine per day: a loan one day late owes 1.25, and the old audit
    dropped a third of its seeds for "'1.25' in instruction.md"."""
    answer = {"o.json": [{"loan": "LN-1", "fine": 1.25}, {"loan": "LN-2", "fine": 13.75}]}
    for rule in ("Fines are 1.25 per day late.", "Charge €1.25 a day.", "1.25 EUR/day"):
        assert find_leak_signals(answer, {"i": rule}, LOANS, {"abs": 0.001}) == [], rule
    told = find_leak_signals(answer, {"i": "LN-2 owes 13.75 in all."}, LOANS, {"abs": 0.001})
    assert told == [("'13.75' in i", "i", "certain")]


def test_data_files_and_prose_files_are_told_apart() -> None:
    assert is_data('{"sales": [1, 2]}') and is_data("a,b\n1,2\n3,4\n")
    assert is_data('{"a": 1}\n{"a": 2}\n') and is_data("x\ty\n1\t2\n3\t4\n")
    assert not is_data("Keeper notes. Totals this run: HV-1 3.5 kg, HV-2 4.25 kg.\n")
    assert not is_data("") and not is_data("Totals: HV-1 3.5, HV-2 4.25\nAsk me, Bo\n")


def _folder(tmp: Path, instruction: str, files: dict[str, str]) -> Path:
    contract = {
        "outputs": [{"path": "output/p.json", "format": "json", "schema": {}}],
        "tolerance": {"abs": 0.001},
        "decisions": [],
    }
    (tmp / "tests").mkdir(parents=True, exist_ok=True)
    (tmp / "tests/contract.json").write_text(json.dumps(contract))
    (tmp / "tests/answer.json").write_text(json.dumps({"output/p.json": {"York": 375.79}}))
    (tmp / "instruction.md").write_text(instruction)
    for rel, text in files.items():
        (tmp / "environment/workspace" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "environment/workspace" / rel).write_text(text)
    return tmp


def test_an_answer_in_an_unnamed_data_file_warns_and_in_an_unnamed_note_drops(
    tmp_path: Path,
) -> None:
    """An instruction may describe its input without its path ("the only export in the
    workspace"): the largest sale is then in that file as data, not as a note's giveaway."""
    export = json.dumps({"sales": [{"shop": "York", "amount": "375.79"}]})
    ok, reason = check_leak(_folder(tmp_path / "a", "Find the largest sale.", {"e/x.json": export}))
    assert ok and reason.startswith("warning: ") and "e/x.json" in reason, reason
    notes = "Keeper notes: York peaked at 375.79 this week.\n"
    ok, reason = check_leak(
        _folder(tmp_path / "b", "Find the largest sale.", {"e/x.json": export, "NOTES.txt": notes})
    )
    assert not ok and "'375.79' in workspace file NOTES.txt" in reason, reason


def forged(path: Path, seed: int, ok: bool = True) -> dict:
    row = forge_candidate(candidate_row(path.read_text(), seed), BWRAP)
    assert row["status"] == "ok" or not ok, row["error"]
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


# ---- the corpus: sound generators kept, hostile ones dropped ------------------------------------

# Each hostile generator (hostile/, and the planted ones beside them) -> the check that must drop
# it and a phrase of its reason. A generator cannot ship a no-op pass (its output already in the
# workspace): forge refuses it, and verify drops the failed row.
HOSTILE_REASONS = {
    "hostile/total_in_instruction": ("leak", "answer values visible to the agent: '"),
    "hostile/total_in_decisions": ("leak", "answer values visible to the agent: '"),
    "hostile/top_hive_in_instruction": ("leak", "top_hive='HV-"),
    "hostile/top_hive_in_words": ("leak", "top_hive='HV-"),
    "hostile/selection_in_instruction": ("leak", "the flagged selection"),
    "hostile/answer_in_notes": ("leak", "in workspace file NOTES.txt"),
    "hostile/clock_seeded": ("determinism", "two builds with one seed differ"),
    "hostile/hash_ordered": ("determinism", "two builds with one seed differ"),
    "hostile/undefined_field": ("decision_fields", "define grand_total, which no output"),
    "hostile/backticked_field": ("decision_fields", "define peakday, which no output"),
    "hostile/assigned_field": ("decision_fields", "define mean_kg, which no output"),
    "hostile/wrong_rounding": ("oracle", "reference solution scores 0."),
    "hostile/no_anomalies": ("trivial:empty", "the verifier accepts it"),
    "hostile/all_zero": ("trivial:constant", "the verifier accepts it"),
    "hostile/copy_of_input": ("trivial:copy_inputs", "the verifier accepts it"),
    "hostile/output_preexists": ("forge", "already exist in the starting workspace"),
    "leaky": ("leak", "answer values visible"),
    "nondeterministic": ("determinism", "differ"),
    "bad_solve": ("oracle", "reference solution scores"),
    "answer_in_workspace": ("answer_file", "copying README.txt to the outputs passes"),
}
# The default run's share, one seed each: the issue's generator, an unnamed input, a report; a
# categorical leak, a field written as code, an empty answer. The rest, and every case at every
# seed of SEEDS, are marked slow.
SOUND_FAST = {"plot_totals", "peak_sale", "budget_report"}
HOSTILE_FAST = {
    "hostile/top_hive_in_instruction",
    "hostile/backticked_field",
    "hostile/no_anomalies",
}
SEEDS = (1, 2, 3)


def _cases(names: list[str], fast: set[str]) -> list:
    out = [pytest.param(n, SEEDS, marks=pytest.mark.slow, id=n) for n in names]
    return out + [pytest.param(n, SEEDS[:1], id=f"{n}-fast") for n in names if n in fast]


def test_the_corpus_is_big_enough_and_every_hostile_one_has_a_reason() -> None:
    assert len(SOUND) >= 20
    assert {f"hostile/{p.stem}" for p in HOSTILE} <= set(HOSTILE_REASONS)
    assert all((FIXTURES / f"{n}.py").is_file() for n in HOSTILE_REASONS)
    # every kind of drop the sandbox and the text checks make is exercised
    kinds = {c for c, _ in HOSTILE_REASONS.values()}
    assert {"leak", "determinism", "decision_fields", "oracle", "answer_file", "forge"} <= kinds
    assert {"trivial:empty", "trivial:constant", "trivial:copy_inputs"} <= kinds


@needs_bwrap
@pytest.mark.parametrize(("name", "seeds"), _cases([p.stem for p in SOUND], SOUND_FAST))
def test_every_sound_generator_is_kept(name: str, seeds: tuple[int, ...]) -> None:
    """Prose decisions, JSON maps and records, CSV, ordered lists, reports, unnamed inputs:
    every check keeps each seed; what a check read from prose is at most a warning."""
    for seed in seeds:
        checks, verdict = verify_task(forged(FIXTURES / "sound" / f"{name}.py", seed), BWRAP)
        failed = {c["check"]: c["reason"] for c in checks if not c["passed"]}
        assert verdict["kept"] and not failed, (seed, failed)


@needs_bwrap
@pytest.mark.parametrize(("name", "seeds"), _cases(list(HOSTILE_REASONS), HOSTILE_FAST))
def test_every_hostile_generator_is_dropped_for_its_reason(
    name: str, seeds: tuple[int, ...]
) -> None:
    check, needle = HOSTILE_REASONS[name]
    for seed in seeds:
        checks, verdict = verify_task(forged(FIXTURES / f"{name}.py", seed, ok=False), BWRAP)
        failed = {c["check"]: c["reason"] for c in checks if not c["passed"]}
        assert not verdict["kept"], (seed, verdict)
        assert check in failed and needle in failed[check], (seed, failed)
        assert not is_warning(next(c for c in checks if c["check"] == check))
