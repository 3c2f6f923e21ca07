"""The generic grader: compares a task's outputs with its hidden answer key under the contract.

STANDARD LIBRARY ONLY: forge copies this file into every task's tests/ folder and tests/test.sh runs

    python3 grader.py --tests-dir /tests --workspace /workspace --out /logs/verifier/reward.json

inside the sandbox, with answer.json and contract.json beside it. Importable too:

    grade(contract: dict, answer: dict, workspace: str) -> {"reward", "passed", "checks"}

Each output yields named checks (readable, columns, keys, one per column or JSON field); the reward is
the fraction passed, and a task passes at 1.0. CSV rows are matched by the contract's key columns
and JSON list items by the schema's "key", order-insensitively; numbers compare within the
contract's tolerance (abs + rel * |expected|). Outputs are hostile: only regular files inside the
workspace are read (no symlink escapes, no FIFOs), reads are capped, and any failure becomes a
failed check with its reason, never a crash.
"""

from __future__ import annotations

import bisect
import csv
import functools
import io
import json
import math
import os
import re
import stat
import sys

# Imported for the type checker only: `typing` (and argparse, which main() imports) would cost
# every grading interpreter a few ms of its start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_BYTES = 16 * 1024 * 1024  # largest output file the grader reads
MAX_ROWS = 200_000
MAX_DETAIL = 300
EPS = 1e-9  # float slack so a value exactly at the tolerance passes


class OutputUnreadable(Exception):
    """An output file is missing, escapes the workspace, is too big or does not parse."""


# ---------------------------------------------------------------- safe reading


def inside(rel: str) -> bool:
    """Is `rel` a relative path that stays inside the folder it is taken from? (An absolute one
    or one through `..` would mean a different file wherever the workspace is put.)"""
    parts = str(rel).replace("\\", "/").split("/")
    return bool(rel) and not os.path.isabs(rel) and ".." not in parts


def read_output(workspace: str, rel: str, limit: int | None = None) -> str:
    limit = MAX_BYTES if limit is None else limit
    if not inside(rel):
        raise OutputUnreadable(f"{rel} is not a path inside the workspace")
    root = os.path.realpath(workspace)
    path = os.path.realpath(os.path.join(root, rel))
    if not path.startswith(root + os.sep):
        raise OutputUnreadable(f"{rel} resolves outside the workspace")
    try:
        st = os.stat(path)
    except OSError:
        raise OutputUnreadable(f"{rel} does not exist") from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputUnreadable(f"{rel} is not a regular file")
    if st.st_size > limit:
        raise OutputUnreadable(f"{rel} is {st.st_size} bytes; the grader reads at most {limit}")
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OutputUnreadable(f"{rel} grew past {limit} bytes while reading")
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def parse_json(text: str, rel: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise OutputUnreadable(f"{rel} is not valid JSON: {str(e)[:120]}") from None


def parse_csv(text: str, rel: str) -> tuple[list[str], list[dict[str, str]]]:
    csv.field_size_limit(MAX_BYTES)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, None)
        if not header:
            raise OutputUnreadable(f"{rel} has no header row")
        header = [h.strip() for h in header]
        repeated = sorted({h for h in header if header.count(h) > 1})
        if repeated:
            raise OutputUnreadable(f"{rel} repeats header column(s) {repeated}")
        rows = []
        for i, rec in enumerate(reader):
            if i >= MAX_ROWS:
                raise OutputUnreadable(f"{rel} has more than {MAX_ROWS} rows")
            if not any(c.strip() for c in rec):
                continue
            rows.append({h: (rec[j] if j < len(rec) else "") for j, h in enumerate(header)})
        return header, rows
    except csv.Error as e:
        raise OutputUnreadable(f"{rel} is not valid CSV: {e}") from None


# ---------------------------------------------------------------- value comparison


