"""Harvest tools: take honey off a hive, record the lab's moisture result, list batches."""

from _rules import (
    INSPECTION_WINDOW_DAYS,
    MAX_HARVEST_KG,
    MAX_MOISTURE_PCT,
    PRICE_PER_KG,
    days_between,
    find_hive,
    next_code,
)


def _clean_inspection(data, hive_code, day):
    """The latest clean inspection of the hive in the window up to `day`, or None."""
    clean = [
        i
        for i in data["inspections"]
        if i["hive"] == hive_code
        and i["disease"] == "none"
        and 0 <= days_between(i["date"], day) <= INSPECTION_WINDOW_DAYS
    ]
    return max(clean, key=lambda i: i["date"], default=None)


def record_harvest(state, hive_code: str, date: str, kg: float, variety: str) -> dict:
    """Record a honey harvest from one hive as a new batch waiting for the lab.

    Args:
        hive_code: the hive harvested.
        date: the harvest day.
        kg: honey taken, in kilograms.
        variety: lime, heather, clover, wildflower or borage.
    """
    hive = find_hive(state, hive_code)
    if hive is None:
        return f"Error: no hive {hive_code}"
    if hive["status"] != "active":
        return f"Error: hive {hive_code} is {hive['status']}; honey cannot be taken from it"
    if variety not in PRICE_PER_KG:
        return f"Error: unknown variety {variety}"
    if not 0 < kg <= MAX_HARVEST_KG:
        return f"Error: a harvest is between 0 and {MAX_HARVEST_KG} kg"
    inspection = _clean_inspection(state, hive_code, date)
    if inspection is None:
        return (
            f"Error: hive {hive_code} has no clean inspection in the "
            f"{INSPECTION_WINDOW_DAYS} days up to {date}"
        )
    batches = state["harvests"]
    batch = {
        "batch": next_code([b["batch"] for b in batches], f"HB-{date[:4]}-", 3),
        "hive": hive_code,
        "date": date,
        "kg": kg,
        "variety": variety,
        "status": "pending_lab",
        "moisture_pct": None,
        "lab_date": None,
        "kg_available": kg,
    }
    batches.append(batch)
    return {**batch, "inspection": inspection["code"]}


def record_lab_result(state, batch_code: str, moisture_pct: float, date: str) -> dict:
    """Record the lab's moisture reading: the batch is released or rejected.

    Args:
        batch_code: the batch, e.g. HB-2025-014.
        moisture_pct: water content in percent.
        date: the day of the result.
    """
    for batch in state["harvests"]:
        if batch["batch"] == batch_code:
            break
    else:
        return f"Error: no batch {batch_code}"
    if batch["status"] != "pending_lab":
        return f"Error: batch {batch_code} already has a lab result ({batch['status']})"
    batch["moisture_pct"] = moisture_pct
    batch["lab_date"] = date
    batch["status"] = "released" if moisture_pct <= MAX_MOISTURE_PCT else "rejected"
    if batch["status"] == "rejected":
        batch["kg_available"] = 0.0
    return {"batch": batch_code, "status": batch["status"], "moisture_pct": moisture_pct}


def list_batches(state, status: str | None = None, variety: str | None = None) -> list:
    """Honey batches with what is left to sell, newest first.

    Args:
        status: pending_lab, released or rejected; all when omitted.
        variety: only this variety.
    """
    matching = [
        b
        for b in state["harvests"]
        if (status is None or b["status"] == status)
        and (variety is None or b["variety"] == variety)
    ]
    return [
        {
            "batch": b["batch"],
            "variety": b["variety"],
            "status": b["status"],
            "kg_available": b["kg_available"],
            "price_per_kg": PRICE_PER_KG[b["variety"]],
        }
        for b in sorted(matching, key=lambda b: b["batch"], reverse=True)
    ]
