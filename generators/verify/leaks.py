"""The pure text checks verify runs on a task: the leak audit (is an answer value, or a
categorical answer stated as the answer, visible to the agent?) and the decision fields (does
every field a decision defines appear in some output?). No I/O: generators/verify/__init__.py reads the
task and calls these. Both read prose, so each finding says how sure it is: "certain" (a name
written as code, a value tied to it by ":" or "=", a computed figure) drops a task, "guess" (a
plain word that may be English) only warns.

    find_leaks(answer, {"instruction.md": text}, inputs_text, tolerance) -> ["'20378.5' in ..."]
    find_leak_signals(...) -> [("'20378.5' in instruction.md", "instruction.md", "certain")]
    undefined_decision_fields(contract, answer, files) -> ["summary", ...]
    unheld_decision_fields(contract, answer, files) -> {"summary": "certain", "values": "guess"}
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import re
from collections.abc import Iterator
from typing import Any

from clawloop.harness.taskfolder.grader import NUMBER_WORDS

# ---- leak check: pure ----------------------------------------------------------------------

_WORDY = re.compile(r"^[A-Za-z]+$")
_NUMERIC = re.compile(r"^-?\d+(\.\d+)?$")


def _leaves(value: Any) -> Iterator[Any]:
    """Scalar leaves of an answer value (dict values, list items), not dict keys."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _significant_digits(text: str) -> int:
    """Digits that carry information: 3.00 has 1, 250 has 2 (a round number, likely a threshold
    in the instruction rather than a computed answer), 23.47 has 4."""
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return len(text.lstrip("-").replace(".", "").strip("0"))


def is_revealing_string(s: str, inputs_text: str) -> bool:
    """A string answer value worth protecting: not an everyday word (single alphabetic token),
    at least 4 characters, and computed rather than copied — a value found verbatim in the
    starting workspace (an id, a name) tells the reader nothing the files do not."""
    s = s.strip()
    if len(s) < 4 or _WORDY.match(s):
        return False
    return s not in inputs_text


# A number as prose writes it, on token boundaries: scientific, thousands-grouped with commas or
# spaces, a decimal comma, or plain. Each may read several ways ("20,378" is 20378 or 20.378).
_PROSE_NUMBER = re.compile(
    r"(?<![\w.])("
    r"\d+(?:\.\d+)?[eE][+-]?\d+"
    r"|\d{1,3}(?:,\d{3}){1,6}(?:\.\d+)?"
    r"|\d{1,3}(?:[ \u00a0\u202f]\d{3}){1,6}(?:,\d+)?"
    r"|\d+,\d+"
    r"|\d+(?:\.\d+)?"
    r")(?![\w]|[.,]\d)"
)


def _readings(token: str) -> set[float]:
    """The values a written number can mean (magnitudes: a sign is ignored)."""
    t = token.replace(" ", "").replace("\u00a0", "").replace("\u202f", "")
    out = set()
    for text in {t.replace(",", ""), t.replace(".", "").replace(",", ".")} if "," in t else {t}:
        with contextlib.suppress(ValueError):
            out.add(abs(float(text)))
    return out


def prose_numbers(text: str) -> list[float]:
    """Every number `text` states, in any common format, sorted (magnitudes)."""
    return sorted({v for m in _PROSE_NUMBER.finditer(text) for v in _readings(m.group(1))})


def _within(values: list[float], x: float, slack: float) -> bool:
    i = bisect.bisect_left(values, abs(x) - slack)
    return i < len(values) and values[i] <= abs(x) + slack


def revealing_number(leaf: Any) -> float | None:
    """A numeric answer value worth protecting (3+ significant digits), or None."""
    if isinstance(leaf, str) and _NUMERIC.match(leaf.strip()):
        leaf = float(leaf)
    if isinstance(leaf, bool) or not isinstance(leaf, int | float) or not math.isfinite(leaf):
        return None
    text = str(int(leaf)) if float(leaf).is_integer() else repr(float(leaf))
    return float(leaf) if _significant_digits(text) >= 3 else None


def _slack(x: float, tolerance: dict[str, float]) -> float:
    return max(float(tolerance.get("abs", 0.0)), float(tolerance.get("rel", 0.0)) * abs(x), 1e-9)


