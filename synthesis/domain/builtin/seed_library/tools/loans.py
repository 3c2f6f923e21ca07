"""Loan tools: check packets out, return them (with saved seed), extend, list a member's loans."""

import sqlite3
from typing import Literal

from _codes import EXTENSION_DAYS, LOAN_DAYS, MAX_OPEN_LOANS, add_days, member_row, next_code


def _lendable(conn, lot_code, packets, member):
    """The reason a lot cannot be lent to a member, or None."""
    lot = conn.execute(
        "SELECT l.status, l.packets_available, v.rare, v.common_name FROM lots l "
        "JOIN varieties v ON v.sku = l.sku WHERE l.lot_code = ?",
        (lot_code,),
    ).fetchone()
    if lot is None:
        return f"Error: no lot {lot_code}"
    if lot["status"] != "available":
        return (
            f"Error: lot {lot_code} is {lot['status']}; it needs a germination test of 70% or more"
        )
    if packets > lot["packets_available"]:
        return f"Error: out of stock: lot {lot_code} has {lot['packets_available']} packets left"
    if lot["rare"] and not member["trained"]:
        return (
            f"Error: {lot['common_name']} is a rare variety; member {member['member_no']} "
            "must complete the seed-saving course first"
        )
    return None


def checkout_packets(conn, member_no: str, lot_code: str, packets: int, date: str) -> dict:
    """Lend packets of a lot to a member for 120 days.

    Args:
        member_no: the borrowing member.
        lot_code: the lot lent from.
        packets: 1 to 3 packets.
        date: the checkout day.
    """
    conn.row_factory = sqlite3.Row
    member = member_row(conn, member_no)
    if member is None:
        return f"Error: no member {member_no}"
    if member["status"] == "hold":
        return f"Error: member {member_no} is on hold ({member['hold_reason']})"
    if not 1 <= packets <= 3:
        return "Error: a loan is 1 to 3 packets"
    open_loans = conn.execute(
        "SELECT COUNT(*) FROM loans WHERE member_no = ? AND returned_date IS NULL", (member_no,)
    ).fetchone()[0]
    quota = MAX_OPEN_LOANS[member["tier"]]
    if open_loans >= quota:
        return (
            f"Error: quota exceeded: member {member_no} has {open_loans} open loans (limit {quota})"
        )
    problem = _lendable(conn, lot_code, packets, member)
    if problem:
        return problem
    code = next_code(conn, "loans", "loan_code", "LN-", 4)
    due = add_days(date, LOAN_DAYS)
    conn.execute(
        "INSERT INTO loans (loan_code, member_no, lot_code, packets, checkout_date, due_date) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (code, member_no, lot_code, packets, date, due),
    )
    conn.execute(
        "UPDATE lots SET packets_available = packets_available - ? WHERE lot_code = ?",
        (packets, lot_code),
    )
    return {"loan_code": code, "member_no": member_no, "lot_code": lot_code, "due_date": due}


def record_return(
    conn,
    loan_code: str,
    date: str,
    outcome: Literal["grew-and-saved", "grew-no-seed", "failed"],
    packets_back: int = 0,
) -> dict:
    """Close a loan; saved seed brought back becomes a new untested grow-out lot.

    Args:
        loan_code: the loan, e.g. LN-0042.
        date: the return day.
        outcome: how the grow-out went.
        packets_back: packets of saved seed returned (only with grew-and-saved).
    """
    loan = conn.execute(
        "SELECT l.member_no, l.returned_date, lo.sku FROM loans l "
        "JOIN lots lo ON lo.lot_code = l.lot_code WHERE l.loan_code = ?",
        (loan_code,),
    ).fetchone()
    if loan is None:
        return f"Error: no loan {loan_code}"
    if loan[1] is not None:
        return f"Error: loan {loan_code} was already returned on {loan[1]}"
    if packets_back and outcome != "grew-and-saved":
        return "Error: saved seed can only come back with outcome grew-and-saved"
    conn.execute(
        "UPDATE loans SET returned_date = ?, outcome = ? WHERE loan_code = ?",
        (date, outcome, loan_code),
    )
    new_lot = None
    if packets_back > 0:
        new_lot = next_code(conn, "lots", "lot_code", f"LOT-{date[:4]}-", 3)
        conn.execute(
            "INSERT INTO lots VALUES (?, ?, ?, 'grow-out', ?, ?, 'untested', NULL)",
            (new_lot, loan[2], int(date[:4]), loan[0], packets_back),
        )
    return {"loan_code": loan_code, "returned_date": date, "outcome": outcome, "new_lot": new_lot}


def extend_loan(conn, loan_code: str, date: str) -> dict:
    """Extend an open loan once by 60 days, if it is not overdue on that day.

    Args:
        loan_code: the loan.
        date: the day the extension is asked for.
    """
    cur = conn.cursor()
    cur.execute(
        "SELECT due_date, extended, returned_date FROM loans WHERE loan_code = ?", (loan_code,)
    )
    row = cur.fetchone()
    if row is None:
        return f"Error: no loan {loan_code}"
    due, extended, returned = row
    if returned is not None:
        return f"Error: loan {loan_code} is already returned"
    if extended:
        return f"Error: loan {loan_code} was already extended once"
    if due < date:
        return f"Error: loan {loan_code} is overdue (due {due}); return it instead"
    new_due = add_days(due, EXTENSION_DAYS)
    cur.execute(
        "UPDATE loans SET due_date = ?, extended = 1 WHERE loan_code = ?", (new_due, loan_code)
    )
    return {"loan_code": loan_code, "due_date": new_due}


def list_loans(conn, member_no: str, open_only: bool = True) -> list:
    """A member's loans with the variety lent, oldest first.

    Args:
        member_no: the member.
        open_only: only loans not yet returned.
    """
    conn.row_factory = sqlite3.Row
    if member_row(conn, member_no) is None:
        return f"Error: no member {member_no}"
    rows = conn.execute(
        "SELECT l.loan_code, l.lot_code, v.common_name, l.packets, l.checkout_date, l.due_date, "
        "l.returned_date FROM loans l JOIN lots lo ON lo.lot_code = l.lot_code "
        "JOIN varieties v ON v.sku = lo.sku WHERE l.member_no = ? "
        + ("AND l.returned_date IS NULL " if open_only else "")
        + "ORDER BY l.checkout_date, l.loan_code",
        (member_no,),
    ).fetchall()
    return [dict(r) for r in rows]
