"""From a reference run's initial and final state to end-state predicates and a goal.

Pure. The diff of the two states (records located by business key) becomes the task's tests
(harness/taskfolder/state_predicates.py evaluates them), complete about the end state so that
collateral damage costs reward: a field predicate per changed field and, per changed record, one
that its other fields stay as they were (and no field appears or goes); a count predicate per
created or removed record (a created record is matched by its field values, never by the id a
tool assigned it, and must have exactly the fields, of the JSON kinds, the tools wrote); per
table a guard that every other record is unchanged (a digest per record, keyed by business key,
so the answer key stays small and a failure names the record); that no table appears or
disappears; and for a sqlite store that the schema (tables, columns, constraints) is the
starting one. All of them
are predicates on the final state, so any path to the right end state passes.

The same diff, with the values the instruction may state told apart from those the domain's
tools derive, is the `Goal` the instruction writer sees: entities by business key, the changes
required, the branch condition, the constraints; never the steps or the tools that made them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from clawloop.harness.taskfolder.state_predicates import key_ident, kind_of, record_digest
from clawloop.synthesis.domain.ground import Grounded, Step, all_refs, names_field, ref_of

Tables = dict[str, list[dict[str, Any]]]
KEY_FIELD = "_key"  # json tables keyed by primary key keep the key here (runtime.as_records)


def locator(table: str, rows: list[dict[str, Any]], keys: dict[str, str]) -> str | None:
    """The field that identifies a record of `table` for tests: the declared business key, else
    the json object key, else a unique id/code field; None when no field is unique."""

    def unique(f: str) -> bool:
        vals = [json.dumps(r.get(f), sort_keys=True) for r in rows if f in r]
        return len(vals) == len(rows) and len(set(vals)) == len(rows)

    candidates = [keys.get(table, ""), KEY_FIELD, "id"]
    candidates += sorted(f for r in rows[:1] for f in r if f.endswith(("_id", "_code", "code")))
    return next((f for f in candidates if f and rows and unique(f)), None)


def _ident(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


@dataclass(frozen=True)
class Change:
    kind: str  # changed | created | deleted
    table: str
    key_field: str | None
    key: Any
    new: dict[str, Any] = field(
        default_factory=dict
    )  # changed: field -> new value; created: record
    stated: tuple[str, ...] = ()  # fields whose new value the instruction may give
    via: dict[str, Any] | None = None  # the record is the one a lookup led to

    def ident(self) -> str:
        return _ident([self.kind, self.table, self.key, sorted(self.new.items())])


def diff(initial: Tables, final: Tables, keys: dict[str, str]) -> list[Change]:
    out: list[Change] = []
    for t in sorted(set(initial) | set(final)):
        before, after = initial.get(t, []), final.get(t, [])
        loc = locator(t, before or after, keys)
        if loc is None:  # no unique field: created/removed as whole records
            b = {_ident(r) for r in before}
            a = {_ident(r) for r in after}
            out += [Change("created", t, None, None, dict(r)) for r in after if _ident(r) not in b]
            out += [Change("deleted", t, None, None, dict(r)) for r in before if _ident(r) not in a]
            continue
        old = {_ident(r.get(loc)): r for r in before}
        new = {_ident(r.get(loc)): r for r in after}
        for k, r in new.items():
            if k not in old:
                out.append(Change("created", t, loc, r.get(loc), dict(r)))
            elif r != old[k]:
                changed = {
                    f: r.get(f) for f in sorted(set(r) | set(old[k])) if r.get(f) != old[k].get(f)
                }
                out.append(Change("changed", t, loc, r.get(loc), changed))
        out += [Change("deleted", t, loc, r.get(loc)) for k, r in old.items() if k not in new]
    return out


def literals(steps: list[Step]) -> list[Any]:
    """The values the plan passes as literals: what an instruction may state."""
    return [v for s in steps for v in s.params.values() if not isinstance(v, dict | list)]


def _stated(value: Any, given: list[Any]) -> bool:
    """A value equal to a literal the plan passes (a boolean never by value alone: true and
    false are everywhere; a boolean is stated through the parameter that names its field)."""
    return not isinstance(value, bool) and any(
        type(value) is type(g) and value == g for g in given if not isinstance(g, bool)
    )


# (parameter, value, lookup record or None): every argument a plan's steps pass; a value
# from a lookup ({"$ref": [step, field]}) carries that lookup's record (Grounded.references).
Argument = tuple[str, Any, dict[str, Any] | None]


def arguments(g: Grounded, steps: list[Step] | None = None) -> list[Argument]:
    """Where each argument of the plan's steps (both arms by default) came from: a literal or
    a lookup. A lookup's own key is among them: the instruction names that record anyway."""
    out: list[Argument] = []
    for s in steps if steps is not None else g.steps + (g.alt_steps or []):
        for name, v in s.params.items():
            if isinstance(v, dict) and "$ref" in v:
                ref = ref_of(g, v["$ref"][0], v["$ref"][1])
                if ref is not None:
                    out.append((name, ref["value"], ref))
            else:  # a literal; a whole list or object too (an airline's `passengers`)
                out.append((name, v, None))
    return out


