"""Apiary tools."""

from _rules import hives_in


def get_apiary(state, apiary_code: str) -> dict:
    """Look up an apiary with how many hives it holds and how many places are free.

    Args:
        apiary_code: the apiary's code, e.g. AP-03.
    """
    apiary = state["apiaries"].get(apiary_code)
    if apiary is None:
        return f"Error: no apiary {apiary_code}"
    placed = len(hives_in(state, apiary_code))
    return {**apiary, "hive_count": placed, "free_places": apiary["max_hives"] - placed}
