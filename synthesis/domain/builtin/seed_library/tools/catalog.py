"""Catalogue tools: varieties and lots (search in the tau-bench class shape)."""

import json
import sqlite3


class SearchVarieties:
    @staticmethod
    def invoke(data, query, category=None, rare_only=False):
        data.row_factory = sqlite3.Row
        where, args = (
            ["(common_name LIKE ? OR latin_name LIKE ? OR sku LIKE ?)"],
            [f"%{query}%"] * 3,
        )
        if category:
            where.append("category = ?")
            args.append(category)
        if rare_only:
            where.append("rare = 1")
        sql = (
            "SELECT v.sku, v.common_name, v.category, v.rare, "
            "(SELECT COALESCE(SUM(packets_available), 0) FROM lots "
            " WHERE lots.sku = v.sku AND lots.status = 'available') AS packets_available "
            f"FROM varieties v WHERE {' AND '.join(where)} ORDER BY v.sku"
        )
        return json.dumps([dict(r) for r in data.execute(sql, args).fetchall()])

    @staticmethod
    def get_info():
        return {
            "type": "function",
            "function": {
                "name": "search_varieties",
                "description": "Search the catalogue; shows packets available to borrow now.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "part of a name or SKU"},
                        "category": {
                            "type": "string",
                            "enum": [
                                "tomato",
                                "bean",
                                "pea",
                                "squash",
                                "lettuce",
                                "kale",
                                "corn",
                                "pepper",
                                "herb",
                                "flower",
                                "root",
                                "cucumber",
                                "allium",
                            ],
                        },
                        "rare_only": {"type": "boolean", "description": "only rare varieties"},
                    },
                    "required": ["query"],
                },
            },
        }


def get_lot(conn, lot_code: str) -> dict:
    """One seed lot with its variety and latest germination test.

    Args:
        lot_code: the lot, e.g. LOT-2024-031.
    """
    conn.row_factory = sqlite3.Row
    row = conn.execute(
        "SELECT l.*, v.common_name, v.rare FROM lots l JOIN varieties v ON v.sku = l.sku "
        "WHERE l.lot_code = ?",
        (lot_code,),
    ).fetchone()
    if row is None:
        return f"Error: no lot {lot_code}"
    test = conn.execute(
        "SELECT test_code, test_date, pct FROM germination_tests WHERE lot_code = ? "
        "ORDER BY test_date DESC, test_code DESC LIMIT 1",
        (lot_code,),
    ).fetchone()
    return {**dict(row), "latest_test": dict(test) if test else None}


def list_lots(conn, sku: str, status: str | None = None) -> list:
    """The lots of one variety, newest harvest first.

    Args:
        sku: the variety's SKU, e.g. TOM-BRANDYWINE.
        status: available, untested or quarantined; all when omitted.
    """
    conn.row_factory = sqlite3.Row
    sql = "SELECT lot_code, harvest_year, source, packets_available, status FROM lots WHERE sku = ?"
    args = [sku]
    if status is not None:
        sql += " AND status = ?"
        args.append(status)
    rows = conn.execute(sql + " ORDER BY harvest_year DESC, lot_code", args).fetchall()
    if (
        not rows
        and conn.execute("SELECT 1 FROM varieties WHERE sku = ?", (sku,)).fetchone() is None
    ):
        return f"Error: no variety {sku}"
    return [dict(r) for r in rows]