# How sure a finding is: "certain" drops a task, "guess" (prose that may say something else)
# only warns. A Leak is (what, where: the text's name, how sure).
CERTAIN, GUESS = "certain", "guess"
Leak = tuple[str, str, str]


def find_leaks(
    answer: Any,
    texts: dict[str, str],
    inputs_text: str,
    tolerance: dict[str, float],
    keys: frozenset[str] = frozenset(),
) -> list[str]:
    """Each non-trivial answer value that one of `texts` (name -> text) states, as "VALUE in
    NAME" (find_leak_signals, certain or guessed)."""
    return [what for what, _, _ in find_leak_signals(answer, texts, inputs_text, tolerance, keys)]


def find_leak_signals(
    answer: Any,
    texts: dict[str, str],
    inputs_text: str,
    tolerance: dict[str, float],
    keys: frozenset[str] = frozenset(),
) -> list[Leak]:
    """Each non-trivial answer value that one of `texts` (name -> text) states: a number written
    in any common format (20,378.5 / 20 378,5 / 2.04e4, either sign) within the grader's
    tolerance of it, or a computed string on token boundaries (both certain: a 3-digit figure
    or a computed label does not occur by chance); then each categorical value stated as the
    answer (categorical_leak_signals; `keys` name the fields that identify a row). A year of the
    inputs' dates and a number a rule gives as a threshold are the task's parameters, not
    answers."""
    found: list[Leak] = []
    seen: set[str] = set()
    numbers = {name: prose_numbers(text) for name, text in texts.items()}
    given, years = given_numbers(texts), input_years(inputs_text)
    for leaf in _leaves(answer):
        value = revealing_number(leaf)
        if value is not None:
            label = str(leaf)
            if (
                label in seen
                or _is_year(label.removesuffix(".0"), years)
                or _within(given, value, _slack(value, tolerance))
            ):
                continue
            for name in texts:
                if _within(numbers[name], value, _slack(value, tolerance)):
                    seen.add(label)
                    found.append((f"{label!r} in {name}", name, CERTAIN))
                    break
        elif isinstance(leaf, str) and is_revealing_string(leaf, inputs_text):
            s = leaf.strip()
            rx = re.compile(r"(?<![\w.])" + re.escape(s) + r"(?![\w]|\.\d)")
            for name, text in texts.items():
                if s not in seen and rx.search(text):
                    seen.add(s)
                    found.append((f"{s!r} in {name}", name, CERTAIN))
                    break
    return found + categorical_leak_signals(answer, texts, inputs_text, keys)


def is_data(text: str) -> bool:
    """Is a file's text data (JSON, JSON lines, or delimited rows) rather than prose? A data
    file the instruction describes without naming its path is an input, so an answer value in
    it may be copied data (a maximum), not a note that gives the answer away."""
    text = text.strip()
    if not text:
        return False
    with contextlib.suppress(ValueError):
        return isinstance(json.loads(text), dict | list)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) >= 2 and all(ln.lstrip().startswith(("{", "[")) for ln in lines):
        return True
    # Rows: a header and two rows at least, each with as many delimiters (a note's two lines
    # with a comma each are prose).
    return len(lines) >= 3 and any(
        lines[0].count(d) >= 1 and all(ln.count(d) == lines[0].count(d) for ln in lines)
        for d in (",", "\t", ";", "|")
    )


# ---- categorical answers: pure -----------------------------------------------------------------

