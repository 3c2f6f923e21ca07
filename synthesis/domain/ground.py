"""Grounding: an abstract task graph -> concrete tool calls on concrete entities of one domain.

Pure and host-side: it reads the domain's parsed tools and its state as data, never runs a tool.
Each node gets a tool whose shape fits it (a lookup: a read tool that takes a record's key and
returns a field the consumer takes as a parameter; an act: a write tool; a recover: a write tool
that can return errors plus a fix, another write tool on the same record), and each parameter a
value: a record's key (the entity, named by business key in the instruction), a value an earlier
lookup produced (`{"$ref": [step, field]}`, resolved when the plan runs), or a literal drawn from
the schema's enum or the values the state already holds.

Whether a grounded plan really works is only known by running it (execute.py, in a sandbox), so
`ground` returns a few variants (other entities, other fixes); the first that runs as expected is
the task. `coverage_problems` rejects a plan with a transition no skill supports.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from clawloop.synthesis.domain import reach
from clawloop.synthesis.domain.model import Domain, Param, Skill, Tool
from clawloop.synthesis.domain.taskgraph import Node, TaskGraph

VARIANTS = 10  # grounded variants tried per abstract graph
RECOVERY_TRIES = 8  # error-recovery guesses per write tool, run once per domain before grounding
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
CATEGORICAL = 12  # a field with at most this many distinct values can hold a condition or a literal
Tables = dict[str, list[dict[str, Any]]]


class GroundingError(ValueError):
    """No tool or entity of this domain fits the graph."""


@dataclass(frozen=True)
class Step:
    tool: str
    params: dict[str, Any]
    expect: str = "ok"  # ok | error
    node: int = -1
    refusal: str = ""  # an expected error's text, as execution found it (a recovery's first try)
    # A fix's record is the only one holding this value of the refused call that the fix tool
    # accepts (synth._probe ran it on the others): the agent finds it, the instruction never
    # names it (`found_fix`).
    found: str = ""


@dataclass
class Grounded:
    graph: TaskGraph
    steps: list[Step]
    alt_steps: list[Step] | None = None  # the branch's other arm: described, never tested
    condition: dict[str, Any] | None = None  # table, key_field, key, field, value, holds
    references: dict[int, dict[str, Any]] = field(default_factory=dict)  # lookup step -> record
    # while grounding: lookup node -> its reads and their records (one, or two for a chain)
    lookups: dict[int, list[tuple[Step, dict[str, Any]]]] = field(default_factory=dict)
    wide: bool = False  # grounded the wide way (`ground`)

    def plan(self, steps: list[Step] | None = None) -> dict[str, Any]:
        return {
            "steps": [
                {"tool": s.tool, "params": s.params, "expect": s.expect}
                for s in (self.steps if steps is None else steps)
            ]
        }


def ref_of(g: Grounded, step: int, name: str) -> dict[str, Any] | None:
    """The reference (record, field, value) of what lookup `step` produced as `name`: its own
    field, or one read beside it (`fields`: the address's city beside its first line)."""
    ref = g.references.get(step)
    if ref is None or ref["field"] == name:
        return ref
    if name in ref.get("fields", {}):
        return {**ref, "field": name, "value": ref["fields"][name]}
    return None


def all_refs(g: Grounded) -> list[dict[str, Any]]:
    """Every (record, field, value) the plan's lookups produce, fields read beside one's own
    included."""
    out = []
    for ref in g.references.values():
        out.append(ref)
        out += [{**ref, "field": f, "value": v} for f, v in ref.get("fields", {}).items()]
    return out


@dataclass(frozen=True)
class Index:
    """What grounding needs of the state: per table, its unique fields and each field's values."""

    tables: Tables
    unique: dict[str, set[str]]
    values: dict[str, dict[str, list[Any]]]
    keys: dict[str, str] = field(default_factory=dict)  # table -> business key
    dates: tuple[str, ...] = ()  # ISO dates the state holds: what a date parameter can be
    # (table, field) -> (table, unique field) it refers to: every value the field holds is that
    # other table's key of some record (an order's `buyer` is a buyer's email): a lookup can
    # follow it to a record the instruction never names (a chain, issue 24 item 4)
    links: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)
    memo: dict[tuple[str, str], list[Any]] = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def of(tables: Tables, keys: dict[str, str] | None = None) -> Index:
        unique: dict[str, set[str]] = {}
        values: dict[str, dict[str, list[Any]]] = {}
        for t, rows in tables.items():
            fields = sorted({k for r in rows for k in r})
            values[t] = {f: [r.get(f) for r in rows if r.get(f) is not None] for f in fields}
            unique[t] = {
                f
                for f, vs in values[t].items()
                if len(vs) == len(rows) and len({repr(v) for v in vs}) == len(rows) and rows
            }
        dates = sorted(
            {
                v
                for cols in values.values()
                for vs in cols.values()
                for v in vs
                if isinstance(v, str) and ISO_DATE.match(v)
            }
        )
        return Index(tables, unique, values, dict(keys or {}), tuple(dates), _links(values, unique))

    def nested(self, table: str) -> list[str]:
        """The table's structural nested paths (reach.structural), memoised."""
        key = (table, "\0paths")
        if key not in self.memo:
            self.memo[key] = reach.structural(self.tables.get(table, []))
        return self.memo[key]

    def near(self, table: str, row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The records `row` refers to, is referred to by, or shares a reference with."""
        return reach.neighbours(self.tables, self.links, table, row)

    def distinct(self, table: str, name: str) -> list[Any]:
        key = (table, name)  # memoised: _unusual asks per record, quadratic on a large table
        if key not in self.memo:
            self.memo[key] = self._distinct(table, name)
        return self.memo[key]

    def _distinct(self, table: str, name: str) -> list[Any]:
        seen: dict[str, Any] = {}
        for v in self.values.get(table, {}).get(name, []):
            if isinstance(v, str | int | float | bool):
                seen.setdefault(repr(v), v)
        return [seen[k] for k in sorted(seen)]


def _links(
    values: dict[str, dict[str, list[Any]]], unique: dict[str, set[str]]
) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """Reference fields: a text or integer field every one of whose values is some record's
    unique field in another table (or another field of the same one)."""
    keys = {
        (t, f): {repr(v) for v in values[t][f]}
        for t, fs in unique.items()
        for f in fs
        if all(isinstance(v, str | int) and not isinstance(v, bool) for v in values[t][f])
    }
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for t, cols in values.items():
        for f, vs in cols.items():
            if not vs or not all(isinstance(v, str | int) and not isinstance(v, bool) for v in vs):
                continue
            for (kt, kf), held in keys.items():
                if (kt, kf) != (t, f) and kt != t and all(repr(v) in held for v in vs):
                    out.setdefault((t, f), set()).add((kt, kf))
    return out


def singular(table: str) -> str:
    if table.endswith("ies"):
        return table[:-3] + "y"
    if table.endswith(("ches", "shes", "sses", "xes")):
        return table[:-2]
    return table[:-1] if table.endswith("s") else table


def names_field(param: str, field: str, table: str = "") -> bool:
    """Does a parameter name a field? `code`, `hive_code` (table hives), `apiary_code` for a
    field `apiary`, `batch_id` for `batch`."""
    if param == field:
        return True
    if table and param == f"{singular(table)}_{field}":
        return True
    rest = param[len(field) + 1 :]
    return param.startswith(field + "_") and rest in ("code", "id", "email", "key")


KEY_FIELD = "_key"  # a JSON table keyed by object keys keeps each record's key here


def names_key(param: str, f: str, table: str) -> bool:
    """Does a parameter pass a record's key: a field it names, or (a table keyed by its object
    keys, `_key`) the table's own id (`user_id` for users)?"""
    if f == KEY_FIELD:
        return any(names_field(param, x, table) for x in ("id", "code", "key", "no"))
    return names_field(param, f, table)


