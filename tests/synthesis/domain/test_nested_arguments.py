"""An argument a tool nests inside a field is still the plan's choice (issue 24, item 3): the
airline's send_certificate puts its `amount` inside `users.<id>.payment_methods`, which the
tests see as one changed field the tools derive. The instruction must state the amount (else the
task cannot be solved as written), and an instruction that loses it is dropped with the value
named; a value the tool generates (the certificate's new id) stays unsaid.

On a small third-party-style domain in a tmp folder: the retail fixture plus a tool that appends
a credit, with the amount passed, to a user's nested `credits` list. No domain code runs: the
reference end state is written as data (_sabotage.make)."""

from __future__ import annotations

import json
import shutil

import pytest
from _sabotage import FIXTURES, make, row

from clawloop.synthesis.domain import synth
from clawloop.synthesis.domain.derivable import Underivable, mentions, underivable
from clawloop.synthesis.domain.ground import Step

TOOL = """

class GrantCredit:
    @staticmethod
    def invoke(data, user_id, amount):
        users = data["users"]
        if user_id not in users:
            return "Error: user not found"
        credits = users[user_id]["credits"]
        credit = {"id": "credit_" + str(len(credits) + 1), "amount": amount}
        credits.append(credit)
        return json.dumps(credit)

    @staticmethod
    def get_info():
        return {"type": "function", "function": {"name": "grant_credit",
                "description": "Grant a user a store credit.",
                "parameters": {"type": "object", "properties": {
                    "user_id": {"type": "string"}, "amount": {"type": "number"}},
                    "required": ["user_id", "amount"]}}}


class GetUserDetails:
    @staticmethod
    def invoke(data, user_id):
        return json.dumps(data["users"][user_id]) if user_id in data["users"] else "Error"

    @staticmethod
    def get_info():
        return {"type": "function", "function": {"name": "get_user_details",
                "description": "A user's record.",
                "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}},
                               "required": ["user_id"]}}}


class MatchCredits:
    @staticmethod
    def invoke(data, user_id, credits):
        users = data["users"]
        if user_id not in users:
            return "Error: user not found"
        users[user_id]["credits"] = [
            {"id": "matched_" + str(i + 1), "amount": c["amount"]} for i, c in enumerate(credits)
        ]
        return json.dumps(users[user_id])

    @staticmethod
    def get_info():
        return {"type": "function", "function": {"name": "match_credits",
                "description": "Give a user credits matching the list given.",
                "parameters": {"type": "object", "properties": {
                    "user_id": {"type": "string"}, "credits": {"type": "array"}},
                    "required": ["user_id", "credits"]}}}
"""
USER, AMOUNT = "ava_kim_101", 75
STEPS = [Step("grant_credit", {"user_id": USER, "amount": AMOUNT})]


@pytest.fixture(scope="module")
def domain_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("credits") / "retail_credits"
    shutil.copytree(FIXTURES / "retail_cls", root)
    tools = root / "tools" / "retail.py"
    tools.write_text(tools.read_text() + TOOL)
    users = json.loads((root / "state" / "users.json").read_text())
    for i, u in enumerate(users.values()):
        u["credits"] = [{"id": "credit_1", "amount": 20 + i}]
    (root / "state" / "users.json").write_text(json.dumps(users, indent=1))
    return root


def _granted(t):
    """grant_credit(ava_kim_101, 75) as the tool leaves it: a new id the tool picks."""
    row(t, "users", _key=USER)["credits"].append({"id": "credit_2", "amount": AMOUNT})


@pytest.fixture(scope="module")
def granted(domain_dir, tmp_path_factory):
    return make(domain_dir, STEPS, _granted, tmp_path_factory.mktemp("granted"))


def _plan():
    return [{"tool": "grant_credit", "params": STEPS[0].params, "expect": "ok"}]


def test_the_instruction_states_the_amount_the_tool_nests(granted):
    text = granted.built["instruction"]
    assert "`credits` holds `amount` = `75`" in text, text
    assert not mentions(text, "credit_2"), text  # the tool's own id stays unsaid


def test_an_instruction_without_the_amount_is_named(granted):
    preds = granted.built["answer"]["state"]["predicates"]
    assert underivable(_plan(), preds, granted.built["instruction"]) == []
    text = granted.built["instruction"].replace("; `credits` holds `amount` = `75`", "")
    assert not mentions(text, AMOUNT), text
    lost = underivable(_plan(), preds, text)
    assert len(lost) == 1 and "users.credits holds amount = 75" in lost[0], lost
    assert "grant_credit --amount" in lost[0]
    # the new credit's id is the tool's own: a plan passing no amount has nothing to state
    plan = [{"tool": "grant_credit", "params": {"user_id": USER}, "expect": "ok"}]
    assert underivable(plan, preds, f"Give `users` record `{USER}` a credit.") == []