# A number a rule gives as a parameter ("more than 37.5 kg", "at least 250"): the task's input,
# so an answer value that echoes it (a threshold column) is not told by that rule.
_GIVEN = re.compile(
    r"(?<![\w])(?:(?:more|greater|fewer|less|larger|smaller|higher|lower)\s+than|above|below|over|under"
    r"|at\s+(?:least|most)|exceed(?:s|ing)?|threshold(?:\s+of)?|limit(?:\s+of)?|cut-?off(?:\s+of)?"
    r"|>=?|<=?|\u2265|\u2264)\s*(?:of\s+|is\s+)?(\d+(?:[.,]\d+)?(?:[eE][+-]?\d+)?)",
    re.I,
)
# A rate a rule gives ("1.25 per day", "€3.50 an hour", "0.8 kg/hive", "2.5 each"): a parameter
# too, which an answer for a single unit (a loan one day late) repeats.
_RATE = re.compile(
    r"(?<![\w.,])(\d+(?:[.,]\d+)?)\s*(?:[^\W\d_]{1,12}\s*)?"
    r"(?:(?:per|an?|each|every)\b|/\s*[^\W\d_])",
    re.I,
)
# Dates the inputs hold: their years name the period the task covers, not a computed value.
_DATE_YEAR = re.compile(r"(?<!\d)((?:19|20)\d\d)-[01]\d(?:-[0-3]\d)?(?!\d)")
_CLAUSE = re.compile(r'\n|(?<=[.;!?])(?<!e\.g\.)(?<!i\.e\.)\s+|,\s*"')
_DEFINING = re.compile(r"\s+(?:when|if|unless|only|for\s+(?:each|every|a|an|the))\b", re.I)
# A small count the text may spell out ("three flagged"): the words the grader reads as numbers.
_NUMBER_WORDS = NUMBER_WORDS[:13]


def given_numbers(texts: dict[str, str]) -> list[float]:
    """Numbers the texts give as rule parameters (thresholds, limits, rates), sorted magnitudes."""
    return sorted(
        {
            v
            for t in texts.values()
            for rx in (_GIVEN, _RATE)
            for m in rx.finditer(t)
            for v in _readings(m.group(1))
        }
    )


def input_years(inputs_text: str) -> set[int]:
    return {int(y) for y in _DATE_YEAR.findall(inputs_text)}


def _id_like(v: Any) -> bool:
    return isinstance(v, str) and any(c.isdigit() for c in v) and 3 <= len(v.strip()) <= 40


def _shape(s: str) -> str:
    """A regex for tokens written like s (HV-0412 -> letters, dash, four digits)."""
    out = []
    for c in s:
        out.append(
            r"\d"
            if c.isdigit()
            else "[A-Z]"
            if c.isupper()
            else "[a-z]"
            if c.islower()
            else re.escape(c)
        )
    return r"(?<![\w-])" + "".join(out) + r"(?![\w]|-\w)"


def _tokens(shapes: set[str], text: str) -> set[str]:
    return {m.group(0) for rx in shapes for m in re.finditer(rx, text)}


def _records(value: Any, keys: frozenset[str], depth: int = 0) -> Iterator[tuple[dict, tuple]]:
    """Every dict in an answer value with the identity of the row it is: the values of its key
    fields (`keys`, or the id-like keys of a map it sits in); () for a summary or fixed record."""

    def walk(v: Any, ident: tuple, d: int) -> Iterator[tuple[dict, tuple]]:
        if d > 12:
            return
        if isinstance(v, dict):
            own = tuple(str(v[k]) for k in sorted(keys & set(v)) if isinstance(v[k], str))
            yield v, own or ident
            for k, x in v.items():
                yield from walk(x, (str(k),) if _id_like(k) else ident, d + 1)
        elif isinstance(v, list):
            for x in v:
                yield from walk(x, ident, d + 1)

    yield from walk(value, (), depth)


def _selections(value: Any, keys: frozenset[str]) -> list[tuple[str, set[str]]]:
    """The answer's selections of ids: the rows of each list of records (by its one key field),
    those rows split by each boolean field, lists of id strings, id-keyed maps."""
    out: list[tuple[str, set[str]]] = []

    def walk(v: Any, name: str, d: int) -> None:
        if d > 12:
            return
        if isinstance(v, dict):
            ids = [k for k in v if _id_like(k)]
            if ids and len(ids) == len(v):
                out.append((name, set(ids)))
            for k, x in v.items():
                walk(x, str(k), d + 1)
        elif isinstance(v, list) and v:
            if all(_id_like(x) for x in v):
                out.append((name, {x.strip() for x in v}))
            rows = [x for x in v if isinstance(x, dict)]
            if rows and len(rows) == len(v):
                key = [k for k in rows[0] if (k in keys or not keys) and _id_like(rows[0][k])]
                if key and all(_id_like(r.get(key[0])) for r in rows):
                    k = key[0]
                    out.append((name, {r[k].strip() for r in rows}))
                    for f in rows[0]:
                        if isinstance(rows[0][f], bool):
                            for flag in (True, False):
                                part = {r[k].strip() for r in rows if r.get(f) is flag}
                                if part and len(part) < len(rows):
                                    out.append((f"{name} with {f} {str(flag).lower()}", part))
            for x in v:
                walk(x, name, d + 1)

    walk(value, "", 0)
    return out


