"""Member tools: find and look up members, holds, reinstatement, training, contact details."""

import sqlite3

from _codes import member_row


def find_member(conn, query: str) -> list:
    """Members whose name or email contains the query.

    Args:
        query: part of a name or an email.
    """
    if not query.strip():
        return "Error: query is empty"
    conn.row_factory = sqlite3.Row
    rows = conn.execute(
        "SELECT member_no, name, email, tier, status FROM members "
        "WHERE name LIKE ? OR email LIKE ? ORDER BY member_no",
        (f"%{query}%", f"%{query}%"),
    ).fetchall()
    return [dict(r) for r in rows]


def get_member(conn, member_no: str) -> dict:
    """A member's record with the number of open loans and how many are overdue on a day.

    Args:
        member_no: the member number, e.g. M-0042.
    """
    conn.row_factory = sqlite3.Row
    row = member_row(conn, member_no)
    if row is None:
        return f"Error: no member {member_no}"
    open_loans = conn.execute(
        "SELECT COUNT(*) FROM loans WHERE member_no = ? AND returned_date IS NULL", (member_no,)
    ).fetchone()[0]
    return {**dict(row), "open_loans": open_loans}


def place_holds(conn, date: str) -> dict:
    """Put every active member with an overdue open loan on hold.

    Args:
        date: the day overdue is judged on.
    """
    rows = conn.execute(
        "SELECT DISTINCT m.member_no FROM members m JOIN loans l ON l.member_no = m.member_no "
        "WHERE m.status = 'active' AND l.returned_date IS NULL AND l.due_date < ?",
        (date,),
    ).fetchall()
    held = [r[0] for r in rows]
    conn.executemany(
        "UPDATE members SET status = 'hold', hold_reason = 'loan overdue' WHERE member_no = ?",
        [(m,) for m in held],
    )
    return {"date": date, "placed_on_hold": held, "count": len(held)}


def reinstate_member(conn, member_no: str, date: str) -> dict:
    """Lift a member's hold, if none of the member's open loans is overdue on that day.

    Args:
        member_no: the member.
        date: the day of the reinstatement.
    """
    member = member_row(conn, member_no)
    if member is None:
        return f"Error: no member {member_no}"
    if member[4] != "hold":
        return f"Error: member {member_no} is not on hold"
    overdue = conn.execute(
        "SELECT loan_code FROM loans WHERE member_no = ? AND returned_date IS NULL "
        "AND due_date < ? ORDER BY loan_code",
        (member_no, date),
    ).fetchall()
    if overdue:
        codes = ", ".join(r[0] for r in overdue)
        return f"Error: member {member_no} has overdue loans ({codes}); record their return first"
    conn.execute(
        "UPDATE members SET status = 'active', hold_reason = NULL WHERE member_no = ?",
        (member_no,),
    )
    return {"member_no": member_no, "status": "active"}


def record_training(conn, member_no: str, date: str) -> dict:
    """Record that a member completed the seed-saving course (needed for rare varieties).

    Args:
        member_no: the member.
        date: the day the course was completed.
    """
    cur = conn.execute(
        "UPDATE members SET trained = 1, trained_on = ? WHERE member_no = ? AND trained = 0",
        (date, member_no),
    )
    if cur.rowcount == 0:
        if member_row(conn, member_no) is None:
            return f"Error: no member {member_no}"
        return f"Error: member {member_no} has already completed the course"
    return {"member_no": member_no, "trained": True, "trained_on": date}


def update_member_contact(conn, member_no: str, email: str = "", name: str = "") -> dict:
    """Change a member's email and/or name; a member held for contact details comes off hold.

    Args:
        member_no: the member.
        email: the new email (unchanged when empty).
        name: the new name (unchanged when empty).
    """
    if member_row(conn, member_no) is None:
        return f"Error: no member {member_no}"
    sets, values = [], []
    if email:
        taken = conn.execute(
            "SELECT member_no FROM members WHERE email = ? AND member_no <> ?", (email, member_no)
        ).fetchone()
        if taken:
            return f"Error: email {email} belongs to member {taken[0]}"
        sets.append("email = ?")
        values.append(email)
    if name:
        sets.append("name = ?")
        values.append(name)
    if not sets:
        return "Error: nothing to change: give an email or a name"
    conn.execute(f"UPDATE members SET {', '.join(sets)} WHERE member_no = ?", (*values, member_no))
    conn.execute(
        "UPDATE members SET status = 'active', hold_reason = NULL "
        "WHERE member_no = ? AND status = 'hold' AND hold_reason LIKE 'returned email%'",
        (member_no,),
    )
    return {"member_no": member_no, "email": email or None, "name": name or None}
