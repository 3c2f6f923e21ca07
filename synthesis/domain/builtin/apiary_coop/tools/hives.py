"""Hive tools: look up, list, move, quarantine and retire hives."""

from _rules import find_hive, hives_in


def get_hive(state, hive_code: str) -> dict:
    """Look up one hive with the date of its latest inspection.

    Args:
        hive_code: the hive's code, e.g. HV-0042.
    """
    hive = find_hive(state, hive_code)
    if hive is None:
        return f"Error: no hive {hive_code}"
    dates = [i["date"] for i in state["inspections"] if i["hive"] == hive_code]
    return {**hive, "last_inspection": max(dates, default=None)}


def list_hives(state, apiary_code: str, status: str | None = None) -> dict:
    """List the hives of an apiary, optionally only those with one status.

    Args:
        apiary_code: the apiary's code, e.g. AP-03.
        status: active, quarantined or retired; all when omitted.
    """
    if apiary_code not in state["apiaries"]:
        return f"Error: no apiary {apiary_code}"
    rows = [
        {"code": h["code"], "status": h["status"], "boxes": h["boxes"], "breed": h["breed"]}
        for h in state["hives"].values()
        if h["apiary"] == apiary_code and (status is None or h["status"] == status)
    ]
    return {"apiary": apiary_code, "hives": rows, "count": len(rows)}


def move_hive(state, hive_code: str, apiary_code: str, date: str) -> dict:
    """Move a hive to another apiary.

    Args:
        hive_code: the hive to move.
        apiary_code: the apiary it goes to.
        date: the day of the move (YYYY-MM-DD).
    """
    hive = find_hive(state, hive_code)
    if hive is None:
        return f"Error: no hive {hive_code}"
    if hive["status"] == "retired":
        return f"Error: hive {hive_code} is retired"
    if hive["status"] == "quarantined":
        return f"Error: hive {hive_code} is quarantined and cannot be moved"
    target = state["apiaries"].get(apiary_code)
    if target is None:
        return f"Error: no apiary {apiary_code}"
    if hive["apiary"] == apiary_code:
        return f"Error: hive {hive_code} is already at {apiary_code}"
    placed = len(hives_in(state, apiary_code))
    if placed >= target["max_hives"]:
        return f"Error: apiary {apiary_code} is at capacity ({placed}/{target['max_hives']})"
    hive["apiary"] = apiary_code
    hive["moved_on"] = date
    return {"code": hive_code, "apiary": apiary_code, "moved_on": date}


def quarantine_hive(state, hive_code: str, date: str, reason: str) -> dict:
    """Put an active hive under quarantine.

    Args:
        hive_code: the hive.
        date: the day the quarantine starts.
        reason: why (the finding).
    """
    hive = state["hives"].get(hive_code)
    if hive is None:
        return f"Error: no hive {hive_code}"
    if hive["status"] != "active":
        return f"Error: hive {hive_code} is {hive['status']}, not active"
    hive.update(status="quarantined", quarantined_since=date, quarantine_reason=reason)
    return {"code": hive_code, "status": "quarantined", "quarantined_since": date}


def lift_quarantine(state, hive_code: str, inspection_code: str) -> dict:
    """Lift a hive's quarantine on the strength of a clean inspection.

    Args:
        hive_code: the quarantined hive.
        inspection_code: a clean inspection of it dated on or after the quarantine start.
    """
    hive = find_hive(state, hive_code)
    if hive is None or hive["status"] != "quarantined":
        return f"Error: hive {hive_code} is not quarantined"
    found = [i for i in state["inspections"] if i["code"] == inspection_code]
    if not found or found[0]["hive"] != hive_code:
        return f"Error: no inspection {inspection_code} of hive {hive_code}"
    inspection = found[0]
    if inspection["date"] < hive["quarantined_since"]:
        return f"Error: inspection {inspection_code} predates the quarantine"
    if inspection["disease"] != "none":
        return f"Error: inspection {inspection_code} found {inspection['disease']}"
    hive["status"] = "active"
    hive["quarantined_since"] = None
    hive["quarantine_reason"] = None
    return {"code": hive_code, "status": "active", "cleared_by": inspection_code}


def retire_hive(state, hive_code: str, date: str, reason: str) -> dict:
    """Retire a hive (dead out, united, sold); it no longer takes a place in its apiary.

    Args:
        hive_code: the hive.
        date: the day it was retired.
        reason: why.
    """
    hive = find_hive(state, hive_code)
    if hive is None:
        return f"Error: no hive {hive_code}"
    if hive["status"] == "retired":
        return f"Error: hive {hive_code} is already retired"
    hive["status"] = "retired"
    hive["retired_on"] = date
    hive["retire_reason"] = reason
    return {"code": hive_code, "status": "retired", "retired_on": date}