def _selection_told(selection: set[str], universe: set[str], text: str, shapes: set[str]) -> bool:
    """Does `text` name the selection rather than the ids at large? Half of it at least, with
    more of its ids among those the text names than the inputs' share of them would give."""
    named = _tokens(shapes, text) & universe
    hit = named & selection
    if not hit or len(hit) * 2 < len(selection) or len(universe) <= len(selection):
        return False
    base = len(selection) / len(universe)
    return len(hit) / len(named) >= base + (1 - base) / 2


def _value_forms(v: Any) -> list[str] | None:
    if isinstance(v, bool):
        return ["true", "yes"] if v else ["false", "no"]
    if isinstance(v, int):
        return [str(v)] + ([_NUMBER_WORDS[v]] if 0 <= v < len(_NUMBER_WORDS) else [])
    if isinstance(v, str) and v.strip():
        return [v.strip()]
    return None


# What may stand between a field's name and the value a text tells for it: punctuation, quotes
# and a linking verb ("top_hive is HV-0412", "busiest month: 2024-03", `"flagged": 4`).
_LINK = r"""["'`*\s]*(?:[:=]|\b(?:is|are|was|were|equals|of|came\s+to|comes\s+to))?["'`*\s]*"""
_CONDITION = re.compile(r"\b(?:with|where|whose|when|if|unless|while)\s+(?:its\s+|the\s+)?$", re.I)


# A clause that gives an example: its values illustrate, and may match the answer by chance.
_EXAMPLE = re.compile(
    r"(?<!\w)(?:e\.g\.|for\s+(?:example|instance)|such\s+as|like|say)(?!\w)", re.I
)


def _stated(
    clause: str, field: str, forms: list[str], row: tuple, label: bool = False
) -> str | None:
    """The clause names the field (as written or in words) and the value right after it (or
    right before it: "4 flagged"), not as a condition or a definition ("rows with reconciled
    false", "reconciled is true when ..."), and, for a row's field, names the row too. CERTAIN
    when the field is written as code (top_hive, `flagged`, "flagged"), tied to its value by
    ":" or "=" ("busiest month: 2024-03"), or is a `label` (a string value: an id, a month)
    that words state outside an example ("the top hive is HV-0412"); GUESS when prose puts a
    plain word by a number or a boolean ("a hive with 2 flagged weeks", "flagged is 2": the
    number may be a rule's parameter) or the clause gives an example ("e.g. the top hive is
    HV-0412")."""
    if row and not any(r in clause and re.search(_shape_literal(r), clause) for r in row):
        return None
    worded = label and not _EXAMPLE.search(clause)
    best = None
    for name in {field, field.replace("_", " ")}:
        for m in re.finditer(r"(?<![\w])" + re.escape(name) + r"(?![\w])", clause, re.I):
            if _CONDITION.search(clause[max(0, m.start() - 16) : m.start()]):
                continue
            quoted = clause[m.start() - 1 : m.start()] in ('"', "'", "`") and m.start() > 0
            coded = quoted or (m.group(0) == field and _code_form(field))
            for form in forms:
                lit = r"(?<![\w.,-])" + re.escape(form) + r"(?![\w]|[.,]\d|-\w)"
                after = re.compile(_LINK + lit, re.I).match(clause, m.end())
                if after and not _DEFINING.match(clause, after.end()):
                    linked = any(c in clause[m.end() : after.end()] for c in ":=")
                    if coded or linked or worded:
                        return CERTAIN
                    best = GUESS
                before = re.search(
                    lit + r"[\s:=]{1,3}$", clause[max(0, m.start() - 16) : m.start()], re.I
                )
                if before:
                    if coded or any(c in before.group(0) for c in ":="):
                        return CERTAIN
                    best = GUESS
    return best


def _shape_literal(s: str) -> str:
    return r"(?<![\w-])" + re.escape(s) + r"(?![\w]|-\w)"