def same_value(arg: Any, value: Any) -> bool:
    """Does the value a field holds equal the argument passed (a boolean stored as 0/1 in
    sqlite included)?"""
    if isinstance(arg, bool) and not isinstance(value, bool):
        return isinstance(value, int) and value in (0, 1) and int(arg) == value
    return kind_of(arg) == kind_of(value) and arg == value


def source(
    table: str, name: str, value: Any, given: list[Any], args: list[Argument]
) -> tuple[str, dict[str, Any] | None]:
    """("stated" | "referenced" | "derived", the lookup record when referenced) for one value a
    change writes: an argument whose parameter names the field says where it came from (that
    is how a boolean or a date is known to be the plan's); otherwise a literal equal to it."""
    named = [(v, ref) for p, v, ref in args if names_field(p, name, table) and same_value(v, value)]
    if any(ref is None for _, ref in named):
        return "stated", None
    if named:
        return "referenced", named[0][1]
    if _stated(value, given):
        return "stated", None
    return "derived", None


def leaves(value: Any, key: str = "") -> list[tuple[str, Any]]:
    """(the key it sits under, value) of every scalar inside a nested field (a list item takes
    its list's key): where a tool puts the arguments it nests (a certificate's `amount` inside
    `payment_methods`)."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, str(k))]
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in leaves(v, key)]
    return [(key, value)]


def nested_in(param: str, arg: Any, value: Any, table: str) -> str | None:
    """The key under which a nested field holds the argument passed as `param` (a boolean or a
    null only under a key the parameter names: they are everywhere); None when it holds none."""
    if not isinstance(value, dict | list) or isinstance(arg, dict | list):
        return None
    for key, leaf in leaves(value):
        loose = not isinstance(arg, bool) and arg is not None
        if same_value(arg, leaf) and (loose or names_field(param, key, table)):
            return key
    return None


MAX_GIVEN = 600  # chars of JSON: a longer list or object passed as a literal is not restated


def lands(param: str, arg: Any, value: Any, table: str) -> bool:
    """Does a nested field hold something of a list or object passed whole as `param` (an
    airline's `passengers`): one of its scalars, under the key the field keeps it by?"""
    if not isinstance(arg, dict | list):
        return False
    return any(nested_in(k or param, x, value, table) is not None for k, x in leaves(arg, param))


def _record(rows: list[dict[str, Any]], key_field: str | None, key: Any) -> dict[str, Any] | None:
    want = _ident(key)
    return next((r for r in rows if key_field and _ident(r.get(key_field)) == want), None)


def predicates(
    initial: Tables,
    final: Tables,
    changes: list[Change],
    given: list[Any],
    keys: dict[str, str],
    args: list[Argument] | None = None,
    sql_schema: list[list[str]] | None = None,
) -> list[dict[str, Any]]:
    """The tests for one reference run: what changed, and a guard for everything else. `args`
    (arguments()) tell which written values the plan passed, so the instruction states them;
    `sql_schema` (a sqlite store's starting schema) must still be the schema at the end."""
    out: list[dict[str, Any]] = []
    args = args or []

    def hidden(t: str, f: str, v: Any) -> bool:
        return source(t, f, v, given, args)[0] == "derived"

    passed = given + [v for _, v, ref in args if ref is not None]

    def hidden_parts(t: str, f: str, v: Any, old: Any) -> list[Any]:
        """What of a derived value the agent must not be told: a scalar whole; of a nested one
        (an order's `payment_history`, a user's `payment_methods`) only the leaves that are new
        to the record and not a value the plan passes (the refund's type, a new balance): the
        ids and figures it already held, or the task gives, are no answer."""
        if not hidden(t, f, v):
            return []
        if not isinstance(v, dict | list):
            return [v]
        before = {(k, _ident(x)) for k, x in leaves(old)} if old is not None else set()
        return [
            {k: x}
            for k, x in leaves(v)
            if (k, _ident(x)) not in before and not _stated(x, passed) and x is not None
        ]

    for c in changes:
        if c.kind == "changed":
            after = _record(final.get(c.table, []), c.key_field, c.key) or {}
            start = _record(initial.get(c.table, []), c.key_field, c.key) or {}
            for f, v in c.new.items():
                if f not in after:  # the reference removed the field: `rest` says it is gone
                    continue
                out.append(
                    {
                        "kind": "field",
                        "table": c.table,
                        "match": {c.key_field: c.key},
                        "field": f,
                        "value": v,
                        "hidden": hidden_parts(c.table, f, v, start.get(f)),
                    }
                )
            out.append(
                {
                    "kind": "rest",
                    "table": c.table,
                    "match": {c.key_field: c.key},
                    "fields": sorted(after),
                    "values": {f: v for f, v in sorted(after.items()) if f not in c.new},
                }
            )
        elif c.kind == "deleted":
            match = {c.key_field: c.key} if c.key_field else c.new
            out.append({"kind": "count", "table": c.table, "match": match, "count": 0})
        else:  # created: matched by its values, not by an assigned key
            assigned = {c.key_field, KEY_FIELD}  # ids a tool assigns: never how tests find it
            match = {f: v for f, v in c.new.items() if f not in assigned or _stated(v, given)}
            n = sum(all(r.get(f) == v for f, v in match.items()) for r in final.get(c.table, []))
            out.append(
                {
                    "kind": "count",
                    "table": c.table,
                    "match": match,
                    "count": n,
                    "fields": {f: kind_of(v) for f, v in sorted(c.new.items())},
                    "hidden": [v for f, v in match.items() if hidden(c.table, f, v)],
                }
            )
    for t in sorted(final):
        rows = final[t]
        loc = locator(t, initial.get(t) or rows, keys)
        # Each untouched record once, as its digest (keyed by its business key, so a failure
        # names the record): the state itself lives in the workspace, not in the answer key.
        digests: dict[str, str] | list[str]
        if loc is None:  # records identical to a starting one: the created ones drop out
            start = {record_digest(r) for r in initial.get(t, [])}
            digests = sorted({d for r in rows if (d := record_digest(r)) in start})
        else:
            skip = {_ident(c.key) for c in changes if c.table == t and c.key_field == loc}
            digests = {
                key_ident(r.get(loc)): record_digest(r)
                for r in rows
                if _ident(r.get(loc)) not in skip
            }
        out.append(
            {"kind": "unchanged", "table": t, "key": loc, "digests": digests, "total": len(rows)}
        )
    out.append({"kind": "tables", "tables": sorted(final)})
    if sql_schema is not None:
        out.append({"kind": "schema", "schema": sql_schema})
    return out


@dataclass(frozen=True)
class Goal:
    """What the instruction writer sees (the information barrier: no steps, no tool names)."""

    domain: str
    description: str
    changes: list[dict[str, Any]]  # unconditional changes
    condition: dict[str, Any] | None = None  # table, key_field, key, field, value
    then_changes: list[dict[str, Any]] = field(default_factory=list)
    else_changes: list[dict[str, Any]] = field(default_factory=list)
    recovery: bool = False  # a rule refuses a step until its cause is fixed
    taught: bool = False  # the fix is left out: the refusal teaches it (Taught)
    same_day: bool = False  # the fix is dated the day of the change it unblocks
    # values the fix passes that neither the refusal nor the state teaches (a cancel's reason):
    # stated, without the record the fix changes, which the agent finds
    fix_values: dict[str, Any] = field(default_factory=dict)
    any_fix: bool = False  # any fix that lets the refused change through passes (alternatives.py)
    constraints: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _describe(
    c: Change, given: list[Any], refs: list[dict[str, Any]], args: list[Argument]
) -> dict[str, Any]:
    """A change as the writer may see it: stated values, values a lookup leads to (named by the
    record they come from), and fields the tools derive (named, never valued). Where a value
    came from is the plan's argument that names its field; else a literal or lookup equal to it."""
    by_value = {_ident(r["value"]): r for r in refs}

    def told(ref: dict[str, Any]) -> dict[str, Any]:
        """The record a value is read from: by its key, or (reached through a chain) by the
        chain alone, so that no writer sees the key of a record the instruction must not name."""
        if ref.get("via"):
            return {**{k: ref[k] for k in ("table", "key_field", "field")}, "via": ref["via"]}
        return {k: ref[k] for k in ("table", "key_field", "key", "field")}

    values = c.new if c.kind != "deleted" else {}
    fields = [f for f in values if f not in (c.key_field, KEY_FIELD)]
    stated: dict[str, Any] = {}
    referenced: dict[str, dict[str, Any]] = {}
    for f in fields:
        how, ref = source(c.table, f, values[f], given, args)
        if how == "derived" and _ident(values[f]) in by_value and values[f] is not None:
            how, ref = "referenced", by_value[_ident(values[f])]
        if how == "stated":
            stated[f] = values[f]
        elif how == "referenced" and ref is not None:
            referenced[f] = told(ref)
    derived = sorted(f for f in fields if f not in stated and f not in referenced)
    # An argument a tool nests inside a derived field (a certificate's amount inside
    # `payment_methods`) is still the plan's choice: stated, or named by the record it is read
    # from. A value the tool generates (a new id) is no argument, so it stays unsaid.
    inside: dict[str, dict[str, Any]] = {}
    inside_referenced: dict[str, dict[str, dict[str, Any]]] = {}
    follows: dict[str, dict[str, Any]] = {}  # a looked-up list or object the field is built from
    given_whole: dict[str, Any] = {}  # a list or object passed as a literal it is built from
    for f in derived:
        for p, v, ref in args:
            if (
                ref is not None
                and isinstance(v, dict | list)
                and names_field(p, f, c.table)
                and names_field(p, ref["field"], ref["table"])  # the value the lookup read
            ):
                follows.setdefault(f, told(ref))
            if ref is None and lands(p, v, values[f], c.table):  # passed whole, built on
                if len(json.dumps(v)) <= MAX_GIVEN:  # longer: unsaid, and the check drops it
                    given_whole.setdefault(f, v)
                continue
            key = nested_in(p, v, values[f], c.table)
            if key is None:
                continue
            if ref is None:
                inside.setdefault(f, {}).setdefault(key or p, v)
            else:
                inside_referenced.setdefault(f, {}).setdefault(key or p, told(ref))
    # `args` are the whole plan's: a key one step passed as a literal and another step read from
    # a record is stated, as `source` has it for a top-level field (else the writer says both:
    # "`country` = `USA`, `country` = the `address.country` recorded on ...").
    for f, named in list(inside_referenced.items()):
        named = {k: r for k, r in named.items() if k not in inside.get(f, {})}
        if named:
            inside_referenced[f] = named
        else:
            del inside_referenced[f]
    d: dict[str, Any] = {
        "kind": c.kind,
        "table": c.table,
        "stated": stated,
        "referenced": referenced,
        "derived": derived,
        **({"inside": inside} if inside else {}),
        **({"inside_referenced": inside_referenced} if inside_referenced else {}),
        **({"follows": follows} if follows else {}),
        **({"given": given_whole} if given_whole else {}),
    }
    if c.kind != "created":
        d["key_field"], d["key"] = c.key_field, c.key
        if not _stated(c.key, given) and _ident(c.key) in by_value:
            d["via"] = told(by_value[_ident(c.key)])
    return d


@dataclass(frozen=True)
class Taught:
    """Fix steps whose every value the refusal teaches (ground.learnable): the instruction
    leaves out what they alone change, so the agent meets the refusal and learns the fix."""

    steps: frozenset[int]  # plan indices of those fixes
    tables: frozenset[str]  # tables only they write: a record there is theirs alone
    same_day: bool = False  # a fix's date is the refused call's date
    records: frozenset[Any] = frozenset()  # keys of records a found fix changes: never named
    choices: dict[str, Any] = field(default_factory=dict)  # a found fix's untaught values
    any_fix: bool = False  # the tests accept every fix that lets the refused call through


def _untaught(c: Change, g: Grounded, taught: Taught) -> Change | None:
    """The change less what a taught fix alone wrote: None when nothing else is left."""
    if c.table in taught.tables or (c.kind == "changed" and c.key in taught.records):
        return None
    if c.kind != "changed":
        return c

    def passed(steps: list[int], f: str, v: Any) -> bool:
        return any(
            names_field(p, f, c.table) and same_value(a, v)
            for i in steps
            for p, a in g.steps[i].params.items()
            if not isinstance(a, dict | list)
        )

    fixes = sorted(taught.steps)
    rest = [i for i in range(len(g.steps)) if i not in taught.steps]
    new = {f: v for f, v in c.new.items() if not (passed(fixes, f, v) and not passed(rest, f, v))}
    return replace(c, new=new) if new else None


def goal(
    domain_name: str,
    description: str,
    g: Grounded,
    taken: list[Change],
    other: list[Change] | None,
    taught: Taught | None = None,
) -> Goal:
    if taught is not None and taught.steps:
        taken = [k for c in taken if (k := _untaught(c, g, taught)) is not None]
        other = None if other is None else [k for c in other if (k := _untaught(c, g, taught))]
    given = literals(g.steps + (g.alt_steps or []))
    refs = all_refs(g)
    args = arguments(g)
    taken_ids, other_ids = {c.ident() for c in taken}, {c.ident() for c in other or []}
    common = taken if other is None else [c for c in taken if c.ident() in other_ids]
    only_taken = [c for c in taken if c not in common]
    only_other = [c for c in (other or []) if c.ident() not in taken_ids]
    cond = None
    then_c, else_c = [], []
    if g.condition is not None:
        cond = {k: g.condition[k] for k in ("table", "key_field", "key", "field", "value")}
        then_c, else_c = (
            (only_taken, only_other) if g.condition["holds"] else (only_other, only_taken)
        )
    return Goal(
        domain=domain_name,
        description=description,
        changes=[_describe(c, given, refs, args) for c in common],
        condition=cond,
        then_changes=[_describe(c, given, refs, args) for c in then_c],
        else_changes=[_describe(c, given, refs, args) for c in else_c],
        recovery=any(s.expect == "error" for s in g.steps),
        taught=bool(taught and taught.steps),
        same_day=bool(taught and taught.same_day),
        fix_values=dict(taught.choices) if taught is not None and taught.steps else {},
        any_fix=bool(taught and taught.steps and taught.any_fix),
        constraints=[
            "change the state only through the skill CLIs in skills/, which apply policy.md",
            "every record the task does not ask to change must stay exactly as it is",
        ],
    )
