"""Inspection tools: record what a keeper found, list a hive's inspections."""

from typing import Literal

from _rules import SERIOUS_DISEASES, next_code


def record_inspection(
    state,
    hive_code: str,
    date: str,
    inspector: str,
    brood_frames: int,
    disease: Literal["none", "chalkbrood", "varroa", "sacbrood", "efb", "afb-suspected"] = "none",
    temperament: Literal["calm", "nervous", "defensive"] = "calm",
    queen_seen: bool = True,
    notes: str = "",
) -> dict:
    """Record an inspection; a serious finding (efb, afb-suspected) quarantines the hive.

    Args:
        hive_code: the hive inspected.
        date: the day of the inspection.
        inspector: who inspected.
        brood_frames: frames with brood.
        disease: what was found.
        temperament: how the colony behaved.
        queen_seen: whether the queen was seen.
        notes: free text.
    """
    hives = state["hives"]
    if hive_code not in hives:
        return f"Error: no hive {hive_code}"
    hive = hives[hive_code]
    if hive["status"] == "retired":
        return f"Error: hive {hive_code} is retired"
    if not 0 <= brood_frames <= 30:
        return "Error: brood_frames must be between 0 and 30"
    log = state["inspections"]
    record = {
        "code": next_code([i["code"] for i in log], "IN-", 4),
        "hive": hive_code,
        "date": date,
        "inspector": inspector,
        "brood_frames": brood_frames,
        "disease": disease,
        "temperament": temperament,
        "queen_seen": queen_seen,
        "notes": notes,
    }
    log.append(record)
    if disease in SERIOUS_DISEASES and hive["status"] == "active":
        hive["status"] = "quarantined"
        hive["quarantined_since"] = date
        hive["quarantine_reason"] = f"inspection {record['code']} found {disease}"
    return {**record, "hive_status": hive["status"]}


def list_inspections(state, hive_code: str, since: str | None = None) -> list:
    """A hive's inspections, oldest first.

    Args:
        hive_code: the hive.
        since: only inspections on or after this day.
    """
    if hive_code not in state["hives"]:
        return f"Error: no hive {hive_code}"
    rows = [
        i
        for i in state["inspections"]
        if i["hive"] == hive_code and (since is None or i["date"] >= since)
    ]
    return sorted(rows, key=lambda i: (i["date"], i["code"]))