def categorical_leaks(
    answer: Any, texts: dict[str, str], inputs_text: str, keys: frozenset[str] = frozenset()
) -> list[str]:
    """Categorical answer values a text states *as the answer* (categorical_leak_signals)."""
    return [what for what, _, _ in categorical_leak_signals(answer, texts, inputs_text, keys)]


def categorical_leak_signals(
    answer: Any, texts: dict[str, str], inputs_text: str, keys: frozenset[str] = frozenset()
) -> list[Leak]:
    """Categorical answer values a text states *as the answer*: a summary's or a row's field
    with its value ("top_hive is HV-0412", "busiest month: 2024-03", "HV-0412 reconciled: no",
    "flagged: 4"; how sure, see _stated), or a selection of ids (the flagged readings, the
    unreconciled entries) that a text lists (certain when it names two of them or more, a guess
    for one: an example id may be picked by chance). Ids and years the inputs hold are not
    leaks by appearing: their selection is."""
    found: list[Leak] = []
    years = input_years(inputs_text)
    clauses = {
        name: [(c, c.lower()) for c in _CLAUSE.split(text) if c.strip()]
        for name, text in texts.items()
    }
    lowered = {name: text.lower() for name, text in texts.items()}
    seen: set[str] = set()
    for rec, row in _records(answer, keys):
        for field, v in rec.items():
            forms = _value_forms(v)
            if (
                forms is None
                or _id_like(field)
                or (isinstance(v, int | str) and _is_year(v, years))
            ):
                continue
            if (not isinstance(v, bool) and revealing_number(v) is not None) or (
                isinstance(v, str) and is_revealing_string(v, inputs_text)
            ):
                continue  # a computed number or string: find_leaks flags it anywhere in a text
            label = f"{field}={v!r}" + (f" of {row[0]}" if row else "")
            if label in seen:
                continue
            names = (field.lower(), field.replace("_", " ").lower())
            guessed: Leak | None = None
            for name, cs in clauses.items():
                if not any(n in lowered[name] for n in names):
                    continue
                # The cheap test first: most clauses name none of the answer's fields.
                how = {
                    _stated(c, field, forms, row, isinstance(v, str))
                    for c, lc in cs
                    if names[0] in lc or names[1] in lc
                }
                if CERTAIN in how:
                    guessed = (f"{label} stated in {name}", name, CERTAIN)
                    break
                if GUESS in how and guessed is None:
                    guessed = (f"{label} stated in {name}", name, GUESS)
            if guessed is not None:
                seen.add(label)
                found.append(guessed)
    for name_sel, sel in _selections(answer, keys):
        shapes = {_shape(s) for s in sel}
        universe = _tokens(shapes, inputs_text) | sel
        for name, text in texts.items():
            if _selection_told(sel, universe, text, shapes):
                what = (
                    f"the {name_sel or 'answer'} selection"
                    + f" ({', '.join(sorted(sel)[:3])}{', ...' if len(sel) > 3 else ''})"
                )
                named = len(_tokens(shapes, text) & sel)
                found.append((f"{what} listed in {name}", name, CERTAIN if named > 1 else GUESS))
                break
    return found


def _is_year(v: Any, years: set[int]) -> bool:
    s = str(v).strip()
    return s.isdigit() and int(s) in years


# ---- decision fields: pure --------------------------------------------------------------------

# How a decision defines a field: "name = ...", or a clause opening on a lower-case identifier
# with a defining verb ("records counts the rows", "top_hive is the ..."; "; peak_total is"), or
# a backticked name with one ("`peak` is the ..."). Not a unit equation ("1 lb = 0.4536 kg").
_ASSIGNED = re.compile(r"(?<![\w/.-])(?<!\d )(`?)([A-Za-z][A-Za-z0-9_]*)\1\s*=\s")
_DEFINED = re.compile(
    r"(?:^|[.;:]\s+|(?<=\s)(?=`))(`?)([A-Za-z][A-Za-z0-9_]*)\1\s+"
    r"(?:is|are|counts|sums|gives|means|equals)\b"
)
_BODY_END = re.compile(r"[.;](?:\s|$)|$")
_NOT_FIELDS = frozenset(
    ("a", "all", "an", "any", "both", "each", "every", "it", "its", "none", "one", "such")
    + ("that", "the", "their", "then", "there", "these", "this", "those", "what", "which", "who")
)
# A name written as code: with an underscore, a digit or an inner capital (snake_case, camelCase),
# never an English word. A plain word ("values are sums", "records counts") may be prose.
_IDENTIFIER = re.compile(r"^[A-Za-z][a-z0-9]*(?:[_0-9A-Z][A-Za-z0-9]*)*$")