def test_make_task_drops_a_task_whose_instruction_loses_the_amount(
    domain_dir, tmp_path, monkeypatch
):
    real = synth.write_instruction
    monkeypatch.setattr(
        synth,
        "write_instruction",
        lambda aim: real(aim).replace("; `credits` holds `amount` = `75`", ""),
    )
    with pytest.raises(Underivable, match="credits holds amount = 75"):
        make(domain_dir, STEPS, _granted, tmp_path)


OTHER = "ben_ortiz_202"


def test_a_list_built_from_a_looked_up_record_names_that_record(domain_dir, tmp_path):
    """match_credits(credits=<ben's credits, looked up>) rebuilds the list (new ids): the
    instruction says which record's list it follows, so the agent can find it."""
    steps = [
        Step("get_user_details", {"user_id": OTHER}),
        Step("match_credits", {"user_id": USER, "credits": {"$ref": [0, "credits"]}}),
    ]
    theirs = [{"id": "credit_1", "amount": 21}]
    refs = {0: {"table": "users", "key_field": "_key", "key": OTHER, "field": "credits",
                "value": theirs}}  # fmt: skip

    def matched(t):
        row(t, "users", _key=USER)["credits"] = [{"id": "matched_1", "amount": 21}]

    text = make(domain_dir, steps, matched, tmp_path, references=refs).built["instruction"]
    assert f"`credits` follows the `credits` recorded on `users` `{OTHER}`" in text, text


# A list of objects passed whole as a literal (an airline's `passengers`): match_credits keeps
# each amount and gives new ids. The amounts are the plan's choice, so the instruction states
# the list, and an instruction that loses it is dropped with the list named.
GIVEN = [{"amount": 43}, {"amount": 17}]
LISTED = [Step("match_credits", {"user_id": USER, "credits": GIVEN})]


def _listed(t):
    row(t, "users", _key=USER)["credits"] = [
        {"id": "matched_1", "amount": 43},
        {"id": "matched_2", "amount": 17},
    ]


def test_a_list_passed_whole_is_stated_and_its_loss_named(domain_dir, tmp_path):
    built = make(domain_dir, LISTED, _listed, tmp_path).built
    text, preds = built["instruction"], built["answer"]["state"]["predicates"]
    line = '`credits` follows `[{"amount": 43}, {"amount": 17}]`'
    assert line in text, text
    assert not mentions(text, "matched_1"), text  # the tool's own ids stay unsaid
    plan = [{"tool": "match_credits", "params": LISTED[0].params, "expect": "ok"}]
    assert underivable(plan, preds, text) == []
    lost = underivable(plan, preds, f"Give `users` record `{USER}` matching credits.")
    assert len(lost) == 1 and "users.credits holds credits = " in lost[0], lost
    assert '[{"amount": 43}, {"amount": 17}]' in lost[0] and "match_credits --credits" in lost[0]


def test_a_list_stored_as_passed_is_stated(domain_dir, tmp_path):
    """A tool that stores the list as given: the field's value is the literal, stated as JSON."""
    stored = [{"id": "credit_9", "amount": 43}]
    steps = [Step("match_credits", {"user_id": USER, "credits": stored})]

    def kept(t):
        row(t, "users", _key=USER)["credits"] = stored

    built = make(domain_dir, steps, kept, tmp_path).built
    text, preds = built["instruction"], built["answer"]["state"]["predicates"]
    assert '`credits` = `[{"id": "credit_9", "amount": 43}]`' in text, text
    plan = [{"tool": "match_credits", "params": steps[0].params, "expect": "ok"}]
    assert underivable(plan, preds, text) == []
    lost = underivable(plan, preds, f"Give `users` record `{USER}` its credits.")
    assert len(lost) == 1 and "users.credits = " in lost[0] and "credit_9" in lost[0], lost


def test_a_list_too_long_to_state_drops_the_task_naming_it(domain_dir, tmp_path):
    many = [{"amount": 100 + i} for i in range(60)]  # JSON longer than MAX_GIVEN
    steps = [Step("match_credits", {"user_id": USER, "credits": many})]

    def matched(t):
        row(t, "users", _key=USER)["credits"] = [
            {"id": f"matched_{i + 1}", "amount": c["amount"]} for i, c in enumerate(many)
        ]

    with pytest.raises(Underivable, match="users.credits holds credits = "):
        make(domain_dir, steps, matched, tmp_path)
