"""tau-bench's retail and airline domains (tests/fixtures/domains/tau_*, MIT, rebuilt by
benchmarks/tau_domains.py): third-party executable domains no clawloop code was written against,
read and grounded as published."""

from __future__ import annotations

from pathlib import Path

from clawloop.synthesis.domain.load import load_domain

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "domains"
RETAIL, AIRLINE = FIXTURES / "tau_retail", FIXTURES / "tau_airline"


def test_the_tau_fixtures_load_as_published_and_credit_their_source():
    retail, airline = load_domain(RETAIL), load_domain(AIRLINE)
    assert retail.tables == ("orders", "products", "users")
    assert airline.tables == ("flights", "reservations", "users")
    writes = {t.name for t in retail.tools if t.writes}
    assert {"cancel_pending_order", "modify_pending_order_payment", "modify_user_address"} <= writes
    assert {t.name for t in airline.tools if t.writes} >= {"update_reservation_baggages"}
    for d in (RETAIL, AIRLINE):
        notice = (d / "NOTICE").read_text()
        assert "MIT" in notice and "Copyright (c) 2024 Sierra" in notice
        assert "tau_bench" not in "".join(p.read_text() for p in (d / "tools").glob("*.py"))
