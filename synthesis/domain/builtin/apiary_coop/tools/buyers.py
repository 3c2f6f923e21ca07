"""Buyer tools in the tau-bench shape: find buyers, see one with its open orders, take payments."""

import json

from _rules import next_code


class FindBuyers:
    @staticmethod
    def invoke(data, query):
        needle = query.strip().lower()
        if not needle:
            return "Error: query is empty"
        found = [
            {"email": b["email"], "name": b["name"], "kind": b["kind"]}
            for b in data["buyers"].values()
            if needle in b["name"].lower() or needle in b["email"]
        ]
        return json.dumps(found)

    @staticmethod
    def get_info():
        return {
            "type": "function",
            "function": {
                "name": "find_buyers",
                "description": "Search buyers by part of their name or email.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "text to look for"}},
                    "required": ["query"],
                },
            },
        }


class GetBuyer:
    @staticmethod
    def invoke(data, buyer_email):
        buyer = data["buyers"].get(buyer_email)
        if buyer is None:
            return f"Error: no buyer {buyer_email}"
        open_orders = [
            o["code"]
            for o in data["orders"].values()
            if o["buyer"] == buyer_email and o["status"] == "open"
        ]
        return json.dumps({**buyer, "open_orders": open_orders})

    @staticmethod
    def get_info():
        return {
            "type": "function",
            "function": {
                "name": "get_buyer",
                "description": "A buyer's account: balance, credit limit, hold, open orders.",
                "parameters": {
                    "type": "object",
                    "properties": {"buyer_email": {"type": "string", "description": "email"}},
                    "required": ["buyer_email"],
                },
            },
        }


class RecordPayment:
    @staticmethod
    def invoke(data, buyer_email, amount, date):
        buyer = data["buyers"].get(buyer_email)
        if buyer is None:
            return f"Error: no buyer {buyer_email}"
        if amount <= 0:
            return "Error: a payment amount must be positive"
        if amount > buyer["balance"]:
            return f"Error: payment {amount:.2f} exceeds the balance {buyer['balance']:.2f}"
        payments = data["payments"]
        payment = {
            "code": next_code([p["code"] for p in payments], "PY-", 4),
            "buyer": buyer_email,
            "amount": amount,
            "date": date,
        }
        payments.append(payment)
        buyer["balance"] = round(buyer["balance"] - amount, 2)
        if buyer["balance"] <= buyer["credit_limit"]:
            buyer["on_hold"] = False
        return json.dumps({**payment, "balance": buyer["balance"], "on_hold": buyer["on_hold"]})

    @staticmethod
    def get_info():
        return {
            "type": "function",
            "function": {
                "name": "record_payment",
                "description": "Record a buyer's payment; a buyer back within the limit comes off hold.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "buyer_email": {"type": "string", "description": "email"},
                        "amount": {"type": "number", "description": "amount paid"},
                        "date": {"type": "string", "description": "payment day, YYYY-MM-DD"},
                    },
                    "required": ["buyer_email", "amount", "date"],
                },
            },
        }
