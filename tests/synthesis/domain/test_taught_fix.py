"""Error recovery whose fix is not given away (issue 24, item 4): where the refusal teaches the
fix (a credit hold names the balance to pay; the fix is dated the day of the refused order), the
instruction states the goal and leaves out what the fix alone changes, and derivability accepts
the fix's values from the refusal's text, which the stored plan keeps. On the built-in apiary
domain, its end state written as data (no domain code runs)."""

from __future__ import annotations

from _sabotage import make, row

from clawloop.generators.verify.derivable import embedded_task
from clawloop.synthesis.domain.derivable import underivable
from clawloop.synthesis.domain.ground import Index, Step, learnable, learned_params
from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.state import load_tables

MARKET = "orders.saturday-market@market.example"  # on credit hold: balance 337.50, limit 300.00
REFUSAL = (
    f"Error: buyer {MARKET} is on credit hold (balance 337.50, limit 300.00); a payment must be "
    "recorded first"
)
ORDER = {"buyer_email": MARKET, "batch_code": "HB-2025-014", "kg": 2.0, "date": "2025-07-03"}
PAY = {"buyer_email": MARKET, "amount": 337.5, "date": "2025-07-03"}
STEPS = [
    Step("place_order", ORDER, "error", refusal=REFUSAL),
    Step("record_payment", PAY),
    Step("place_order", ORDER),
]


def _paid_then_ordered(t):
    t["payments"].append({"code": "PY-0010", "buyer": MARKET, "amount": 337.5,
                          "date": "2025-07-03"})  # fmt: skip
    buyer = row(t, "buyers", email=MARKET)
    buyer.update(balance=32.0, on_hold=False)  # 337.5 - 337.5 + 2 kg x 16.0 (lime)
    row(t, "harvests", batch="HB-2025-014")["kg_available"] = 6.5
    t["orders"].append({"code": "ORD-0022", "buyer": MARKET, "batch": "HB-2025-014", "kg": 2.0,
                        "price_per_kg": 16.0, "total": 32.0, "date": "2025-07-03",
                        "status": "open", "cancel_reason": None})  # fmt: skip


def test_the_refusal_teaches_the_balance_not_a_threshold():
    domain = load_domain(__import__("_sabotage").DOMAINS["apiary_coop"])
    ix = Index.of(load_tables(domain), domain.keys)
    about = [row(ix.tables, "buyers", email=MARKET)]
    tries = learned_params(domain.tool("record_payment"), STEPS[0], REFUSAL, about)
    assert {"buyer_email": MARKET, "date": "2025-07-03", "amount": 337.5} in tries
    assert learnable((STEPS[0], STEPS[1], STEPS[2]), ix)
    told = Step("record_payment", {**PAY, "amount": 120.0})  # a figure the refusal never states
    assert not learnable((STEPS[0], told, STEPS[2]), ix)
    lot = "LOT-2024-024"  # "70%" is a rule's threshold, which no record holds: not a value to write
    untested = Step("checkout_packets", {"lot_code": lot}, "error",
                    refusal=f"Error: lot {lot} is untested; it needs a germination test of 70% or more")  # fmt: skip
    test = Step(
        "record_germination_test", {"lot_code": lot, "seeds_sown": 70, "seeds_sprouted": 70}
    )
    seeds = load_domain(__import__("_sabotage").DOMAINS["seed_library"])
    assert not learnable((untested, test, untested), Index.of(load_tables(seeds), seeds.keys))


def test_a_taught_fix_is_left_out_of_the_instruction_and_still_derivable(tmp_path):
    made = make("apiary_coop", STEPS, _paid_then_ordered, tmp_path)
    text = made.built["instruction"]
    assert "`payments`" not in text and "337.5" not in text, text  # the fix is not listed
    assert "what fixes it is not listed above: the refusal says what is wrong" in text
    assert "on the day of the refused change" in text
    assert "a new `orders` record exists" in text and f"`buyer` = `{MARKET}`" in text
    assert "the fix is left to the refusal" in made.note
    preds = made.built["answer"]["state"]["predicates"]
    stored = embedded_task(made.code)["plan"]
    assert stored[0]["refusal"] == REFUSAL and "refusal" not in stored[1]
    assert underivable(stored, preds, text) == []
    # The same plan without the refusal's text: the payment's amount is then nowhere to learn.
    bare = [{k: v for k, v in s.items() if k != "refusal"} for s in stored]
    lost = underivable(bare, preds, text)
    assert any(x.startswith("payments.amount = 337.5") for x in lost), lost
    # The predicates still demand the fix's end state (any correct path passes).
    (paid,) = [p for p in preds if p["kind"] == "count" and p["table"] == "payments"]
    assert paid["match"]["amount"] == 337.5 and paid["count"] == 1
