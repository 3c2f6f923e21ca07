"""A realistic, large third-party-style airline domain, written by code (never committed as data).

Modelled on the tau-bench airline domain as people publish it: JSON state (users, flights with a
per-date schedule, reservations; about 5 MB at the default size), tools written one class per file
with a static `invoke(data, ...)` and a static `get_info()` schema, an abstract `Tool` base class,
and the read-only helpers such domains carry: `think`, `calculate`, `transfer_to_human_agents`
(no state access), `find_user_id_by_email` (returns an id string) and a flight search that copies
each flight and calls `.update()` on the copy. 14 tools; 5 of them write.

    python benchmarks/airline_domain.py OUT_DIR [--users 500] [--flights 400] [--reservations 3000]

`build(dest, ...)` is what tests and benchmarks/domain_scale.py call; the data is drawn from one
seeded random.Random, so a size and seed always give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

AIRPORTS = [
    "ATL",
    "BOS",
    "CLT",
    "DEN",
    "DFW",
    "DTW",
    "EWR",
    "IAH",
    "JFK",
    "LAS",
    "LAX",
    "LGA",
    "MCO",
    "MIA",
    "MSP",
    "ORD",
    "PHL",
    "PHX",
    "SEA",
    "SFO",
]
CABINS = ("basic_economy", "economy", "business")
FIRST = [
    "Mia",
    "Noah",
    "Emma",
    "Liam",
    "Olivia",
    "Ethan",
    "Ava",
    "Lucas",
    "Sofia",
    "Mason",
    "Yara",
    "Omar",
    "Ivan",
    "Chen",
    "Aisha",
    "Raj",
]
LAST = [
    "Lee",
    "Garcia",
    "Smith",
    "Kim",
    "Patel",
    "Muller",
    "Rossi",
    "Silva",
    "Nguyen",
    "Cohen",
    "Ali",
    "Novak",
    "Sato",
    "Brown",
]
DAYS = [f"2024-05-{d:02d}" for d in range(1, 31)]
TODAY = "2024-05-15"

DOMAIN_TOML = """[domain]
name = "big_airline"
description = "An airline's reservation desk (tau-bench style): users with payment methods, a flight schedule per date, reservations."

[state]
format = "json"
path = "data"
"""

POLICY = """# Airline policy (excerpt)
- A cancelled reservation cannot be changed or cancelled again.
- Checked bags can be added, never removed; each bag over the free allowance costs $50.
- A cabin change needs every flight of the reservation still bookable (status "available").
- Certificates are compensation: at most $500 each, and a user holds at most three.
"""

BASE = """import abc
from typing import Any, Dict