def _num(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        try:
            return float(x)
        except OverflowError:
            return None
    if isinstance(x, str):
        try:
            return float(x.strip())
        except (ValueError, OverflowError):
            return None
    return None


# The contract can relax what is strict by default, per output: `"lenient": [...]` of these.
LENIENCIES = ("column_order", "extra_columns", "extra_fields", "int_as_float", "bool_words")
BOOL_WORDS = {"yes": True, "no": False, "1": True, "0": False}


def _bool(x: Any, words: bool = False) -> bool | None:
    """A boolean, from JSON true/false or a CSV cell "true"/"false" (yes/no/1/0 with `words`)."""
    if isinstance(x, bool):
        return x
    if isinstance(x, str):
        s = x.strip().lower()
        return {"true": True, "false": False}.get(s, BOOL_WORDS.get(s) if words else None)
    return None


def values_equal(
    exp: Any, got: Any, tol: dict[str, float], depth: int = 0, lenient: frozenset = frozenset()
) -> bool:
    """Expected vs got: a CSV cell may be the text of the value, the value itself is strict: an
    integer must be a whole number, a boolean true/false, an object exactly the expected keys
    (each of these relaxed only by a leniency the contract declares)."""
    if depth > 50:
        return False
    if isinstance(exp, bool):
        return _bool(got, "bool_words" in lenient) is exp
    if isinstance(exp, int | float):
        g = _num(got)
        if g is None or math.isnan(g):
            return False
        if isinstance(exp, int) and not g.is_integer() and "int_as_float" not in lenient:
            return False
        return (
            abs(g - float(exp)) <= tol.get("abs", 0.0) + tol.get("rel", 0.0) * abs(float(exp)) + EPS
        )
    if exp is None:
        return got is None or (isinstance(got, str) and not got.strip())
    if isinstance(exp, str):
        return isinstance(got, str) and got.strip() == exp.strip()
    if isinstance(exp, list):
        return (
            isinstance(got, list)
            and len(got) == len(exp)
            and all(
                values_equal(e, g, tol, depth + 1, lenient) for e, g in zip(exp, got, strict=True)
            )
        )
    if isinstance(exp, dict):
        if not isinstance(got, dict) or ("extra_fields" not in lenient and set(got) - set(exp)):
            return False
        return all(
            k in got and values_equal(v, got[k], tol, depth + 1, lenient) for k, v in exp.items()
        )
    return exp == got


def key_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(float(v))
    if v is None:
        return ""
    return str(v).strip()


def _key_of_cell(exp_sample: Any, cell: Any) -> str:
    """Normalise an actual key value the way the expected one of that column is normalised."""
    if isinstance(exp_sample, int | float) and not isinstance(exp_sample, bool):
        n = _num(cell)
        return repr(n) if n is not None else str(cell).strip()
    if isinstance(exp_sample, bool):
        b = _bool(cell)
        return key_text(b) if b is not None else str(cell).strip()
    return (
        ""
        if cell is None
        else str(cell).strip()
        if isinstance(cell, str | int | float)
        else json.dumps(cell)
    )


def _short(x: Any) -> str:
    s = x if isinstance(x, str) else json.dumps(x, default=str)
    return s if len(s) <= 60 else s[:57] + "..."


# ---------------------------------------------------------------- checks


Check = dict  # {"name": str, "passed": bool, "detail": str}


def _check(name: str, passed: bool, detail: str = "") -> Check:
    return {"name": name, "passed": bool(passed), "detail": detail[:MAX_DETAIL]}


def compare_rows(
    name: str,
    exp_rows: list[dict[str, Any]],
    got_rows: list[dict[str, Any]] | None,
    key: list[str],
    fields: list[str],
    tol: dict[str, float],
    lenient: frozenset = frozenset(),
    record_fields: bool = False,
) -> list[Check]:
    """Keyed, order-insensitive comparison (by position without a key): one check for the key
    set, one per non-key field, and with `record_fields` (JSON records; a CSV's header is checked
    as its columns) one that no row holds a field the answer does not."""
    allowed = set(fields) | set(key)
    fields = [f for f in fields if f not in key]
    if got_rows is None:
        return [_check(f"{name}: keys", False, "no rows to compare")] + [
            _check(f"{name}: {f}", False, "no rows to compare") for f in fields
        ]
    samples = {k: (exp_rows[0].get(k) if exp_rows else "") for k in key}
    if not key:  # no key: match by position
        exp_idx = {str(i): r for i, r in enumerate(exp_rows)}
        got_idx = {str(i): r for i, r in enumerate(got_rows) if isinstance(r, dict)}
        dups: list[str] = []
    else:
        exp_idx = {"|".join(key_text(r.get(k)) for k in key): r for r in exp_rows}
        got_idx, dups = {}, []
        for r in got_rows:
            if not isinstance(r, dict):
                continue
            kt = "|".join(_key_of_cell(samples[k], r.get(k)) for k in key)
            if kt in got_idx:
                dups.append(kt)
            else:
                got_idx[kt] = r
    missing = [k for k in exp_idx if k not in got_idx]
    extra = [k for k in got_idx if k not in exp_idx]
    ok = not missing and not extra and not dups and len(got_rows) == len(got_idx)
    detail = (
        ""
        if ok
        else (
            f"{len(missing)} missing (e.g. {_short(missing[:3])}), {len(extra)} unexpected "
            f"(e.g. {_short(extra[:3])}), {len(dups)} duplicate"
        )
    )
    checks = [_check(f"{name}: keys", ok, detail or f"{len(exp_idx)} rows matched")]
    if record_fields and "extra_fields" not in lenient:
        unknown = sorted({f for r in got_idx.values() for f in r if f not in allowed})
        checks.append(
            _check(
                f"{name}: fields",
                not unknown,
                f"fields the contract does not ask for: {_short(unknown)}"
                if unknown
                else "as asked",
            )
        )
    for f in fields:
        bad = []
        for k, er in exp_idx.items():
            gr = got_idx.get(k)
            if gr is None or f not in gr:
                bad.append(f"{k}: missing")
            elif not values_equal(er.get(f), gr.get(f), tol, lenient=lenient):
                bad.append(f"{k}: expected {_short(er.get(f))}, got {_short(gr.get(f))}")
        checks.append(
            _check(
                f"{name}: {f}",
                not bad,
                f"{len(bad)} wrong; first: {bad[0]}" if bad else "all match",
            )
        )
    return checks


def compare_json(
    name: str,
    exp: Any,
    got: Any,
    schema: dict[str, Any] | None,
    tol: dict[str, float],
    present: bool = True,
    depth: int = 0,
    lenient: frozenset = frozenset(),
) -> list[Check]:
    """Walk the expected JSON: objects check their keys (none missing, none extra: a keyed map
    listing entities it should not fails) and recurse, lists of records compare like CSV rows
    (by the schema's "key", else by position when the schema says "ordered"), leaves compare."""
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(exp, dict) and depth < 8:
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        each = schema.get("additionalProperties")  # a map keyed by data: one schema for all values
        sub = got if present and isinstance(got, dict) else None
        checks = []
        if present:
            extra = sorted(sub) if sub is None else sorted(set(sub) - set(exp))
            allowed = each is True or "extra_fields" in lenient
            ok = sub is not None and (allowed or not extra)
            why = "not an object" if sub is None else f"unexpected keys {_short(extra)}"
            checks.append(_check(f"{name}: keys", ok, "as expected" if ok else why))
        for k, v in exp.items():
            has = sub is not None and k in sub
            child = props.get(k, each if isinstance(each, dict) else None)
            checks += compare_json(
                f"{name}.{k}", v, sub.get(k) if has else None, child, tol, has, depth + 1, lenient
            )
        return checks
    if isinstance(exp, list) and exp and all(isinstance(x, dict) for x in exp):
        key = schema.get("key") if isinstance(schema.get("key"), list) else []
        fields = sorted({f for x in exp for f in x})
        rows = got if present and isinstance(got, list) else None
        keys = [str(k) for k in key]
        return compare_rows(f"{name}[]", exp, rows, keys, fields, tol, lenient, record_fields=True)
    if not present:
        return [_check(name, False, "missing")]
    if isinstance(exp, list) and schema.get("unordered") and isinstance(got, list):
        ok = len(exp) == len(got) and sorted(map(json.dumps, exp)) == sorted(map(json.dumps, got))
        return [_check(name, ok, "" if ok else f"expected {_short(exp)}, got {_short(got)}")]
    ok = values_equal(exp, got, tol, lenient=lenient)
    return [_check(name, ok, "match" if ok else f"expected {_short(exp)}, got {_short(got)}")]


# ---------------------------------------------------------------- free reports
#
# A report output is graded on its text too, against criteria the hidden answer key holds under
# the report's path: {"facts": [...], "forbidden": [...]}. A fact is {"about": {key column:
# value}, "field": name, "value": scalar} (a row's value: stated in a table row or sentence that
# names the row's key) or {"about": {}, "field": name, "value": v} (an overall figure: stated
# next to its name, or for a number anywhere outside the rows); "where": "anywhere" facts (items
# of a plain list) may stand anywhere. A forbidden fact is one the report must not state (a
# value an out-of-scope row would have had). Numbers are read in any common written form
# (20,378.5 / 20 378,5 / 2.04e4 / twelve), by magnitude, within the contract's tolerance.
# Without criteria in the key (older task folders) the facts come from the sidecar's answer.

REPORT_MAX_BYTES = 1 << 20  # a report is for people: longer ones are not read
MAX_NUMBERS_PER_KEY = 64  # a row stating more distinct numbers than this is a number dump
MAX_LOOSE_NUMBERS = 256  # the same for the text outside the rows (overall figures)
REPORT_WHERE = ("row", "named", "anywhere")
_REPORT_NUMBER = re.compile(
    r"(?<![\w.])("
    r"\d+(?:\.\d+)?[eE][+-]?\d+"
    r"|\d{1,3}(?:,\d{3}){1,6}(?:\.\d+)?"
    r"|\d{1,3}(?:[ \u00a0\u202f]\d{3}){1,6}(?:[.,]\d+)?"
    r"|\d+,\d+"
    r"|\d+(?:\.\d+)?"
    r")(?!\d|[.,]\d)"
)
NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b")
_DATE = re.compile(r"(?<!\d)(?:\d{4}-\d{2}(?:-\d{2})?|\d{1,2}/\d{1,2}/\d{4})(?!\d)")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}")
_WORD = re.compile(r"[a-z0-9]+")
_NEGATION = r"(?:\bnot|\bnever|n't|\bfail(?:s|ed)?)"


