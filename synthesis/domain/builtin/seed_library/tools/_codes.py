"""Code numbering and dates shared by the library's tools (deterministic: no clock)."""

from datetime import date, timedelta

LOAN_DAYS = 120
EXTENSION_DAYS = 60
MIN_GERMINATION_PCT = 70.0
MAX_OPEN_LOANS = {"standard": 3, "family": 5, "grower": 8}


def next_code(conn, table, column, prefix, width):
    """prefix + the highest number used in table.column with that prefix, + 1."""
    row = conn.execute(
        f"SELECT MAX(CAST(SUBSTR({column}, ?) AS INTEGER)) FROM {table} WHERE {column} LIKE ?",
        (len(prefix) + 1, prefix + "%"),
    ).fetchone()
    return f"{prefix}{(row[0] or 0) + 1:0{width}d}"


def add_days(day, days):
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()


def member_row(conn, member_no):
    return conn.execute("SELECT * FROM members WHERE member_no = ?", (member_no,)).fetchone()
