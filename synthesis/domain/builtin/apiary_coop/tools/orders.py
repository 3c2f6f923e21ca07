"""Order tools in the tau-bench shape: a class per tool, invoke(data, ...) + get_info()."""

import json

from _rules import MAX_ORDER_KG, PRICE_PER_KG, next_code


def _batch(data, batch_code):
    return next((b for b in data["harvests"] if b["batch"] == batch_code), None)


class PlaceOrder:
    @staticmethod
    def invoke(data, buyer_email, batch_code, kg, date):
        buyer = data["buyers"].get(buyer_email)
        if buyer is None:
            return f"Error: no buyer {buyer_email}"
        if buyer["on_hold"]:
            return (
                f"Error: buyer {buyer_email} is on credit hold (balance {buyer['balance']:.2f}, "
                f"limit {buyer['credit_limit']:.2f}); a payment must be recorded first"
            )
        batch = _batch(data, batch_code)
        if batch is None:
            return f"Error: no batch {batch_code}"
        if batch["status"] != "released":
            return f"Error: batch {batch_code} is not released for sale (status {batch['status']})"
        if not 0 < kg <= MAX_ORDER_KG:
            return f"Error: an order is between 0 and {MAX_ORDER_KG} kg"
        if kg > batch["kg_available"]:
            return f"Error: out of stock: batch {batch_code} has {batch['kg_available']} kg left"
        price = PRICE_PER_KG[batch["variety"]]
        total = round(kg * price, 2)
        if buyer["balance"] + total > buyer["credit_limit"]:
            return (
                f"Error: order total {total:.2f} would take buyer {buyer_email} over the "
                f"credit limit {buyer['credit_limit']:.2f}"
            )
        orders = data["orders"]
        code = next_code(list(orders), "ORD-", 4)
        orders[code] = {
            "code": code,
            "buyer": buyer_email,
            "batch": batch_code,
            "kg": kg,
            "price_per_kg": price,
            "total": total,
            "date": date,
            "status": "open",
            "cancel_reason": None,
        }
        batch["kg_available"] = round(batch["kg_available"] - kg, 1)
        buyer["balance"] = round(buyer["balance"] + total, 2)
        return json.dumps(orders[code])

    @staticmethod
    def get_info():
        return {
            "type": "function",
            "function": {
                "name": "place_order",
                "description": "Sell honey from a released batch to a buyer.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "buyer_email": {"type": "string", "description": "the buyer's email"},
                        "batch_code": {"type": "string", "description": "e.g. HB-2025-014"},
                        "kg": {"type": "number", "description": "kilograms ordered"},
                        "date": {"type": "string", "description": "order day, YYYY-MM-DD"},
                    },
                    "required": ["buyer_email", "batch_code", "kg", "date"],
                },
            },
        }


class CancelOrder:
    @staticmethod
    def invoke(data, order_code, reason):
        order = data["orders"].get(order_code)
        if order is None:
            return f"Error: no order {order_code}"
        if order["status"] != "open":
            return f"Error: order {order_code} is {order['status']} and cannot be cancelled"
        batch = _batch(data, order["batch"])
        batch["kg_available"] = round(batch["kg_available"] + order["kg"], 1)
        buyer = data["buyers"][order["buyer"]]
        buyer["balance"] = round(max(0.0, buyer["balance"] - order["total"]), 2)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return json.dumps({"code": order_code, "status": "cancelled", "kg_returned": order["kg"]})

    @staticmethod
    def get_info():
        return {
            "type": "function",
            "function": {
                "name": "cancel_order",
                "description": "Cancel an open order; its honey goes back to the batch.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "order_code": {"type": "string", "description": "e.g. ORD-0007"},
                        "reason": {"type": "string", "description": "why it is cancelled"},
                    },
                    "required": ["order_code", "reason"],
                },
            },
        }


class GetOrder:
    @staticmethod
    def invoke(data, order_code):
        order = data["orders"].get(order_code)
        if order is None:
            return f"Error: no order {order_code}"
        return json.dumps(order)

    @staticmethod
    def get_info():
        return {
            "type": "function",
            "function": {
                "name": "get_order",
                "description": "Look up one order.",
                "parameters": {
                    "type": "object",
                    "properties": {"order_code": {"type": "string", "description": "ORD-nnnn"}},
                    "required": ["order_code"],
                },
            },
        }