def number_readings(token: str) -> set[float]:
    """The magnitudes a written number can mean: "20,378" is 20378 or 20.378; "12 345" is
    12345 (or 12 and 345)."""
    t = re.sub(r"[ \u00a0\u202f]", "", token)
    texts = {t.replace(",", ""), t.replace(".", "").replace(",", ".")} if "," in t else {t}
    if t != token:
        texts |= set(re.split(r"[ \u00a0\u202f]", token.replace(",", ".")))
    out = set()
    for text in texts:
        try:
            v = abs(float(text))
        except (ValueError, OverflowError):
            continue
        if math.isfinite(v):
            out.add(v)
    return out


def number_tokens(text: str) -> list[set[float]]:
    """Each number `text` states, in order: the magnitudes it can mean (number words too)."""
    found = [(m.start(), number_readings(m.group(1))) for m in _REPORT_NUMBER.finditer(text)]
    found += [
        (m.start(), {float(NUMBER_WORDS.index(m.group(1)))})
        for m in _NUMBER_WORD.finditer(text.lower())
    ]
    return [r for _, r in sorted(found, key=lambda x: x[0]) if r]


def text_numbers(text: str) -> set[float]:
    """Every number `text` states (magnitudes), small number words included."""
    return set().union(set(), *number_tokens(text))


