"""Lot tools that change stock: donations and germination tests."""

from _codes import MIN_GERMINATION_PCT, member_row, next_code


def donate_seeds(
    conn, member_no: str, sku: str, harvest_year: int, packets: int, date: str
) -> dict:
    """Take in a member's donated seed as a new untested lot.

    Args:
        member_no: the donor.
        sku: the variety donated.
        harvest_year: the year the seed was saved.
        packets: packets donated.
        date: the day of the donation.
    """
    if member_row(conn, member_no) is None:
        return f"Error: no member {member_no}"
    if conn.execute("SELECT 1 FROM varieties WHERE sku = ?", (sku,)).fetchone() is None:
        return f"Error: no variety {sku}; add it to the catalogue first"
    if packets < 1:
        return "Error: a donation is at least one packet"
    if harvest_year > int(date[:4]):
        return f"Error: harvest year {harvest_year} is after the donation day {date}"
    code = next_code(conn, "lots", "lot_code", f"LOT-{harvest_year}-", 3)
    conn.execute(
        "INSERT INTO lots (lot_code, sku, harvest_year, source, donor_member_no, "
        "packets_available, status) VALUES (?, ?, ?, 'donation', ?, ?, 'untested')",
        (code, sku, harvest_year, member_no, packets),
    )
    return {"lot_code": code, "sku": sku, "packets_available": packets, "status": "untested"}


def record_germination_test(
    conn, lot_code: str, date: str, seeds_sown: int, seeds_sprouted: int
) -> dict:
    """Record a germination test; 70% or more makes the lot available, less quarantines it.

    Args:
        lot_code: the lot tested.
        date: the day the test was read.
        seeds_sown: seeds sown in the test.
        seeds_sprouted: seeds that sprouted.
    """
    if seeds_sown <= 0 or not 0 <= seeds_sprouted <= seeds_sown:
        return "Error: seeds_sprouted must be between 0 and seeds_sown, seeds_sown above 0"
    lot = conn.execute("SELECT status FROM lots WHERE lot_code = ?", (lot_code,)).fetchone()
    if lot is None:
        return f"Error: no lot {lot_code}"
    pct = round(100.0 * seeds_sprouted / seeds_sown, 1)
    code = next_code(conn, "germination_tests", "test_code", "GT-", 4)
    conn.execute(
        "INSERT INTO germination_tests VALUES (?, ?, ?, ?, ?, ?)",
        (code, lot_code, date, seeds_sown, seeds_sprouted, pct),
    )
    status = "available" if pct >= MIN_GERMINATION_PCT else "quarantined"
    conn.execute(
        "UPDATE lots SET status = ?, germination_pct = ? WHERE lot_code = ?",
        (status, pct, lot_code),
    )
    return {"test_code": code, "lot_code": lot_code, "pct": pct, "status": status}