class Tool(abc.ABC):
    @staticmethod
    def invoke(*args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def get_info() -> Dict[str, Any]:
        raise NotImplementedError
"""


def _schema(name: str, description: str, props: dict, required: list[str]) -> str:
    info = {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }
    return json.dumps(info, indent=4).replace("true", "True").replace("false", "False")


def _tool(cls: str, imports: str, invoke: str, info: str) -> str:
    body = "\n".join("        " + line if line else "" for line in info.splitlines())
    return (
        f"{imports}\nfrom tool import Tool\n\n\nclass {cls}(Tool):\n    @staticmethod\n"
        f"{invoke}\n\n    @staticmethod\n    def get_info() -> Dict[str, Any]:\n"
        f"        return {body.lstrip()}\n"
    )


S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741

TOOLS = {
    "book_reservation": (
        "BookReservation",
        "import json\nfrom typing import Any, Dict, List",
        """    def invoke(
        data: Dict[str, Any],
        user_id: str,
        origin: str,
        destination: str,
        flight_type: str,
        cabin: str,
        flights: List[Dict[str, Any]],
        passengers: List[Dict[str, Any]],
        payment_methods: List[Dict[str, Any]],
        total_baggages: int,
        nonfree_baggages: int,
        insurance: str,
    ) -> str:
        reservations, users = data["reservations"], data["users"]
        if user_id not in users:
            return "Error: user not found"
        user = users[user_id]
        reservation_id = "HATHAT"
        for i in range(100000):
            reservation_id = "NEW" + str(i).zfill(3)
            if reservation_id not in reservations:
                break
        reservation = {
            "reservation_id": reservation_id,
            "user_id": user_id,
            "origin": origin,
            "destination": destination,
            "flight_type": flight_type,
            "cabin": cabin,
            "flights": [],
            "passengers": passengers,
            "payment_history": payment_methods,
            "created_at": "2024-05-15T15:00:00",
            "total_baggages": total_baggages,
            "nonfree_baggages": nonfree_baggages,
            "insurance": insurance,
            "status": "active",
        }
        total_price = 0
        for flight in flights:
            flight_number = flight["flight_number"]
            if flight_number not in data["flights"]:
                return f"Error: flight {flight_number} not found"
            flight_data = data["flights"][flight_number]
            if flight["date"] not in flight_data["dates"]:
                return f"Error: flight {flight_number} not found on date {flight['date']}"
            flight_date_data = flight_data["dates"][flight["date"]]
            if flight_date_data["status"] != "available":
                return f"Error: flight {flight_number} not available on date {flight['date']}"
            if flight_date_data["available_seats"][cabin] < len(passengers):
                return f"Error: not enough seats on flight {flight_number}"
            price = flight_date_data["prices"][cabin]
            reservation["flights"].append(
                {"origin": flight_data["origin"], "destination": flight_data["destination"],
                 "flight_number": flight_number, "date": flight["date"], "price": price}
            )
            total_price += price * len(passengers)
        if insurance == "yes":
            total_price += 30 * len(passengers)
        total_price += 50 * nonfree_baggages
        for payment_method in payment_methods:
            payment_id = payment_method["payment_id"]
            amount = payment_method["amount"]
            if payment_id not in user["payment_methods"]:
                return f"Error: payment method {payment_id} not found"
            if user["payment_methods"][payment_id]["source"] in ["gift_card", "certificate"]:
                if user["payment_methods"][payment_id]["amount"] < amount:
                    return f"Error: not enough balance in payment method {payment_id}"
        if sum(p["amount"] for p in payment_methods) != total_price:
            return f"Error: payment amount does not add up, total price is {total_price}"
        for payment_method in payment_methods:
            payment_id = payment_method["payment_id"]
            amount = payment_method["amount"]
            if user["payment_methods"][payment_id]["source"] == "gift_card":
                user["payment_methods"][payment_id]["amount"] -= amount
            elif user["payment_methods"][payment_id]["source"] == "certificate":
                del user["payment_methods"][payment_id]
        for flight in reservation["flights"]:
            seats = data["flights"][flight["flight_number"]]["dates"][flight["date"]]
            seats["available_seats"][cabin] -= len(passengers)
        reservations[reservation_id] = reservation
        user["reservations"].append(reservation_id)
        return json.dumps(reservation)""",
        _schema(
            "book_reservation",
            "Book a reservation.",
            {
                "user_id": S,
                "origin": S,
                "destination": S,
                "flight_type": {"type": "string", "enum": ["one_way", "round_trip"]},
                "cabin": {"type": "string", "enum": list(CABINS)},
                "flights": {"type": "array", "items": {"type": "object"}},
                "passengers": {"type": "array", "items": {"type": "object"}},
                "payment_methods": {"type": "array", "items": {"type": "object"}},
                "total_baggages": I,
                "nonfree_baggages": I,
                "insurance": {"type": "string", "enum": ["yes", "no"]},
            },
            [
                "user_id",
                "origin",
                "destination",
                "flight_type",
                "cabin",
                "flights",
                "passengers",
                "payment_methods",
                "total_baggages",
                "nonfree_baggages",
                "insurance",
            ],
        ),  # fmt: skip
    ),
    "calculate": (
        "Calculate",
        "from typing import Any, Dict",
        '''    def invoke(data: Dict[str, Any], expression: str) -> str:
        if not all(char in "0123456789+-*/(). " for char in expression):
            return "Error: invalid characters in expression"
        try:
            return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))
        except Exception as e:
            return f"Error: {e}"''',
        _schema(
            "calculate",
            "Calculate the result of a mathematical expression.",
            {"expression": S},
            ["expression"],
        ),  # fmt: skip
    ),
    "cancel_reservation": (
        "CancelReservation",
        "import json\nfrom typing import Any, Dict",
        """    def invoke(data: Dict[str, Any], reservation_id: str) -> str:
        reservations = data["reservations"]
        if reservation_id not in reservations:
            return "Error: reservation not found"
        reservation = reservations[reservation_id]
        if reservation["status"] == "cancelled":
            return f"Error: reservation {reservation_id} is already cancelled"
        refunds = []
        for payment in reservation["payment_history"]:
            refunds.append({"payment_id": payment["payment_id"], "amount": -payment["amount"]})
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return json.dumps(reservation)""",
        _schema(
            "cancel_reservation",
            "Cancel the whole reservation.",
            {"reservation_id": S},
            ["reservation_id"],
        ),  # fmt: skip
    ),
    "find_user_id_by_email": (
        "FindUserIdByEmail",
        "from typing import Any, Dict",
        '''    def invoke(data: Dict[str, Any], email: str) -> str:
        users = data["users"]
        for user_id, profile in users.items():
            if profile["email"].lower() == email.lower():
                return user_id
        return "Error: user not found"''',
        _schema(
            "find_user_id_by_email",
            "Find a user's id by their email address.",
            {"email": S},
            ["email"],
        ),  # fmt: skip
    ),
    "get_reservation_details": (
        "GetReservationDetails",
        "import json\nfrom typing import Any, Dict",
        '''    def invoke(data: Dict[str, Any], reservation_id: str) -> str:
        reservations = data["reservations"]
        if reservation_id in reservations:
            return json.dumps(reservations[reservation_id])
        return "Error: reservation not found"''',
        _schema(
            "get_reservation_details",
            "Get the details of a reservation.",
            {"reservation_id": S},
            ["reservation_id"],
        ),  # fmt: skip
    ),
    "get_user_details": (
        "GetUserDetails",
        "import json\nfrom typing import Any, Dict",
        '''    def invoke(data: Dict[str, Any], user_id: str) -> str:
        users = data["users"]
        if user_id in users:
            return json.dumps(users[user_id])
        return "Error: user not found"''',
        _schema(
            "get_user_details",
            "Get the details of an user, including their reservations.",
            {"user_id": S},
            ["user_id"],
        ),  # fmt: skip
    ),
    "search_direct_flight": (
        "SearchDirectFlight",
        "import json\nfrom typing import Any, Dict",
        """    def invoke(data: Dict[str, Any], origin: str, destination: str, date: str) -> str:
        flights = data["flights"]
        results = []
        for flight in flights.values():
            if flight["origin"] == origin and flight["destination"] == destination:
                if date in flight["dates"] and flight["dates"][date]["status"] == "available":
                    # not include these fields
                    flight_info = {k: v for k, v in flight.items() if k != "dates"}
                    flight_info.update(flight["dates"][date])
                    results.append(flight_info)
        return json.dumps(results)""",
        _schema(
            "search_direct_flight",
            "Search direct flights between two cities on a date.",
            {"origin": S, "destination": S, "date": S},
            ["origin", "destination", "date"],
        ),  # fmt: skip
    ),
    "search_onestop_flight": (
        "SearchOnestopFlight",
        "import json\nfrom typing import Any, Dict",
        """    def invoke(data: Dict[str, Any], origin: str, destination: str, date: str) -> str:
        flights = data["flights"]
        results = []
        for flight1 in flights.values():
            if flight1["origin"] != origin or date not in flight1["dates"]:
                continue
            if flight1["dates"][date]["status"] != "available":
                continue
            for flight2 in flights.values():
                if flight2["destination"] != destination or flight1["destination"] != flight2["origin"]:
                    continue
                if date in flight2["dates"] and flight2["dates"][date]["status"] == "available":
                    if flight1["scheduled_arrival_time_est"] < flight2["scheduled_departure_time_est"]:
                        result1 = {k: v for k, v in flight1.items() if k != "dates"}
                        result1.update(flight1["dates"][date])
                        result1["date"] = date
                        result2 = {k: v for k, v in flight2.items() if k != "dates"}
                        result2.update(flight2["dates"][date])
                        result2["date"] = date
                        results.append([result1, result2])
        return json.dumps(results)""",
        _schema(
            "search_onestop_flight",
            "Search one-stop flights between two cities on a date.",
            {"origin": S, "destination": S, "date": S},
            ["origin", "destination", "date"],
        ),  # fmt: skip
    ),
    "send_certificate": (
        "SendCertificate",
        "from typing import Any, Dict",
        '''    def invoke(data: Dict[str, Any], user_id: str, amount: int) -> str:
        users = data["users"]
        if user_id not in users:
            return "Error: user not found"
        if amount <= 0 or amount > 500:
            return f"Error: a certificate is between 1 and 500 dollars, not {amount}"
        user = users[user_id]
        for id in [3221322, 3221323, 3221324]:
            payment_id = "certificate_" + str(id)
            if payment_id not in user["payment_methods"]:
                user["payment_methods"][payment_id] = {
                    "source": "certificate",
                    "amount": amount,
                    "id": payment_id,
                }
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        return f"Error: user {user_id} already holds three certificates"''',
        _schema(
            "send_certificate",
            "Send a certificate to a user. Be careful!",
            {"user_id": S, "amount": {"type": "number"}},
            ["user_id", "amount"],
        ),  # fmt: skip
    ),
    "think": (
        "Think",
        "from typing import Any, Dict",
        '''    def invoke(data: Dict[str, Any], thought: str) -> str:
        return ""''',
        _schema(
            "think",
            "Use the tool to think about something. It will not obtain new "
            "information or change the database.",
            {"thought": S},
            ["thought"],
        ),  # fmt: skip
    ),
    "transfer_to_human_agents": (
        "TransferToHumanAgents",
        "from typing import Any, Dict",
        '''    def invoke(data: Dict[str, Any], summary: str) -> str:
        return "Transfer successful"''',
        _schema(
            "transfer_to_human_agents",
            "Transfer the user to a human agent, with a summary.",
            {"summary": S},
            ["summary"],
        ),  # fmt: skip
    ),
    "update_reservation_baggages": (
        "UpdateReservationBaggages",
        "import json\nfrom typing import Any, Dict",
        """    def invoke(
        data: Dict[str, Any],
        reservation_id: str,
        total_baggages: int,
        nonfree_baggages: int,
        payment_id: str = "",
    ) -> str:
        users, reservations = data["users"], data["reservations"]
        if reservation_id not in reservations:
            return "Error: reservation not found"
        reservation = reservations[reservation_id]
        if reservation["status"] == "cancelled":
            return f"Error: reservation {reservation_id} is cancelled"
        if total_baggages < reservation["total_baggages"]:
            return "Error: checked bags can be added, not removed"
        if nonfree_baggages > total_baggages:
            return "Error: more non-free bags than bags"
        total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        payment_id = payment_id or reservation["payment_history"][0]["payment_id"]
        if payment_id not in users[reservation["user_id"]]["payment_methods"]:
            return "Error: payment method not found"
        payment_method = users[reservation["user_id"]]["payment_methods"][payment_id]
        if payment_method["source"] == "certificate":
            return "Error: certificate cannot be used to update reservation"
        elif payment_method["source"] == "gift_card" and payment_method["amount"] < total_price:
            return "Error: gift card balance is not enough"
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        if payment_method["source"] == "gift_card":
            payment_method["amount"] -= total_price
        if total_price != 0:
            reservation["payment_history"].append({"payment_id": payment_id, "amount": total_price})
        return json.dumps(reservation)""",
        _schema(
            "update_reservation_baggages",
            "Update the baggage information of a reservation.",
            {
                "reservation_id": S,
                "total_baggages": I,
                "nonfree_baggages": I,
                "payment_id": {"type": "string", "description": "defaults to the original payment"},
            },
            ["reservation_id", "total_baggages", "nonfree_baggages"],
        ),  # fmt: skip
    ),
    "update_reservation_flights": (
        "UpdateReservationFlights",
        "import copy\nimport json\nfrom typing import Any, Dict, List",
        """    def invoke(
        data: Dict[str, Any],
        reservation_id: str,
        cabin: str,
        flights: List[Dict[str, Any]] = None,
        payment_id: str = "",
    ) -> str:
        users, reservations = data["users"], data["reservations"]
        if reservation_id not in reservations:
            return "Error: reservation not found"
        reservation = reservations[reservation_id]
        if reservation["status"] == "cancelled":
            return f"Error: reservation {reservation_id} is cancelled"
        wanted = flights if flights is not None else copy.deepcopy(reservation["flights"])
        total_price = 0
        new_flights = []
        for flight in wanted:
            flight_number, date = flight["flight_number"], flight["date"]
            if flight_number not in data["flights"]:
                return f"Error: flight {flight_number} not found"
            flight_data = data["flights"][flight_number]
            if date not in flight_data["dates"] or flight_data["dates"][date]["status"] != "available":
                return f"Error: flight {flight_number} is not available on {date}"
            price = flight_data["dates"][date]["prices"][cabin]
            old = [f for f in reservation["flights"] if f["flight_number"] == flight_number]
            total_price += price - (old[0]["price"] if old else 0)
            new_flights.append({"flight_number": flight_number, "date": date, "price": price,
                                "origin": flight_data["origin"], "destination": flight_data["destination"]})
        total_price *= len(reservation["passengers"])
        payment_id = payment_id or reservation["payment_history"][0]["payment_id"]
        if payment_id not in users[reservation["user_id"]]["payment_methods"]:
            return "Error: payment method not found"
        payment_method = users[reservation["user_id"]]["payment_methods"][payment_id]
        if payment_method["source"] == "certificate":
            return "Error: certificate cannot be used to update reservation"
        elif payment_method["source"] == "gift_card" and payment_method["amount"] < total_price:
            return "Error: gift card balance is not enough"
        if payment_method["source"] == "gift_card":
            payment_method["amount"] -= total_price
        reservation["flights"] = new_flights
        reservation["cabin"] = cabin
        if total_price != 0:
            reservation["payment_history"].append({"payment_id": payment_id, "amount": total_price})
        return json.dumps(reservation)""",
        _schema(
            "update_reservation_flights",
            "Update the flight information of a reservation (the same flights: a cabin change).",
            {
                "reservation_id": S,
                "cabin": {"type": "string", "enum": list(CABINS)},
                "flights": {"type": "array", "items": {"type": "object"}},
                "payment_id": S,
            },
            ["reservation_id", "cabin"],
        ),  # fmt: skip
    ),
    "update_reservation_passengers": (
        "UpdateReservationPassengers",
        "import json\nfrom typing import Any, Dict, List",
        """    def invoke(data: Dict[str, Any], reservation_id: str, passengers: List[Dict[str, Any]]) -> str:
        reservations = data["reservations"]
        if reservation_id not in reservations:
            return "Error: reservation not found"
        reservation = reservations[reservation_id]
        if len(passengers) != len(reservation["passengers"]):
            return "Error: number of passengers does not match"
        reservation["passengers"] = passengers
        return json.dumps(reservation)""",
        _schema(
            "update_reservation_passengers",
            "Update the passenger information of a reservation.",
            {"reservation_id": S, "passengers": {"type": "array", "items": {"type": "object"}}},
            ["reservation_id", "passengers"],
        ),  # fmt: skip
    ),
}


def _name(rng: random.Random) -> dict[str, str]:
    return {"first_name": rng.choice(FIRST), "last_name": rng.choice(LAST)}


def _flights(rng: random.Random, n: int) -> dict:
    out = {}
    for i in range(n):
        origin, dest = rng.sample(AIRPORTS, 2)
        dep = rng.randint(5, 20)
        arr = dep + rng.randint(1, 5)
        base = rng.randint(50, 200)
        dates = {}
        for day in DAYS:
            if day < TODAY:
                status = rng.choice(["landed"] * 8 + ["cancelled"])
                dates[day] = {"status": status} | (
                    {"actual_departure_time_est": f"{day}T{dep:02d}:0{rng.randint(0, 9)}:00",
                     "actual_arrival_time_est": f"{day}T{arr:02d}:1{rng.randint(0, 9)}:00"}
                    if status == "landed" else {}
                )  # fmt: skip
            else:
                dates[day] = {
                    "status": "available",
                    "available_seats": {
                        c: rng.randint(0, s) for c, s in zip(CABINS, (20, 60, 12), strict=True)
                    },
                    "prices": {
                        c: base * m + rng.randint(0, 40)
                        for c, m in zip(CABINS, (1, 2, 5), strict=True)
                    },
                }
        number = f"HAT{i:03d}"
        out[number] = {
            "flight_number": number,
            "origin": origin,
            "destination": dest,
            "scheduled_departure_time_est": f"{dep:02d}:00:00",
            "scheduled_arrival_time_est": f"{arr:02d}:30:00",
            "dates": dates,
        }
    return out


def _users(rng: random.Random, n: int) -> dict:
    out = {}
    for i in range(n):
        name = _name(rng)
        uid = f"{name['first_name'].lower()}_{name['last_name'].lower()}_{1000 + i}"
        methods = {}
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["credit_card", "gift_card", "certificate"])
            pid = f"{kind}_{rng.randint(1000000, 9999999)}"
            methods[pid] = {"source": kind, "id": pid} | (
                {"brand": rng.choice(["visa", "mastercard"]), "last_four": f"{rng.randint(0, 9999):04d}"}
                if kind == "credit_card" else {"amount": rng.randint(20, 400)}
            )  # fmt: skip
        if not any(m["source"] == "credit_card" for m in methods.values()):
            pid = f"credit_card_{rng.randint(1000000, 9999999)}"
            methods[pid] = {
                "source": "credit_card",
                "id": pid,
                "brand": "visa",
                "last_four": "4242",
            }
        out[uid] = {
            "user_id": uid,
            "name": name,
            "address": {
                "address1": f"{rng.randint(1, 999)} {rng.choice(LAST)} Street",
                "address2": f"Suite {rng.randint(100, 999)}",
                "city": rng.choice(["Austin", "Denver", "Boston", "Seattle", "Chicago"]),
                "country": "USA",
                "state": rng.choice(["TX", "CO", "MA", "WA", "IL"]),
                "zip": f"{rng.randint(10000, 99999)}",
            },
            "email": f"{uid.replace('_', '.')}@example.com",
            "dob": f"19{rng.randint(50, 99)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "payment_methods": methods,
            "saved_passengers": [
                _name(rng) | {"dob": f"19{rng.randint(50, 99)}-01-01"}
                for _ in range(rng.randint(0, 2))
            ],  # fmt: skip
            "membership": rng.choice(["regular", "regular", "silver", "gold"]),
            "reservations": [],
        }
    return out


def _reservations(rng: random.Random, n: int, users: dict, flights: dict) -> dict:
    out = {}
    uids = list(users)
    numbers = list(flights)
    for _ in range(n):
        rid = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6))
        while rid in out:
            rid = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6))
        uid = rng.choice(uids)
        user = users[uid]
        cabin = rng.choice(CABINS)
        legs = []
        for _ in range(rng.choice([1, 1, 2])):
            number = rng.choice(numbers)
            day = rng.choice(DAYS)
            f = flights[number]
            price = f["dates"][day].get("prices", {}).get(cabin, rng.randint(80, 900))
            legs.append({"origin": f["origin"], "destination": f["destination"],
                         "flight_number": number, "date": day, "price": price})  # fmt: skip
        passengers = [_name(rng) | {"dob": f"19{rng.randint(50, 99)}-06-15"}
                      for _ in range(rng.randint(1, 3))]  # fmt: skip
        card = next(p for p, m in user["payment_methods"].items() if m["source"] == "credit_card")
        total = sum(leg["price"] for leg in legs) * len(passengers)
        bags = rng.randint(0, 3)
        out[rid] = {
            "reservation_id": rid,
            "user_id": uid,
            "origin": legs[0]["origin"],
            "destination": legs[-1]["destination"],
            "flight_type": "one_way" if len(legs) == 1 else "round_trip",
            "cabin": cabin,
            "flights": legs,
            "passengers": passengers,
            "payment_history": [{"payment_id": card, "amount": total}],
            "created_at": f"2024-0{rng.randint(1, 4)}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00",
            "total_baggages": bags,
            "nonfree_baggages": rng.randint(0, bags),
            "insurance": rng.choice(["yes", "no"]),
            "status": rng.choice(["active"] * 6 + ["cancelled"]),
        }
        user["reservations"].append(rid)
    return out


def build(
    dest: Path, users: int = 500, flights: int = 400, reservations: int = 3000, seed: int = 0
) -> Path:
    """Write the domain folder at `dest` (created; must not hold a domain already)."""
    dest = Path(dest)
    rng = random.Random(seed)
    (dest / "tools").mkdir(parents=True, exist_ok=False)
    (dest / "data").mkdir()
    (dest / "domain.toml").write_text(DOMAIN_TOML)
    (dest / "policy.md").write_text(POLICY)
    (dest / "tools" / "tool.py").write_text(BASE)
    for name, (cls, imports, invoke, info) in TOOLS.items():
        (dest / "tools" / f"{name}.py").write_text(_tool(cls, imports, invoke, info))
    fl = _flights(rng, flights)
    us = _users(rng, users)
    rs = _reservations(rng, reservations, us, fl)
    for table, data in (("flights", fl), ("users", us), ("reservations", rs)):
        (dest / "data" / f"{table}.json").write_text(json.dumps(data, indent=2) + "\n")
    return dest


def state_bytes(dest: Path) -> int:
    return sum(p.stat().st_size for p in (Path(dest) / "data").glob("*.json"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--users", type=int, default=500)
    ap.add_argument("--flights", type=int, default=400)
    ap.add_argument("--reservations", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    dest = build(Path(a.out), a.users, a.flights, a.reservations, a.seed)
    print(f"{dest}: {len(TOOLS)} tools, {state_bytes(dest) / 1e6:.2f} MB of JSON state")


if __name__ == "__main__":
    main()