def _stem(word: str) -> str:
    return word[:5]


def _fact_label(field: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(str(field).lower())]


class _Span:
    """A piece of report text: the terms it names, its numbers (terms and dates taken out), its
    word stems, and the row key it is about (its own mention, else the one before it)."""

    __slots__ = ("text", "terms", "tokens", "numbers", "ordered", "stems", "primary", "own")

    def __init__(self, text: str, terms_rx: re.Pattern | None, primary: str | None, own: bool):
        low = text.casefold()
        self.text = low
        self.terms = set(terms_rx.findall(low)) if terms_rx else set()
        bare = terms_rx.sub(" ", low) if terms_rx else low
        self.tokens = number_tokens(_DATE.sub(" ", bare))
        self.numbers = set().union(set(), *self.tokens)
        self.ordered = sorted(self.numbers)

        self.stems = {_stem(w) for w in _WORD.findall(low)}
        self.primary, self.own = primary, own

    def near(self, x: float, tol: dict[str, float]) -> bool:
        """Whether some number here may be within the tolerance of `x` (a quick filter)."""
        slack = tol.get("abs", 0.0) + tol.get("rel", 0.0) * abs(x) + 2 * EPS
        i = bisect.bisect_left(self.ordered, x - slack)
        return i < len(self.ordered) and self.ordered[i] <= x + slack


