"""Rebuild the tau-bench fixtures (tests/fixtures/domains/tau_retail, tau_airline) from tau-bench.

tau-bench (github.com/sierra-research/tau-bench, MIT, Copyright (c) 2024 Sierra) publishes two
executable domains: an online retailer (15 tools) and an airline desk (14 tools), JSON state, one
tool class per file. No code of clawloop was written against them: they are the fair measure of
domain-grounded synthesis (issue 36). The fixtures keep the tools as published (only the import
of tau-bench's abstract `Tool` base class points at a copy of it, `tools/_tool.py`, since the
package itself is not there) and a small, deterministic slice of the state, so tests stay fast:

- retail: users chosen in file order, first those with a *fixable refusal* (a pending order that
  a gift card cannot pay for until another pending order paid with that card is cancelled or
  re-paid: the refund tops the card up), then users with both a pending and a delivered order;
  all their orders, and the products those orders hold;
- airline: users in file order with at least two reservations, one with a gift card, their
  reservations, and the flights those reservations fly, each flight's dates cut to the ones
  reserved plus the next few (so searches and rebookings find something).

    python benchmarks/tau_domains.py TAU_BENCH_CHECKOUT [--out tests/fixtures/domains]

TAU_BENCH_CHECKOUT is a work tree of the repository or a bare/mirror git directory (read with
`git show HEAD:<path>`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

ENVS = "tau_bench/envs"
IMPORT = "from tau_bench.envs.tool import Tool"
RETAIL_USERS = 8
AIRLINE_USERS = 6
EXTRA_DATES = 3

NOTICE = """The tools and the state in this folder come from tau-bench
(https://github.com/sierra-research/tau-bench, {env} domain), MIT License:

    Copyright (c) 2024 Sierra

    Permission is hereby granted, free of charge, to any person obtaining a copy of this software
    and associated documentation files (the "Software"), to deal in the Software without
    restriction, including without limitation the rights to use, copy, modify, merge, publish,
    distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
    Software is furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all copies or
    substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.

Changes: `from tau_bench.envs.tool import Tool` reads `from _tool import Tool` (tools/_tool.py is
tau-bench's envs/tool.py); the state is a slice of tau-bench's data (benchmarks/tau_domains.py
rebuilds it from a tau-bench checkout); domain.toml and policy.md (the domain's wiki.md) are
clawloop's contract for an executable domain.
"""


class Source:
    """Files of a tau-bench checkout or git directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.git = not (root / ENVS).is_dir()

    def tools(self, env: str) -> list[str]:
        """The tool modules of one environment (every tools/*.py but the package's __init__)."""
        rel = f"{ENVS}/{env}/tools"
        if self.git:
            names = subprocess.run(
                ["git", "--git-dir", str(self.root), "ls-tree", "--name-only", f"HEAD:{rel}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
        else:
            names = [p.name for p in (self.root / rel).iterdir()]
        return sorted(n[:-3] for n in names if n.endswith(".py") and n != "__init__.py")

    def read(self, rel: str) -> str:
        if not self.git:
            return (self.root / rel).read_text()
        return subprocess.run(
            ["git", "--git-dir", str(self.root), "show", f"HEAD:{rel}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout


def _fixable(user: dict[str, Any], orders: dict[str, Any]) -> bool:
    """A pending order a gift card of this user cannot pay for, until a refund to that card
    (another pending order it paid for, cancelled or re-paid) tops it up."""
    pending = [orders[o] for o in user["orders"] if orders.get(o, {}).get("status") == "pending"]
    for card, method in user["payment_methods"].items():
        if method["source"] != "gift_card":
            continue
        for paid in pending:
            ph = paid["payment_history"]
            if len(ph) != 1 or ph[0]["payment_method_id"] != card:
                continue
            for other in pending:
                oh = other["payment_history"]
                if other is paid or len(oh) != 1 or oh[0]["payment_method_id"] == card:
                    continue
                if method["balance"] < oh[0]["amount"] <= method["balance"] + ph[0]["amount"]:
                    return True
    return False


def retail_slice(users: dict, orders: dict, products: dict) -> dict[str, dict]:
    def statuses(u: dict) -> set[str]:
        return {orders[o]["status"] for o in u["orders"] if o in orders}

    fixable = [k for k, u in users.items() if _fixable(u, orders)][: RETAIL_USERS // 2]
    mixed = [k for k, u in users.items()
             if k not in fixable and {"pending", "delivered"} <= statuses(u)]  # fmt: skip
    picked = fixable + mixed[: RETAIL_USERS - len(fixable)]
    kept_users = {k: users[k] for k in picked}
    kept_orders = {o: orders[o] for k in picked for o in users[k]["orders"] if o in orders}
    wanted = {i["product_id"] for o in kept_orders.values() for i in o["items"]}
    kept_products = {p: products[p] for p in products if p in wanted}
    return {"users": kept_users, "orders": kept_orders, "products": kept_products}


def airline_slice(users: dict, reservations: dict, flights: dict) -> dict[str, dict]:
    def has_card(u: dict) -> bool:
        return any(m["source"] == "gift_card" for m in u["payment_methods"].values())

    ok = [
        k for k, u in users.items() if len([r for r in u["reservations"] if r in reservations]) >= 2
    ]
    picked = [k for k in ok if has_card(users[k])][: AIRLINE_USERS // 2]
    picked += [k for k in ok if k not in picked][: AIRLINE_USERS - len(picked)]
    kept_users = {k: users[k] for k in picked}
    kept_res = {r: reservations[r] for k in picked for r in users[k]["reservations"]
                if r in reservations}  # fmt: skip
    dates: dict[str, set[str]] = {}
    for r in kept_res.values():
        for f in r["flights"]:
            dates.setdefault(f["flight_number"], set()).add(f["date"])
    kept_flights = {}
    for number, wanted in sorted(dates.items()):
        flight = dict(flights[number])
        order = sorted(flight["dates"])
        keep = set(wanted)
        for d in wanted:
            at = order.index(d) if d in order else len(order)
            keep |= set(order[at + 1 : at + 1 + EXTRA_DATES])
        flight["dates"] = {d: flight["dates"][d] for d in order if d in keep}
        kept_flights[number] = flight
    return {"users": kept_users, "reservations": kept_res, "flights": kept_flights}


def _tool(text: str) -> str:
    if IMPORT not in text:
        raise SystemExit(f"a tau-bench tool no longer imports its base as {IMPORT!r}")
    return text.replace(IMPORT, "from _tool import Tool")


def write_domain(src: Source, env: str, tables: dict[str, dict], out: Path,
                 description: str) -> None:  # fmt: skip
    (out / "tools").mkdir(parents=True, exist_ok=True)
    (out / "state").mkdir(parents=True, exist_ok=True)
    (out / "tools" / "_tool.py").write_text(src.read(f"{ENVS}/tool.py"))
    for name in src.tools(env):
        (out / "tools" / f"{name}.py").write_text(_tool(src.read(f"{ENVS}/{env}/tools/{name}.py")))
    for name, rows in tables.items():
        (out / "state" / f"{name}.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "policy.md").write_text(src.read(f"{ENVS}/{env}/wiki.md"))
    (out / "NOTICE").write_text(NOTICE.format(env=env))
    (out / "domain.toml").write_text(
        f'[domain]\nname = "tau_{env}"\ndescription = "{description}"\n\n'
        '[state]\nformat = "json"\npath = "state"\n'
    )


def build(checkout: Path, out: Path) -> None:
    src = Source(checkout)

    def data(env: str, name: str) -> dict:
        return json.loads(src.read(f"{ENVS}/{env}/data/{name}.json"))

    retail = retail_slice(data("retail", "users"), data("retail", "orders"),
                          data("retail", "products"))  # fmt: skip
    write_domain(src, "retail", retail, out / "tau_retail",
                 "tau-bench's online retailer: users with payment methods, orders, products "
                 "with variants (a slice of its data).")  # fmt: skip
    airline = airline_slice(data("airline", "users"), data("airline", "reservations"),
                            data("airline", "flights"))  # fmt: skip
    write_domain(src, "airline", airline, out / "tau_airline",
                 "tau-bench's airline reservation desk: users with payment methods, "
                 "reservations, flights with a schedule per date (a slice of its data).")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="a tau-bench work tree or git directory")
    ap.add_argument("--out", type=Path, default=Path("tests/fixtures/domains"))
    args = ap.parse_args()
    build(args.checkout, args.out)
    for env in ("tau_retail", "tau_airline"):
        size = sum(p.stat().st_size for p in (args.out / env / "state").glob("*.json"))
        print(f"{args.out / env}: state {size // 1024} KiB")


if __name__ == "__main__":
    main()
