"""Shared rules of the cooperative: limits, prices and small lookups the tools reuse."""

from datetime import date

MAX_ORDER_KG = 60.0
MAX_HARVEST_KG = 40.0
MAX_MOISTURE_PCT = 18.6
INSPECTION_WINDOW_DAYS = 30
PRICE_PER_KG = {
    "lime": 16.0,
    "heather": 19.5,
    "clover": 12.0,
    "wildflower": 13.5,
    "borage": 15.0,
}
SERIOUS_DISEASES = ("efb", "afb-suspected")


def find_hive(data, hive_code):
    """The hive record, or None."""
    return data["hives"].get(hive_code)


def days_between(earlier, later):
    return (date.fromisoformat(later) - date.fromisoformat(earlier)).days


def next_code(codes, prefix, width):
    """prefix + (highest number among codes with that prefix) + 1, zero-padded."""
    numbers = [int(c[len(prefix) :]) for c in codes if c.startswith(prefix)]
    return f"{prefix}{max(numbers, default=0) + 1:0{width}d}"


def hives_in(data, apiary_code):
    """Hives of an apiary that take a place (active or quarantined)."""
    return [
        h for h in data["hives"].values() if h["apiary"] == apiary_code and h["status"] != "retired"
    ]