def _terms_rx(terms: set[str]) -> re.Pattern | None:
    terms = {t for t in terms if t}
    if not terms:
        return None
    alts = "|".join(re.escape(t) for t in sorted(terms, key=lambda t: (-len(t), t)))
    return re.compile(r"(?<![\w])(?:" + alts + r")(?![\w])")


def _report_units(text: str) -> list[tuple[str, str]]:
    """(kind, text): headings, table rows and rules whole, prose split into sentences."""
    units = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            units.append(("heading", s))
        elif _TABLE_RULE.match(s):
            units.append(("rule", s))
        elif s.startswith("|"):
            units.append(("row", s))
        else:
            units += [("prose", p) for p in _SENTENCE_END.split(s) if p.strip()]
    return units


class ReportText:
    """A report split for fact finding: units (sentences, table rows) and, within each, spans
    that start at a row key's mention (the text before the first mention joins the first)."""

    def __init__(self, text: str, primaries: set[str], terms: set[str]):
        self.primaries_rx = _terms_rx(primaries)
        self.terms_rx = _terms_rx(terms | primaries)
        self.units: list[_Span] = []
        self.by_key: dict[str, list[_Span]] = {}
        carry: str | None = None
        for kind, unit in _report_units(text):
            low = unit.casefold()
            starts = [m for m in self.primaries_rx.finditer(low)] if self.primaries_rx else []
            self.units.append(_Span(unit, self.terms_rx, None, bool(starts)))
            if not starts:
                if kind in ("heading", "rule"):
                    carry = None
                elif carry is not None:
                    self.by_key[carry].append(_Span(unit, self.terms_rx, carry, False))
                continue
            cuts = [0] + [m.start() for m in starts[1:]] + [len(unit)]
            for m, a, b in zip(starts, cuts, cuts[1:], strict=False):
                key = m.group(0)
                self.by_key.setdefault(key, []).append(_Span(unit[a:b], self.terms_rx, key, True))
            carry = starts[-1].group(0)
        self.dumps = {
            k
            for k, spans in self.by_key.items()
            if len(set().union(*(s.numbers for s in spans))) > MAX_NUMBERS_PER_KEY
        }
        loose = [u for u in self.units if not u.own]
        self.loose = (
            loose
            if len(set().union(set(), *(u.numbers for u in loose))) <= (MAX_LOOSE_NUMBERS)
            else []
        )


def _bool_claim(span: _Span, field: str) -> bool | None:
    """What a span says of a boolean field: False on false, a cross or a negated field word
    ("not reconciled", "unreconciled", "fails to reconcile"), True on true, yes, a tick or the
    field word itself, None when it says neither."""
    stems = _fact_label(field)
    stem = re.escape(stems[-1]) if stems else "(?!)"
    negated = (
        r"\bfalse\b|[\u2717\u2718\u274c]|\b(?:un|non-?|in)"
        + stem
        + "|"
        + _NEGATION
        + r"\W+(?:\w+\W+){0,2}?"
        + stem
    )
    if re.search(negated, span.text):
        return False
    if re.search(r"\btrue\b|\byes\b|[\u2713\u2714\u2705]|\b" + stem, span.text):
        return True
    return None


def _states(span: _Span, fact: dict[str, Any], tol: dict[str, float]) -> bool:
    exp = fact.get("value")
    if isinstance(exp, bool):
        return _bool_claim(span, str(fact.get("field", ""))) is exp
    if isinstance(exp, int | float):
        mag = -exp if exp < 0 else exp  # numbers are read as magnitudes ("a loss of 3.2")
        return any(values_equal(mag, n, tol) for n in span.numbers)
    return _term(exp) in span.terms


def _term(v: Any) -> str:
    return (key_text(v) if isinstance(v, bool) else str(v)).strip().casefold()


def _about(fact: dict[str, Any]) -> list[str]:
    about = fact.get("about") if isinstance(fact.get("about"), dict) else {}
    return [_term(v) for v in about.values()]


def _row_number(
    report: ReportText, fact: dict[str, Any], tol: dict[str, float], used: set | None
) -> bool:
    """A row's number, found in its own written number: two fields of one row that share a
    value must be stated twice (one wrong copy fails), so each number serves one fact."""
    about = _about(fact)
    exp = fact["value"]
    mag = -exp if exp < 0 else exp
    rest = set(about[1:])
    for i, s in enumerate(report.by_key.get(about[0], [])):
        if not rest <= s.terms or not s.near(float(mag), tol):
            continue
        for j, readings in enumerate(s.tokens):
            if (about[0], i, j) in (used or ()):
                continue
            if any(values_equal(mag, n, tol) for n in readings):
                if used is not None:
                    used.add((about[0], i, j))
                return True
    return False


