"""What a record leads to: the values nested inside it (dotted paths) and its neighbouring records.

Third-party domains keep much of what a tool needs below the top level of a record: an order's
`payment_history.0.payment_method_id`, its `address.city`, a user's `payment_methods` keyed by id.
Grounding reads them here, as data (never running a tool):

- `leaves`: every scalar a record holds, by dotted path (`address.city`, `items.1.item_id`);
- `structural`: the paths a table's records share (`address.city` in every order), as opposed to
  paths through a record's own ids (`payment_methods.gift_card_7794233.balance`): a lookup's
  result is read along a structural path, so naming the path never states the value;
- `feeds`: whether a parameter takes the value a path ends in (`payment_method_id` <- `...
  payment_method_id`, `payment_methods.<id>.id`; `item_ids` <- `items.0.item_id`);
- `neighbours`: the records a record refers to or is referred to by (an order's user, the user's
  other orders), through the state's reference fields;
- `holding`: the records that hold one of some values anywhere inside them (the orders a gift
  card paid for), which is where a refusal's cause often sits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

MAX_DEPTH = 4  # path segments followed below a record
MAX_INDEX = 3  # list positions followed (the first few items of a list)
Row = dict[str, Any]
Links = dict[tuple[str, str], set[tuple[str, str]]]


def scalar(v: Any) -> bool:
    return isinstance(v, str | int | float) and not isinstance(v, bool)


def leaves(value: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """(dotted path, scalar) for every scalar inside `value` (a record: its fields first)."""
    if scalar(value):
        return [(prefix, value)] if prefix else []
    if depth >= MAX_DEPTH:
        return []
    if isinstance(value, dict):
        items: Iterable[tuple[str, Any]] = ((str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((str(i), v) for i, v in enumerate(value[:MAX_INDEX]))
    else:
        return []
    out = []
    for k, v in items:
        out += leaves(v, f"{prefix}.{k}" if prefix else k, depth + 1)
    return out


def at(value: Any, path: str) -> Any:
    """The value at a dotted path (list positions as numbers), None where there is none.

    runtime.field_at reads the same way on purpose and is not imported here: runtime.py is shipped
    into sandboxes as a standalone file, and importing it would key verify's cache on it
    (tests/tasks/test_cache_keys.py)."""
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def structural(rows: list[Row]) -> list[str]:
    """Nested paths (two segments or more) that at least two records hold (all of them, for a
    table of one record): shared shape, not a record's own ids."""
    seen: dict[str, int] = {}
    for r in rows:
        for p in {p for p, _ in leaves(r)}:
            if "." in p:
                seen[p] = seen.get(p, 0) + 1
    least = 2 if len(rows) > 1 else 1
    return sorted(p for p, n in seen.items() if n >= least)


def named(path: str) -> tuple[str, str]:
    """(parent, leaf): the leaf is the last segment; the parent the last one before it that is
    a name, not a list position or a record's own id (`payment_methods` in
    `payment_methods.gift_card_7794233.id`)."""
    parts = path.split(".")
    names = [s for s in parts[:-1] if not any(c.isdigit() for c in s)]
    return (names[-1] if names else "", parts[-1])


def feeds(param: str, path: str, names_field: Callable[[str, str, str], bool]) -> bool:
    """Does `param` take the scalar at `path`? By the leaf's name, or the parent's singular and
    the leaf (`payment_method_id` <- `payment_methods.<id>.id`); a list parameter by its
    singular (`item_ids` <- `items.0.item_id`)."""
    parent, leaf = named(path)
    if not leaf or leaf.isdigit():
        return False
    return names_field(param, leaf, parent) or (
        param.endswith("s") and names_field(param[:-1], leaf, parent)
    )


def neighbours(
    tables: dict[str, list[Row]], links: Links, table: str, row: Row
) -> list[tuple[str, Row]]:
    """Records `row` refers to (an order's user), records that refer to it (a user's orders),
    and records that refer to the same one (the user's other orders), in that order, once each."""
    out: list[tuple[str, Row]] = []

    def add(t: str, r: Row) -> None:
        if r is not row and all(r is not x for _, x in out):
            out.append((t, r))

    for (t, f), targets in sorted(links.items()):
        if t == table and row.get(f) is not None:
            for kt, kf in sorted(targets):
                for r in tables.get(kt, []):
                    if r.get(kf) == row[f]:
                        add(kt, r)
    for (t, f), targets in sorted(links.items()):
        for kt, kf in sorted(targets):
            if kt == table and row.get(kf) is not None:
                for r in tables.get(t, []):
                    if r.get(f) == row[kf]:
                        add(t, r)
    for (t, f), _ in sorted(links.items()):
        if t == table and row.get(f) is not None:
            for r in tables.get(t, []):
                if r.get(f) == row[f]:
                    add(t, r)
    return out


def holding(tables: dict[str, list[Row]], values: Iterable[Any]) -> list[tuple[str, Row]]:
    """Records holding one of `values` (texts of 3+ characters) anywhere inside them, nested
    fields and object keys included: where a value passed to a refused call is also used."""
    wanted = {v for v in values if isinstance(v, str) and len(v) >= 3}
    if not wanted:
        return []
    out = []
    for t, rows in sorted(tables.items()):
        for r in rows:
            inner = {p.split(".")[i] for p, _ in leaves(r) for i in range(p.count(".") + 1)}
            if wanted & ({v for _, v in leaves(r) if isinstance(v, str)} | inner):
                out.append((t, r))
    return out