def _code_form(name: str) -> bool:
    return _IDENTIFIER.match(name) is not None and (
        "_" in name or any(c.isdigit() for c in name) or any(c.isupper() for c in name[1:])
    )


def decision_field_signals(decisions: list[str]) -> dict[str, str]:
    """The field names the decisions define, in order of first definition, each with how sure
    the reading is: "certain" when the decision writes it as code (`name = ...`, a backticked
    name, a snake_case or camelCase name before a defining verb, a lower-case word assigned
    with =), "guess" when it is a plain word opening a prose clause ("values are sums rounded",
    "Total = ..." beginning a sentence), which may be English rather than a field, or a name
    another definition uses ("net_kg = gross_kg - tare_kg; total_kg sums net_kg"): a step on
    the way to an output, not one of its own."""
    found: dict[str, str] = {}
    used: dict[str, set[str]] = {}  # name -> the names whose definitions use it
    for d in decisions:
        matches = [(m, True) for m in _ASSIGNED.finditer(d)]
        matches += [(m, False) for m in _DEFINED.finditer(d)]
        for m, assigned in sorted(matches, key=lambda x: x[0].start()):
            name = m.group(2)
            body = d[m.end() : _BODY_END.search(d, m.end()).start()]  # type: ignore[union-attr]
            for token in re.findall(r"[A-Za-z][A-Za-z0-9_]*", body):
                used.setdefault(token, set()).add(name)
            if name.lower() in _NOT_FIELDS or (
                not assigned and name[0].isupper() and not _code_form(name)
            ):
                continue  # "Date is DD/MM/YYYY", "Keys are ...": a sentence's first word
            certain = (
                bool(m.group(1))  # backticks
                or _code_form(name)
                or (assigned and name.islower())
            )
            if found.get(name) != "certain":
                found[name] = "certain" if certain else "guess"
    for name, how in found.items():
        if how == "certain" and used.get(name, set()) - {name}:
            found[name] = "guess"
    return found


def decision_fields(decisions: list[str]) -> list[str]:
    """The field names the decisions define, in order of first definition."""
    return list(decision_field_signals(decisions))


def _names(value: Any, out: set[str], depth: int = 0) -> set[str]:
    """Every key (and string, for names a state's predicates hold) in a JSON value."""
    if depth > 12:
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(str(k))
            _names(v, out, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _names(v, out, depth + 1)
    elif isinstance(value, str):
        out.update(re.findall(r"\w+", value))
    return out


def unheld_decision_fields(
    contract: dict[str, Any], answer: dict[str, Any], files: dict[str, str]
) -> dict[str, str]:
    """Fields the decisions define that no contract output holds (nor the starting files name,
    as columns and keys the rules read), each with how sure the reading is ("certain" or
    "guess", see decision_field_signals): a rule for an output the agent is never asked for."""
    known: set[str] = set()
    for o in contract.get("outputs", []):
        known.update(str(c) for c in o.get("columns", []) or [])
        _names(o.get("schema") or {}, known)
    for value in answer.values():  # graded values: keys of objects and records
        _names(value if isinstance(value, dict | list) else {}, known)
    for rel, text in files.items():
        known.update(re.findall(r"\w+", rel + "\n" + text))
    # A name's case is the sentence's ("Total_kg sums ..." opening one), not another field's.
    folded = {k.casefold() for k in known}
    signals = decision_field_signals(contract.get("decisions") or [])
    return {f: how for f, how in signals.items() if f.casefold() not in folded}


def undefined_decision_fields(
    contract: dict[str, Any], answer: dict[str, Any], files: dict[str, str]
) -> list[str]:
    """Every field of unheld_decision_fields, certain or guessed."""
    return list(unheld_decision_fields(contract, answer, files))