def find_fact(
    report: ReportText,
    fact: dict[str, Any],
    tol: dict[str, float],
    strict: bool = False,
    used: set | None = None,
) -> bool:
    """Whether the report states `fact` where it must: a row's value in a span about its key
    naming the key's other parts (a number not taken by another fact of the row, given `used`);
    an overall figure in a unit naming it (a number also in any unit outside the rows unless
    `strict`); an "anywhere" fact in any unit."""
    about = _about(fact)
    if about:
        if about[0] in report.dumps:
            return False
        exp = fact.get("value")
        if isinstance(exp, int | float) and not isinstance(exp, bool):
            return _row_number(report, fact, tol, used)
        rest = set(about[1:])
        return any(
            rest <= s.terms and _states(s, fact, tol) for s in report.by_key.get(about[0], [])
        )
    if fact.get("where") == "anywhere":
        return any(_states(u, fact, tol) for u in report.units)
    label = set(_fact_label(str(fact.get("field", ""))))
    if any(label <= u.stems and _states(u, fact, tol) for u in report.units):
        return True
    exp = fact.get("value")
    numeric = isinstance(exp, int | float) and not isinstance(exp, bool)
    return numeric and not strict and any(_states(u, fact, tol) for u in report.loose)


def _fact_name(fact: dict[str, Any]) -> str:
    about = fact.get("about") if isinstance(fact.get("about"), dict) else {}
    where = ", ".join(f"{k} {key_text(v)}" for k, v in about.items())
    return f"{fact.get('field')} of {where}" if where else str(fact.get("field"))


def report_facts(value: Any, schema: Any, name: str = "", depth: int = 0) -> list[dict[str, Any]]:
    """The facts a report must state, from its sidecar's answer: each record's fields next to
    its key (lists of records by the schema's "key", keyed maps by their keys), each other value
    next to its name; items of plain lists and of lists matched by position anywhere."""
    schema = schema if isinstance(schema, dict) else {}
    scalar = (str, int, float, bool)
    facts: list[dict[str, Any]] = []
    if depth > 8:
        return facts

    def fact(about: dict[str, Any], field: str, v: Any, where: str = "") -> None:
        if isinstance(v, scalar) and not (isinstance(v, str) and not v.strip()):
            facts.append(
                {"about": about, "field": field, "value": v, **({"where": where} if where else {})}
            )

    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        each = schema.get("additionalProperties")
        keyed = isinstance(each, dict) and not props
        for k, v in value.items():
            if keyed and isinstance(v, dict):
                for f, x in v.items():
                    fact({name or "key": k}, str(f), x)
            elif keyed:
                fact({name or "key": k}, name or "value", v)
            elif isinstance(v, dict | list):
                facts += report_facts(v, props.get(k, each), str(k), depth + 1)
            else:
                fact({}, str(k), v)
    elif isinstance(value, list):
        key = schema.get("key") if isinstance(schema.get("key"), list) else []
        for item in value:
            if isinstance(item, dict) and key and all(k in item for k in key):
                about = {str(k): item[k] for k in key}
                for f, x in item.items():
                    if f not in key:
                        fact(about, str(f), x)
            elif isinstance(item, dict):
                for f, x in item.items():
                    fact({}, str(f), x, "anywhere")
            else:
                fact({}, name, item, "anywhere")
    return facts


def report_criteria(answer: dict[str, Any], o: dict[str, Any]) -> dict[str, Any]:
    """The criteria for a report output: the key's, else the facts of its sidecar's answer."""
    crit = answer.get(str(o.get("path", "")))
    crit = dict(crit) if isinstance(crit, dict) else {}
    if not isinstance(crit.get("facts"), list):
        crit["facts"] = report_facts(answer.get(str(o.get("sidecar", ""))), o.get("schema"))
    return crit