def key_params(tool: Tool, ix: Index) -> list[tuple[Param, str, str]]:
    """(parameter, table, field) where the parameter names a unique field of a table the tool
    touches: passing a record's value there picks that record (an entity). A table's business
    key wins over another unique field, a field over the object key `_key`, and each table is
    picked by one parameter only."""
    out: list[tuple[Param, str, str]] = []
    for p in tool.params:
        found = []
        for t in (*tool.writes, *tool.reads):
            for f in sorted(ix.unique.get(t, ())):
                if names_key(p.name, f, t) and all(t != tt for _, tt, _ in out):
                    found.append((ix.keys.get(t) != f, t not in tool.writes, f == KEY_FIELD, t, f))
        if found:
            *_, t, f = min(found)
            out.append((p, t, f))
    return out


def fresh(value: Any) -> Any:
    """A value like `value` that no record holds yet (a new email, a new code)."""
    if isinstance(value, str) and "@" in value:
        user, _, host = value.partition("@")
        return f"{user}.new@{host}"
    return f"{value}-N" if isinstance(value, str) else value


def literal(p: Param, tool: Tool, ix: Index, rng: random.Random) -> tuple[bool, Any]:
    """(found, value) for a parameter that is not an entity key."""
    if p.enum:
        return True, rng.choice(list(p.enum))
    dated = "date" in p.name or p.name.endswith(("_on", "_at", "since"))
    if p.type == "string" and dated and ix.dates:
        return True, rng.choice(ix.dates[len(ix.dates) // 2 :])  # the later half: recent
    for t in tool.writes:  # a unique field the tool writes: it needs a value nobody has
        if p.name in ix.unique.get(t, ()):
            v = fresh(rng.choice(ix.values[t][p.name]))
            if not isinstance(v, dict | list):  # a list or object cannot be made new
                return True, v
    for t in (*tool.writes, *tool.reads, *sorted(ix.tables)):
        vals = ix.distinct(t, p.name)
        if vals and p.type in ("integer", "number"):  # small amounts break fewer rules (stock)
            nums = sorted(v for v in vals if isinstance(v, int | float) and not isinstance(v, bool))
            vals = nums[: max(1, len(nums) // 3)] or vals
        if vals and (len(vals) <= CATEGORICAL or p.type in ("integer", "number")):
            v = rng.choice(vals)
            if p.type == "integer" and isinstance(v, int | float) and not isinstance(v, bool):
                return True, int(v)
            if p.type == "number" and isinstance(v, int | float) and not isinstance(v, bool):
                return True, float(v)
            if p.type == "string" and isinstance(v, str):
                return True, v
    if p.type == "integer":
        return True, rng.randint(1, 4)
    if p.type == "number":
        return True, rng.choice([1.5, 2.0, 2.5, 4.0])
    if p.type == "boolean":
        return True, rng.random() < 0.5
    return False, None


def fill(
    tool: Tool,
    ix: Index,
    rng: random.Random,
    fixed: dict[str, Any] | None = None,
    entity: tuple[str, dict[str, Any]] | None = None,
    wide: bool = False,
) -> dict[str, Any] | None:
    """Every parameter of `tool` a value (None if a required one cannot have one). `fixed` are
    already chosen (refs); `entity` (table, record) supplies the key of that record. `wide`
    (the wide grounding, `ground`): a parameter no field names takes a value nested in the
    records the call picks or their neighbours (`_held_near`)."""
    params = dict(fixed or {})
    keys = {p.name: (t, f) for p, t, f in key_params(tool, ix)}
    picked: list[tuple[str, dict[str, Any]]] = [entity] if entity else []
    open_: list[Param] = []
    for p in tool.params:
        if p.name in params:
            continue
        if p.name in keys:
            t, f = keys[p.name]
            record = entity[1] if entity and entity[0] == t and f in entity[1] else None
            record = record or rng.choice(ix.tables[t])
            params[p.name] = record[f]
            picked.append((t, record))
            continue
        found, value = literal(p, tool, ix, rng)
        if found:
            params[p.name] = value
        elif wide:
            open_.append(p)  # after every key is picked: its record's neighbours may hold it
        elif p.required:
            return None
    sources = _sources(ix, picked) if open_ else []
    for p in open_:
        found, value = _held_near(p, sources, rng, item_fields(tool, p.name))
        if found:
            params[p.name] = value
        elif p.required:
            return None
    return params


def _sources(ix: Index, picked: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The records a call's other values may come from: the records it picks, then theirs
    neighbours (an order's user holds the payment methods the order may be paid with)."""
    out: list[dict[str, Any]] = []
    for t, row in picked:
        for _, r in [(t, row), *ix.near(t, row)]:
            if all(r is not x for x in out):
                out.append(r)
    return out


def item_fields(tool: Tool, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(fields, required fields) of the objects a list parameter takes, as the tool's schema
    declares them (a payment: `payment_id`, `amount`); empty for any other parameter."""
    spec = tool.schema.get("function", tool.schema).get("parameters", {}).get("properties", {})
    items = (spec.get(name) or {}).get("items") or {}
    if not isinstance(items, dict) or items.get("type") != "object":
        return (), ()
    fields = tuple(items.get("properties") or {})
    return fields, tuple(f for f in items.get("required", fields) if f in fields)


def _objects(value: Any, fields: tuple[str, ...], required: tuple[str, ...]) -> list[Any] | None:
    """`value` as a list of the parameter's objects (only their declared fields), when it is a
    non-empty list of records that each hold every required field; else None."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(x, dict) and all(f in x for f in required) for x in value):
        return None
    return [{f: x[f] for f in fields if f in x} for x in value]


def _held_near(
    p: Param, sources: list[dict[str, Any]], rng: random.Random,
    items: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
) -> tuple[bool, Any]:  # fmt: skip
    """A value for a parameter no top-level field names, read from the records the call picks
    and their neighbours: a list field of that name whole (a reservation's `flights`), else a
    nested scalar the parameter takes (`payment_method_id` <- `payment_methods.<id>.id`; a list
    parameter gets one: `item_ids` <- [`items.0.item_id`], from the first source that has
    one: a list names parts of the record itself). A scalar comes from any source that has one
    (an order's own payment method or another of its user's). A list of objects (`items`: the
    fields its schema declares) takes a list whose records have that shape, under any name (a
    booking's `payment_methods` <- a reservation's `payment_history` of `payment_id`, `amount`),
    never scalars."""
    fields, required = items
    if fields:
        named = [row.get(p.name) for row in sources]  # the parameter's own name first
        held = named + [v for row in sources for v in row.values()]
        found = [x for x in (_objects(v, fields, required) for v in held) if x]
        return (True, found[0]) if found else (False, None)
    options: list[list[Any]] = []
    for row in sources:
        whole = row.get(p.name)
        if p.type == "array" and isinstance(whole, list) and whole:
            return True, whole
        found = [
            v
            for path, v in reach.leaves(row)
            if "." in path
            and reach.feeds(p.name, path, names_field)
            and (isinstance(v, str) or p.type != "string")
        ]
        if found and p.type == "array":
            return True, [rng.choice(sorted(set(found), key=repr))]
        if found:
            options.append(sorted(set(found), key=repr))
    if not options:
        return False, None
    return True, rng.choice(rng.choice(options))


def producers(domain: Domain, consumer: Tool, ix: Index) -> list[tuple[Tool, str, str, str]]:
    """(read tool, its table, the produced field, the consumer parameter it feeds): the field is
    one the read tool returns and a field of the record its key parameter picks."""
    out = []
    for r in domain.tools:
        if not r.read_only or r.name == consumer.name:
            continue
        for kp, t, kf in key_params(r, ix):
            for f in r.returns:
                if f == kf or f not in ix.values.get(t, {}):
                    continue
                for p in consumer.params:
                    if names_field(p.name, f) and p.name != kp.name:
                        out.append((r, t, f, p.name))
            for path in _returned_paths(r, t, ix):
                for p in consumer.params:
                    if _takes(p, path) and p.name != kp.name:
                        out.append((r, t, path, p.name))
    return out


def _returned_paths(r: Tool, table: str, ix: Index) -> list[str]:
    """The structural nested paths (reach.structural) of `table` under a field `r` returns."""
    return [p for p in ix.nested(table) if p.split(".")[0] in r.returns]


def _takes(p: Param, path: str) -> bool:
    """Does a scalar parameter take the value at a nested path (a `$ref` carries one scalar)?"""
    return p.type not in ("array", "object") and reach.feeds(p.name, path, names_field)


@dataclass(frozen=True)
class Chain:
    """A lookup two reads long: `hop` reads a record the instruction names (by its key) and
    returns `link`, a reference to a record of `read`'s table; `read` reads that record (never
    named: the agent reaches it through the first result) and returns `field`, which feeds the
    consumer's `param`. The field is the reached record's key (the consumer refers to it: pay
    the order's buyer) or a plain field of it (a date), never another unique field (copying a
    member's email onto another member makes a duplicate, not a task)."""

    hop: Tool
    hop_table: str
    link: str
    read: Tool
    table: str
    key_param: str  # read's parameter that takes the link's value
    field: str
    param: str


def chains(domain: Domain, consumer: Tool, ix: Index) -> list[Chain]:
    """Every two-read path from a named record, through a reference field, to a value the
    consumer takes."""
    reads = [r for r in domain.tools if r.read_only and r.name != consumer.name]
    out = []
    for r in reads:
        for kp, t, kf in key_params(r, ix):
            fed = []
            for f in r.returns:
                if f not in ix.values.get(t, {}) or (f != kf and f in ix.unique.get(t, ())):
                    continue
                for p in consumer.params:
                    if names_field(p.name, f, t if f == kf else ""):
                        fed.append((f, p.name))
            fed += [(path, p.name) for path in _returned_paths(r, t, ix)
                    for p in consumer.params if _takes(p, path)]  # fmt: skip
            if not fed:
                continue
            for hop in reads:
                for _, t0, _ in key_params(hop, ix):
                    for link in hop.returns:
                        if t0 != t and (t, kf) in ix.links.get((t0, link), ()):
                            out += [Chain(hop, t0, link, r, t, kp.name, f, p) for f, p in fed]
    return out


Ref = dict[str, Any]  # {"$ref": [step, field]}; while grounding, step is ("node", id, hop)


def _ref(node: int, hop: int, name: str) -> Ref:
    return {"$ref": [("node", node, hop), name]}


NEAR = 0.8  # how often a lookup reads a neighbour of the act's record, where one fits


def _lookup(
    chosen: tuple[Tool, str, str, str],
    ix: Index,
    rng: random.Random,
    node: Node,
    near: list[dict[str, Any]] | None = None,
) -> list[tuple[Step, dict[str, Any]]] | None:
    """One read of a record of the producer's table holding the field (a dotted path too):
    most often a neighbour of the record the act changes (its user, the user's other order),
    so the values meet on records that belong together."""
    r, t, f, _ = chosen
    rows = [row for row in ix.tables[t] if reach.at(row, f) is not None]
    if not rows:
        return None
    close = [row for row in rows if any(row is x for x in near or ())]
    row = rng.choice(close if close and rng.random() < NEAR else rows)
    params = fill(r, ix, rng, entity=(t, row))
    if params is None:
        return None
    kf = next(kf for _, tt, kf in key_params(r, ix) if tt == t)
    ref = {"table": t, "key_field": kf, "key": row[kf], "field": f, "value": reach.at(row, f)}
    return [(Step(r.name, params, node=node.id), ref)]


def _chained(
    c: Chain, ix: Index, rng: random.Random, node: Node
) -> list[tuple[Step, dict[str, Any]]] | None:
    """The two reads of a chain, on a record reached from a named one: the first step reads the
    named record, the second takes its link's value (a `$ref`) as its key."""
    kf = next(kf for p, tt, kf in key_params(c.read, ix) if p.name == c.key_param)
    k0 = next(kf0 for _, tt, kf0 in key_params(c.hop, ix) if tt == c.hop_table)
    by_key = {repr(r.get(kf)): r for r in ix.tables[c.table] if reach.at(r, c.field) is not None}
    starts = [r for r in ix.tables[c.hop_table] if repr(r.get(c.link)) in by_key]
    if not starts:
        return None
    start = rng.choice(starts)
    reached = by_key[repr(start[c.link])]
    first = fill(c.hop, ix, rng, entity=(c.hop_table, start))
    then = fill(c.read, ix, rng, fixed={c.key_param: _ref(node.id, 0, c.link)},
                entity=(c.table, reached))  # fmt: skip
    if first is None or then is None:
        return None
    named = {"table": c.hop_table, "key_field": k0, "key": start[k0], "field": c.link}
    return [
        (Step(c.hop.name, first, node=node.id), {**named, "value": start[c.link]}),
        (
            Step(c.read.name, then, node=node.id),
            {
                "table": c.table,
                "key_field": kf,
                "key": reached[kf],
                "field": c.field,
                "value": reach.at(reached, c.field),
                "via": named,
            },
        ),
    ]


def _writes(domain: Domain) -> list[Tool]:
    return [t for t in domain.tools if t.writes]


# tool -> (keys of records a probe call of it was accepted on, keys it was refused on), as
# execution found them before grounding (synth.py): the state's own word on which records
# admit a write (a pending order can be cancelled, a delivered one cannot)
Admission = dict[str, tuple[set[str], set[str]]]


def _anchor(
    w: Tool, ix: Index, rng: random.Random, admitted: Admission | None
) -> tuple[str, dict[str, Any]] | None:
    """The record a write changes: of those the probe saw it accept, else of those it did not
    see it refuse, else any (a tool without a key parameter has none)."""
    keys = [(t, f) for _, t, f in key_params(w, ix) if t in w.writes] or [
        (t, f) for _, t, f in key_params(w, ix)
    ]
    if not keys:
        return None
    t, f = keys[0]
    rows = ix.tables[t]
    ok, refused = (admitted or {}).get(w.name, (set(), set()))
    good = [r for r in rows if repr(r.get(f)) in ok]
    fair = [r for r in rows if repr(r.get(f)) not in refused]
    return t, rng.choice(good or fair or rows)


def _siblings(
    w: Tool, fixed: dict[str, Any], made: dict[int, list[tuple[Step, dict[str, Any]]]],
    ix: Index,
) -> None:  # fmt: skip
    """Feed the act's parameters still open from the records its lookups read, along paths
    beside the one each lookup carries (`address.city` beside `address.address1`): the values
    a write takes together come from one record. The lookup's reference keeps each field's
    value (`fields`)."""
    for lookup_id, reads in made.items():
        _, ref = reads[-1]
        if "." not in str(ref["field"]):
            continue
        row = next(
            (r for r in ix.tables[ref["table"]] if r.get(ref["key_field"]) == ref["key"]), None
        )
        prefix = ref["field"].rsplit(".", 1)[0] + "."
        for p in w.params:
            if p.name in fixed:
                continue
            for path in ix.nested(ref["table"]):
                if path.startswith(prefix) and _takes(p, path) and row is not None:
                    value = reach.at(row, path)
                    if value is not None:
                        fixed[p.name] = _ref(lookup_id, len(reads) - 1, path)
                        ref.setdefault("fields", {})[path] = value
                        break


def _act(
    domain: Domain, node: Node, ix: Index, rng: random.Random, g: Grounded, chain: float = 0.0,
    admitted: Admission | None = None, wide: bool = False,
    taught: dict[str, list[dict[str, Any]]] | None = None,
) -> Step | None:  # fmt: skip
    """Ground an act node: a write tool whose parameters the node's inputs can feed. Its lookups
    go to `g.lookups` by lookup node (they run first; `_place` numbers them); returns the act.
    With probability `chain` an input is a chained lookup (two reads), where one fits.

    `wide` (the wide grounding, `ground`): the first input is a chain where one fits, the record
    the act changes is one the probe saw the tool accept (`admitted`), its lookups most often
    read that record's neighbours, and its open parameters take the values beside what a
    lookup reads (`_siblings`) or nested in the records it picks (`fill`); a tool a refusal
    taught how to call (`taught`, `corrected`) starts from such a call."""
    tools = _writes(domain)
    rng.shuffle(tools)
    if chain and rng.random() < chain:  # a tool a chain can feed first (stable: still shuffled)
        tools.sort(key=lambda w: not chains(domain, w, ix))
    for w in tools:
        feeds = producers(domain, w, ix)
        linked = chains(domain, w, ix) if chain else []
        if len({c[3] for c in feeds} | {c.param for c in linked}) < len(node.inputs):
            continue
        fixed: dict[str, Any] = {}
        made: dict[int, list[tuple[Step, dict[str, Any]]]] = {}
        anchor = _anchor(w, ix, rng, admitted) if wide else None
        near = [r for _, r in ix.near(*anchor)] if anchor else []
        for lookup_id in node.inputs:
            lookup = Node(lookup_id, "lookup", node.goal)
            options = [c for c in feeds if c[3] not in fixed]
            long = [c for c in linked if c.param not in fixed]
            one = None
            if long and (not options or (wide and not made) or rng.random() < chain):
                picked = rng.choice(long)
                one, param, name = _chained(picked, ix, rng, lookup), picked.param, picked.field
                hop = 1
            elif options:
                chosen = rng.choice(options)
                one = _lookup(chosen, ix, rng, lookup, near)
                param, name, hop = chosen[3], chosen[2], 0
            if one is None:
                break
            made[lookup_id] = one
            fixed[param] = _ref(lookup_id, hop, name)
        else:
            if wide:
                _siblings(w, fixed, made, ix)
            if wide and (calls := (taught or {}).get(w.name)):
                fixed = {**rng.choice(calls), **fixed}  # a call its refusal taught, fed values
            params = fill(w, ix, rng, fixed=fixed, entity=anchor, wide=wide)
            if params is not None:
                for lookup_id, reads in made.items():  # a branch's arms share their lookups
                    g.lookups.setdefault(lookup_id, reads)
                return Step(w.name, params, node=node.id)
    return None


def _unusual(ix: Index, table: str, rng: random.Random) -> dict[str, Any]:
    """A record likely to break a rule: most often one holding a rare categorical value (a
    quarantined hive, a buyer on hold), since rules guard exceptions."""
    rows = ix.tables[table]
    counts: dict[tuple[str, str], int] = {}
    for r in rows:
        for f, v in r.items():
            if isinstance(v, str | bool):
                counts[(f, repr(v))] = counts.get((f, repr(v)), 0) + 1
    rare = [
        r
        for r in rows
        if any(
            counts[(f, repr(v))] <= len(rows) // 4
            and 2 <= len(ix.distinct(table, f)) <= CATEGORICAL
            for f, v in r.items()
            if isinstance(v, str | bool)
        )
    ]
    return rng.choice(rare if rare and rng.random() < 0.8 else rows)


Recovery = tuple[Step, Step, Step]  # refused at first, the fix, the retry


def refusal_candidates(
    domain: Domain, tables: Tables, rng: random.Random, per_tool: int = RECOVERY_TRIES
) -> list[Step]:
    """Guesses at calls a rule refuses, to run before grounding: each write tool that can return
    an error, on records likely to break a rule (most guesses are accepted: execution tells)."""
    ix = Index.of(tables, domain.keys)
    out: list[Step] = []
    for w in _writes(domain):
        keys = key_params(w, ix) if w.errors else []
        for _ in range(per_tool if keys else 0):
            params = fill(w, ix, rng, entity=(keys[0][1], _unusual(ix, keys[0][1], rng)))
            if params is not None and Step(w.name, params, "error") not in out:
                out.append(Step(w.name, params, "error"))
    return out


PROBE_RECORDS = 12  # records each write tool is tried on before grounding (admission probe)


def probe_calls(domain: Domain, tables: Tables, rng: random.Random) -> list[tuple[Step, str]]:
    """(call, the key of the record it changes) for each write tool on up to PROBE_RECORDS of
    the records it changes, every step "any": run once before grounding, they show which records
    admit the write (`Admission`) and what the domain refuses, in its own words."""
    ix = Index.of(tables, domain.keys)
    out: list[tuple[Step, str]] = []
    for w in _writes(domain):
        keys = [(t, f) for _, t, f in key_params(w, ix) if t in w.writes]
        if not keys:
            continue
        t, f = keys[0]
        rows = ix.tables[t]
        for row in rng.sample(rows, min(PROBE_RECORDS, len(rows))):
            params = fill(w, ix, rng, entity=(t, row), wide=True)  # nested values: third party
            if params is not None:
                out.append((Step(w.name, params, "any"), repr(row.get(f))))
    return out


FOLD = re.compile(r"#?\b[\w.-]*\d[\w.-]*\b")


def refusal_kind(tool: str, text: str) -> str:
    """One kind per rule: the tool and its refusal, ids and figures folded (`order N`)."""
    return f"{tool}: {FOLD.sub('N', text.strip())[:100]}"


def mentioned(ix: Index, text: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Records a refusal is about: those whose unique field value the error names or the call
    passed (the member on hold, the batch not yet released)."""
    values = {str(v) for v in params.values()}
    out = []
    for t, fields in sorted(ix.unique.items()):
        for row in ix.tables[t]:
            hit = any(
                f in row
                and len(str(row[f])) >= 3
                and (str(row[f]) in values or str(row[f]) in text)
                for f in fields
            )
            if hit:
                out.append((t, row))
    return out


NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?![\w-]|\.\d)")  # a figure in a text


def _dated(name: str) -> bool:
    return "date" in name or name.endswith(("_on", "_at", "since"))


def _held(figure: float, rows: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(v, int | float) and not isinstance(v, bool) and abs(v - figure) < 1e-9
        for r in rows
        for v in r.values()
    )


def corrected(tool: Tool, call: Step, error: str) -> list[Step]:
    """Calls a refusal teaches: where it states a figure the call did not pass (`total price
    is 1234, but paid 100`), the call again with each list-of-objects parameter paying that
    figure in one object (its first, the number field set to the figure). Run like any probe,
    one that is accepted shows how the tool is called on this state."""

    def number(v: Any) -> bool:
        return reach.scalar(v) and not isinstance(v, str)

    passed = {float(v) for _, v in reach.leaves(call.params) if number(v)}
    for v in call.params.values():  # a list's total counts as passed (the `paid` figure)
        if isinstance(v, list):
            items = [x for item in v if isinstance(item, dict) for x in item.values() if number(x)]
            passed.add(float(sum(items)))
    figures = [x for x in dict.fromkeys(float(m) for m in NUMBER.findall(error)) if x not in passed]
    spec = tool.schema.get("function", tool.schema).get("parameters", {}).get("properties", {})
    out = []
    for p in tool.params:
        fields, _ = item_fields(tool, p.name)
        items = call.params.get(p.name)
        if not fields or not isinstance(items, list) or not items or not isinstance(items[0], dict):
            continue
        props = spec[p.name]["items"].get("properties") or {}
        numbers = [f for f in fields if (props.get(f) or {}).get("type") in ("number", "integer")]
        for x in figures:
            for f in numbers:
                one = {**items[0], f: x if props[f]["type"] == "number" else int(x)}
                out.append(Step(call.tool, {**call.params, p.name: [one]}, "any"))
    return out


def learned_params(
    fix: Tool, call: Step, error: str, about: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Values for `fix` that an agent refused by `call` can know without being told the fix:
    the call's own values by parameter name (the buyer, the batch), the call's date for a date
    (the fix happens the day of the change it unblocks), and for a number a figure the refusal
    states that a record it is about holds (the balance it names; never a rule's threshold,
    which says what is allowed, not what to write). One dict per figure; the rest is filled."""
    base: dict[str, Any] = {}
    dates = [v for k, v in call.params.items() if _dated(k) and isinstance(v, str)]
    numeric = []
    for p in fix.params:
        if p.name in call.params and not isinstance(call.params[p.name], dict | list):
            base[p.name] = call.params[p.name]
        elif _dated(p.name) and p.type == "string" and dates:
            base[p.name] = dates[0]
        elif p.type in ("number", "integer"):
            numeric.append(p)
    if not numeric:
        return [base]
    figures = [x for x in dict.fromkeys(float(m) for m in NUMBER.findall(error)) if _held(x, about)]
    out = []
    for x in figures:
        if all(p.type == "number" or x == int(x) for p in numeric):
            out.append({**base, **{p.name: x if p.type == "number" else int(x) for p in numeric}})
    return out


def _fixes(
    domain: Domain, ix: Index, call: Step, records: list[tuple[str, dict[str, Any]]],
    same_tool: bool = False,
) -> list[tuple[Tool, tuple[str, dict[str, Any]]]]:  # fmt: skip
    """(write tool, the record it would fix) for every write other than the refused call's own
    (`same_tool`: the refused tool too, on these other records) that takes one of these
    records' keys."""
    return [
        (f, (t, row))
        for t, row in records
        for f in _writes(domain)
        if (same_tool or f.name != call.tool) and any(tt == t for _, tt, _ in key_params(f, ix))
    ]


def recovery_candidates(
    domain: Domain, tables: Tables, refused: list[tuple[Step, str]], rng: random.Random,
    per_call: int = RECOVERY_TRIES, wide: bool = False,
) -> list[Recovery]:  # fmt: skip
    """For each refused call (and its error text): fixes to try, each another write on a record
    the refusal is about, followed by the same call again. Each fix is tried with values drawn
    as usual and with values the refusal teaches (learned_params), so the instruction need not
    give the fix away; execution keeps those that work. `wide`: also fixes on the records that
    hold what the call passes (`reach.holding`), the refused tool's own included."""
    ix = Index.of(tables, domain.keys)
    out: list[Recovery] = []
    for call, error in refused:
        # Fixes on the records the call passes first (most often the cause), then on those only
        # the refusal's text names. The extra draws (those records, the taught values) come from
        # a second generator, so a seed still draws the fixes it always did.
        extra = random.Random(f"{call.tool}:{sorted(call.params.items())}:{error}")
        passed = _fixes(domain, ix, call, mentioned(ix, "", call.params))
        named = [x for x in _fixes(domain, ix, call, mentioned(ix, error, call.params))
                 if x not in passed]  # fmt: skip
        picked = rng.sample(passed, min(per_call, len(passed)))
        picked += extra.sample(named, min(per_call - len(picked), len(named)))
        # Then the records that hold what the call passes somewhere inside them (the other
        # orders a refused gift card paid for: cancelling one refunds the card), on a budget
        # of their own: where a state-level cause sits when the call's own record is not it.
        if wide:
            values = [v for v in call.params.values() if isinstance(v, str)]
            own = {id(row) for _, row in mentioned(ix, "", call.params)}
            held = [(t, row) for t, row in reach.holding(ix.tables, values) if id(row) not in own]
            around = [x for x in _fixes(domain, ix, call, held, same_tool=True)
                      if x not in passed + named]  # fmt: skip
            picked += extra.sample(around, min(per_call, len(around)))
        first = replace(call, refusal=error)
        about = [row for _, row in mentioned(ix, error, call.params)]
        for f, entity in picked:
            keys = {p.name for p, t, _ in key_params(f, ix) if t == entity[0]}
            tries = [fill(f, ix, rng, entity=entity, wide=wide)]
            for learned in learned_params(f, call, error, about):
                fixed = {k: v for k, v in learned.items() if k not in keys}  # the entity's key
                tries.append(fill(f, ix, extra, fixed=fixed, entity=entity, wide=wide))
            made: list[dict[str, Any]] = []
            for params in tries:
                if params is not None and params not in made:
                    made.append(params)
                    out.append((first, Step(f.name, params), Step(call.tool, call.params)))
    return out


def learnable(recovery: Recovery, ix: Index) -> bool:
    """Does the refusal teach the fix: is each value the fix passes one the refused call passes
    too, a word the refusal's text states, or a figure it states that a record it is about
    holds (learned_params' reading)?"""
    call, fix, _ = recovery
    return not untaught(call, fix, ix)


def untaught(call: Step, fix: Step, ix: Index) -> dict[str, Any]:
    """The fix's parameters whose value the refused call and its refusal do not teach (learnable
    reads none): not one the call passes too, a word the refusal states, or a figure it states
    that a record it is about holds."""
    text = call.refusal
    about = [row for _, row in mentioned(ix, text, call.params)]
    figures = [x for x in (float(m) for m in NUMBER.findall(text)) if _held(x, about)]

    def taught(v: Any) -> bool:
        if any(type(v) is type(g) and v == g for g in call.params.values()):
            return True
        if isinstance(v, int | float) and not isinstance(v, bool):
            return any(abs(x - v) < 1e-9 for x in figures)
        return (
            isinstance(v, str)
            and bool(v)
            and bool(re.search(rf"(?<!\w){re.escape(v)}(?!\w)", text))
        )

    return {k: v for k, v in fix.params.items() if not taught(v)}


def found_fix(domain: Domain, tables: Tables, recovery: Recovery) -> tuple[str, list[Step]]:
    """Can the agent find the record this fix changes from the refusal? (the value of the
    refused call that record holds, the fix on every other record holding it): the fix's record
    holds a value the call passed (the gift card an order paid with) but is none the call names.
    Run, the fix must be refused on every other such record (no other pending order the card
    paid for): then that record is the one, and the instruction need not name it. ("", [])
    when the fix's record holds none of the call's values."""
    call, fix, _ = recovery
    ix = Index.of(tables, domain.keys)
    keyed = [(p.name, t, f) for p, t, f in key_params(domain.tool(fix.tool), ix)
             if p.name in fix.params]  # fmt: skip
    if not keyed:
        return "", []
    name, table, key_field = keyed[0]
    rows = ix.tables.get(table, [])
    own = next((r for r in rows if r.get(key_field) == fix.params[name]), None)
    named = {id(r) for _, r in mentioned(ix, "", call.params)}
    if own is None or id(own) in named:
        return "", []
    for v in sorted({v for v in call.params.values() if isinstance(v, str)}):
        if not reach.holding({table: [own]}, [v]) or v == fix.params[name]:
            continue
        others = [r for _, r in reach.holding({table: rows}, [v])
                  if r is not own and id(r) not in named and r.get(key_field) is not None]  # fmt: skip
        return v, [replace(fix, params={**fix.params, name: r[key_field]}) for r in others]
    return "", []


LEARNED = 0.75  # how often a recover node takes a fix the refusal teaches, where one ran


def _recover(
    node: Node, rng: random.Random, verified: list[Recovery], ix: Index, learned: float = LEARNED,
    found: list[tuple[Recovery, str]] | None = None,
) -> list[Step]:  # fmt: skip
    """One of the recoveries execution confirmed (refused, fixed, then accepted), for `node`:
    with probability `learned` one whose fix the refusal teaches or whose record the agent
    finds from it (`found`: the fix step is marked, found_fix) (the instruction then need not
    state it), where one ran."""
    if not verified:
        return []
    held = {id(r): v for r in verified for f, v in found or [] if f == r}
    taught = [r for r in verified if learnable(r, ix) or id(r) in held]
    pool = taught if taught and rng.random() < learned else verified
    r = rng.choice(pool)
    steps = [replace(s, node=node.id) for s in r]
    if id(r) in held and not learnable(r, ix):
        steps[1] = replace(steps[1], found=held[id(r)])
    return steps


def _condition(ix: Index, step: Step, domain: Domain, rng: random.Random) -> dict[str, Any] | None:
    """A condition on the record the then-arm's act picks: a categorical field equal to a value."""
    tool = domain.tool(step.tool)
    for kp, t, kf in key_params(tool, ix):
        key = step.params.get(kp.name)
        row = next((r for r in ix.tables[t] if r.get(kf) == key), None)
        if row is None:
            continue
        fields = [
            f
            for f in sorted(row)
            if f != kf and isinstance(row[f], str) and 2 <= len(ix.distinct(t, f)) <= CATEGORICAL
        ]
        if not fields:
            continue
        f = rng.choice(fields)
        holds = rng.random() < 0.5
        others = [v for v in ix.distinct(t, f) if v != row[f]]
        value = row[f] if holds else rng.choice(others)
        return {
            "table": t,
            "key_field": kf,
            "key": key,
            "field": f,
            "value": value,
            "holds": holds,
        }
    return None


CHAIN = 0.75  # how often a graph that wants long range takes a chained lookup where one fits


def _place(g: Grounded, order: list[int], steps: list[Step]) -> list[Step]:
    """Number the lookups (each lookup node's reads run first: the chained ones, then the rest,
    each in graph order; reads are independent, and a value reached through a chain is then
    carried the furthest) and turn every grounding-time `$ref` (a lookup node and read) into
    the step index it now has."""
    at: dict[tuple[int, int], int] = {}
    reads: list[Step] = []
    for lookup_id in sorted(order, key=lambda i: len(g.lookups[i]) == 1):  # stable
        for hop, (step, ref) in enumerate(g.lookups[lookup_id]):
            at[(lookup_id, hop)] = len(reads)
            g.references[len(reads)] = ref
            reads.append(step)

    def placed(s: Step) -> Step:
        params = {}
        for k, v in s.params.items():
            if isinstance(v, dict) and "$ref" in v and isinstance(v["$ref"][0], tuple):
                _, lookup_id, hop = v["$ref"][0]
                if (lookup_id, hop) not in at:
                    raise GroundingError(f"an act reads lookup {lookup_id} that was not grounded")
                v = {"$ref": [at[(lookup_id, hop)], v["$ref"][1]]}
            params[k] = v
        return replace(s, params=params)

    return [placed(s) for s in reads + steps]


def ground_once(
    domain: Domain, graph: TaskGraph, ix: Index, rng: random.Random, recoveries: list[Recovery],
    admitted: Admission | None = None, wide: bool = False,
    taught: dict[str, list[dict[str, Any]]] | None = None,
    found: list[tuple[Recovery, str]] | None = None,
) -> Grounded:  # fmt: skip
    """One grounding of `graph`; `wide` as in `_act`, and a recover node takes a fix the
    refusal teaches (or whose record the agent finds from it: `found`) wherever one ran."""
    g = Grounded(graph=graph, steps=[], wide=wide)
    lookups = [n.id for n in graph.nodes if n.kind == "lookup"]  # they run first, in graph order
    chain = CHAIN if "long_range" in graph.wanted else 0.0
    acts: list[Step] = []
    arms: dict[str, Step] = {}
    for node in graph.nodes:
        if node.kind in ("lookup", "branch"):
            continue
        if node.kind == "recover":
            steps = _recover(node, rng, recoveries, ix, 1.0 if wide else LEARNED, found)
            if not steps:
                raise GroundingError("no error-recovery path (refused, fixed, accepted) ran")
            acts += steps
            continue
        step = _act(domain, node, ix, rng, g, chain, admitted, wide, taught)
        if step is None:
            raise GroundingError(f"no write tool fits node {node.id} ({len(node.inputs)} inputs)")
        if node.arm:
            arms[node.arm] = step
        else:
            acts.append(step)
    if set(g.lookups) != set(lookups):
        raise GroundingError("a lookup found no producer")
    if not arms:
        g.steps = _place(g, lookups, acts)
        return g
    cond = _condition(ix, arms["then"], domain, rng)
    if cond is None:
        raise GroundingError("no categorical field on the then-arm's record to branch on")
    g.condition = cond
    taken, other = (arms["then"], arms["else"]) if cond["holds"] else (arms["else"], arms["then"])
    g.steps = _place(g, lookups, [taken, *acts])
    g.alt_steps = _place(g, lookups, [other, *acts])
    return g


@dataclass(frozen=True)
class Wide:
    """What the wide grounding uses (`ground`): its own generator (so the plain grounding draws
    what it always did), the recoveries the probes found beyond the plain ones, and which
    records each write tool admits (`Admission`)."""

    rng: random.Random
    recoveries: list[Recovery] = field(default_factory=list)
    admitted: Admission = field(default_factory=dict)
    taught: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # `corrected` calls
    found: list[tuple[Recovery, str]] = field(default_factory=list)  # found_fix: the agent finds


def ground(
    domain: Domain,
    graph: TaskGraph,
    tables: Tables,
    rng: random.Random,
    variants: int = VARIANTS,
    recoveries: list[Recovery] | None = None,
    wide: Wide | None = None,
    usable: Callable[[Grounded], bool] | None = None,
) -> tuple[list[Grounded], list[str]]:
    """Up to `variants` groundings of one graph (other tools, entities, fixes) and why the others
    failed. A recover node takes one of `recoveries`: paths execution already confirmed.

    With `wide`, a graph the plain grounding leaves without a `usable` variant is grounded again
    the wide way (its variants follow the plain ones, which still come first: where one of them
    runs after all, the graph makes the task it always made) (`_act`: nested values, neighbouring records, records the probe saw admit the
    write; recoveries from every refusal the probes met), on its own generator: a domain the
    plain grounding serves draws exactly what it did before."""
    ix = Index.of(tables, domain.keys)
    out, why = [], []
    for _ in range(variants * 3):
        if len(out) == variants:
            break
        try:
            out.append(ground_once(domain, graph, ix, rng, recoveries or []))
        except GroundingError as exc:
            why.append(str(exc))
    if wide is None or any(usable is None or usable(v) for v in out):
        return out, why
    # Plain variants the caller finds unusable stay, first: any that runs makes the task it
    # always made; the wide ones are tried after them.
    more = (recoveries or []) + [r for r in wide.recoveries if r not in (recoveries or [])]
    wider = []
    for _ in range(variants * 3):
        if len(wider) == variants:
            break
        try:
            wider.append(
                ground_once(
                    domain, graph, ix, wide.rng, more, wide.admitted, True, wide.taught, wide.found
                )  # fmt: skip
            )
        except GroundingError as exc:
            why.append(str(exc))
    return out + wider, why


def coverage_problems(g: Grounded, domain: Domain, skills: list[Skill]) -> list[str]:
    """Transitions no skill supports: a tool outside every skill, or a value passed from one
    step to another that the producer does not return or the consumer does not take."""
    covered = {t for s in skills for t in s.tools}
    out = [f"{s.tool}: in no skill" for s in g.steps if s.tool not in covered]
    for i, s in enumerate(g.steps):
        consumer = domain.tool(s.tool)
        for name, v in s.params.items():
            if isinstance(v, dict) and "$ref" in v:
                j, f = v["$ref"]
                producer = domain.tool(g.steps[j].tool)
                if str(f).split(".")[0] not in producer.returns or name not in {
                    p.name for p in consumer.params
                }:
                    out.append(f"step {j} {producer.name} -> step {i} {consumer.name}: {f}")
    return out


def every_write_plan(domain: Domain, tables: Tables, rng: random.Random) -> list[Step]:
    """The "apply every write tool" probe: each write tool once, on some record, whatever it
    returns. A task whose tests this state passes is not testing its own changes."""
    ix = Index.of(tables, domain.keys)
    steps = []
    for w in _writes(domain):
        params = fill(w, ix, rng)
        if params is not None:
            steps.append(Step(w.name, params, expect="any"))
    return steps


def unsupported(domain: Domain, tables: Tables, recoveries: list[Recovery]) -> dict[str, str]:
    """The graph features this domain's tools cannot carry, with why: sampling them only
    makes graphs that no grounding fits."""
    ix = Index.of(tables, domain.keys)
    fed = {}
    for w in _writes(domain):
        fed[w.name] = {c[3] for c in producers(domain, w, ix)} | {
            c.param for c in chains(domain, w, ix)
        }
    out = {}
    if not recoveries:
        out["error_recovery"] = "no refused call had a fix that then let it through"
    if not any(fed.values()):
        out["long_range"] = "no read tool returns a value a write tool takes"
    if not any(len(v) >= 2 for v in fed.values()):
        out["convergence"] = "no write tool takes values from two different reads"
    return out