def grade_report(path: str, text: str, crit: dict[str, Any], tol: dict[str, float]) -> list[Check]:
    """One check per field the facts name (every fact of it stated) and one that no forbidden
    fact is stated."""
    facts = [f for f in crit.get("facts") or [] if isinstance(f, dict)]
    forbidden = [f for f in crit.get("forbidden") or [] if isinstance(f, dict)]
    primaries = {a[0] for f in facts + forbidden if (a := _about(f))}
    terms = {t for f in facts + forbidden for t in _about(f)[1:]}
    terms |= {_term(f["value"]) for f in facts + forbidden if isinstance(f.get("value"), str)}
    report = ReportText(text, primaries, terms)
    by_field: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    used: set = set()
    for f in facts:
        label = str(f.get("field"))
        counts[label] = counts.get(label, 0) + 1
        if not find_fact(report, f, tol, used=used):
            by_field.setdefault(label, []).append(
                f"{_fact_name(f)} (expected {_short(f.get('value'))})"
            )
    checks = []
    for label, n in counts.items():
        bad = by_field.get(label, [])
        detail = f"{len(bad)} of {n} not stated; first: {bad[0]}" if bad else f"{n} stated"
        checks.append(_check(f"{path}: states {label}", not bad, detail))
    if forbidden:
        claimed = [_fact_name(f) for f in forbidden if find_fact(report, f, tol, strict=True)]
        checks.append(
            _check(
                f"{path}: no forbidden claims",
                not claimed,
                f"states what is not so: {_short(claimed[:3])}" if claimed else "none",
            )
        )
    return checks


def _grade_output(
    o: dict[str, Any], answer: dict[str, Any], workspace: str, tol: dict[str, float]
) -> list[Check]:
    fmt, path = o.get("format"), str(o.get("path", ""))
    lenient = frozenset(str(x) for x in o.get("lenient", []) or [])
    checks: list[Check] = []
    if fmt == "state":  # a domain task's final database state, graded by end-state predicates
        state = _state_module()

        def equal(e: Any, g: Any) -> bool:
            return values_equal(e, g, tol, lenient=lenient)

        found = state.grade_state(o, answer.get(path), workspace, read_output, equal)
        return [_check(name, ok, detail) for name, ok, detail in found]
    if fmt == "report":
        crit = report_criteria(answer, o)
        try:
            text = read_output(workspace, path, REPORT_MAX_BYTES)
            ok = bool(text.strip())
            checks.append(_check(f"{path}: report written", ok, "non-empty" if ok else "empty"))
        except OutputUnreadable as e:
            text = ""
            checks.append(_check(f"{path}: report written", False, str(e)))
        checks += grade_report(path, text, crit, tol)
        path = str(o.get("sidecar", ""))
    exp = answer.get(path)
    if fmt == "csv":
        columns = [str(c) for c in o.get("columns", [])]
        key = [str(k) for k in o.get("key", [])]
        try:
            header, rows = parse_csv(read_output(workspace, path), path)
        except OutputUnreadable as e:
            return [
                _check(f"{path}: readable", False, str(e)),
                _check(f"{path}: columns", False, "unreadable"),
            ] + compare_rows(path, exp or [], None, key, columns, tol, lenient)
        checks += [
            _check(f"{path}: readable", True, f"{len(rows)} rows"),
            _columns_check(path, header, columns, lenient),
        ]
        return checks + compare_rows(
            path, exp if isinstance(exp, list) else [], rows, key, columns, tol, lenient
        )
    # json, or a report's sidecar
    try:
        got, present, why = parse_json(read_output(workspace, path), path), True, "parsed"
    except OutputUnreadable as e:
        got, present, why = None, False, str(e)
    checks.append(_check(f"{path}: readable", present, why))
    return checks + compare_json(path, exp, got, o.get("schema"), tol, present, lenient=lenient)


@functools.cache
def _state_module() -> Any:
    """state_predicates.py, which forge copies beside this file (only state outputs need it)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "state_predicates.py")
    spec = importlib.util.spec_from_file_location("clawloop_state_predicates", path)
    if spec is None or spec.loader is None or not os.path.isfile(path):
        raise OutputUnreadable(f"{path} is missing: state outputs need state_predicates.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _columns_check(path: str, header: list[str], columns: list[str], lenient: frozenset) -> Check:
    """The header holds the contract's columns, in its order, and no others (unless lenient)."""
    absent = [c for c in columns if c not in header]
    extra = [h for h in header if h not in columns]
    if absent:
        return _check(f"{path}: columns", False, f"missing {absent}")
    if extra and "extra_columns" not in lenient:
        return _check(f"{path}: columns", False, f"columns the contract does not ask for: {extra}")
    in_order = [h for h in header if h in columns] == columns
    if not in_order and "column_order" not in lenient:
        return _check(f"{path}: columns", False, f"expected in this order: {columns}, got {header}")
    return _check(f"{path}: columns", True, "as the contract lists them")


def grade(contract: dict[str, Any], answer: dict[str, Any], workspace: str) -> dict[str, Any]:
    """Reward in [0, 1] = fraction of checks passed; passed only at 1.0. Never raises on bad outputs."""
    checks: list[Check] = []
    try:
        tol_in = contract.get("tolerance") or {}
        tol = {"abs": float(tol_in.get("abs", 0.0)), "rel": float(tol_in.get("rel", 0.0))}
        outputs = contract.get("outputs") or []
        if not outputs:
            raise ValueError("the contract names no outputs")
        for o in outputs:
            try:
                checks += _grade_output(o, answer, workspace, tol)
            except Exception as e:  # a grader bug on one output must not sink the others
                checks.append(
                    _check(
                        f"{o.get('path', '?')}: graded",
                        False,
                        f"grader error: {type(e).__name__}: {e}",
                    )
                )
    except Exception as e:
        checks.append(_check("grader", False, f"{type(e).__name__}: {e}"))
    n = len(checks)
    passed = sum(c["passed"] for c in checks)
    reward = passed / n if n else 0.0
    return {"reward": reward, "passed": n > 0 and passed == n, "checks": checks}


def _reason(result: dict[str, Any]) -> str:
    """Why a grade is below 1.0, in one line: the grader's error, else the first failed check."""
    if result.get("error"):
        return str(result["error"])[:MAX_DETAIL]
    for c in result.get("checks") or []:
        if not c.get("passed"):
            return f"{c.get('name')}: {c.get('detail')}"[: 2 * MAX_DETAIL]
    return "" if result.get("passed") else "reward below 1.0"


def _write(path: str, doc: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, path)


def write_result(out: str, details: str, result: dict[str, Any]) -> None:
    """Two files, details first so a reward never appears without them:
    `details` {"reward", "passed", "checks", "reason"} for clawloop and for people, and `out`
    (reward.json) {"reward": 1.0 | 0.0, "fraction": float} — numbers only, since Harbor counts
    every value of reward.json as a reward and fails a trial on any non-numeric one. `reward` is
    the outcome (the task passes or not: what a benchmark scores, so doing nothing never earns
    partial credit for the checks it happens not to break); `fraction` is the share of checks
    passed (the shaped reward, details' "reward")."""
    reward = float(result["reward"])
    _write(
        details,
        {
            "reward": reward,
            "passed": bool(result.get("passed")),
            "checks": list(result.get("checks") or []),
            "reason": _reason(result),
        },
    )
    _write(out, {"reward": 1.0 if result.get("passed") else 0.0, "fraction": reward})


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        description="Grade a workspace's outputs against the hidden answer key."
    )
    ap.add_argument(
        "--tests-dir", default="/tests", help="folder holding answer.json and contract.json"
    )
    ap.add_argument("--workspace", default="/workspace")
    ap.add_argument("--out", default="/logs/verifier/reward.json", help='{"reward": float}')
    ap.add_argument(
        "--details",
        default=None,
        help="passed, per-check details and reason (default: details.json beside --out)",
    )
    args = ap.parse_args(argv)
    details = args.details or os.path.join(os.path.dirname(args.out), "details.json")
    try:
        with open(os.path.join(args.tests_dir, "contract.json"), encoding="utf-8") as f:
            contract = json.load(f)
        with open(os.path.join(args.tests_dir, "answer.json"), encoding="utf-8") as f:
            answer = json.load(f)
        result = grade(contract, answer, args.workspace)
    except BaseException as e:  # the verifier must always leave a reward behind
        if isinstance(e, KeyboardInterrupt):
            raise
        result = {
            "reward": 0.0,
            "passed": False,
            "checks": [_check("grader", False, f"{type(e).__name__}: {e}")],
        }
    write_result(args.out, details, result)
    failed = [c["name"] for c in result["checks"] if not c["passed"]]
    print(
        f"reward {result['reward']:.4f} ({len(result['checks']) - len(failed)}/{len(result['checks'])} checks)"
        + (f"; failed: {', '.join(failed[:8])}" if failed else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
