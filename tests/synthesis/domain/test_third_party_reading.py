"""Graph reading on third-party (tau-bench style) tools: a write is a write to the state or an
alias of it, never to a copy; a return's fields come from the returned expression (an id string
has none); pure helpers that never touch the state are in no skill; the abstract `Tool` base
class the tool classes inherit from is not a tool. The airline domain is the one
benchmarks/airline_domain.py writes, at a small size."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import networkx as nx
import pytest

from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.skills import _absorb_singletons, cluster_skills

BUILDER = Path(__file__).parents[3] / "benchmarks" / "airline_domain.py"


def _builder():
    spec = importlib.util.spec_from_file_location("airline_domain", BUILDER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def airline(tmp_path_factory):
    root = _builder().build(tmp_path_factory.mktemp("air") / "airline", 12, 10, 30)
    return load_domain(root)


def test_the_abstract_tool_base_class_is_not_a_tool(airline):
    # tools/tool.py: class Tool(abc.ABC) with get_info raising NotImplementedError (it failed
    # the whole load before: "Tool.get_info() returns no dict literal")
    assert len(airline.tools) == 14
    assert "Tool" not in {t.symbol for t in airline.tools}


def test_update_on_a_copy_of_a_flight_is_not_a_write(airline):
    # flight_info = {k: v for k, v in flight.items() if k != "dates"}; flight_info.update(...)
    for name in ("search_direct_flight", "search_onestop_flight"):
        tool = airline.tool(name)
        assert tool.reads == ("flights",) and tool.writes == (), name


def test_the_real_writes_are_kept(airline):
    w = {t.name: set(t.writes) for t in airline.tools}
    assert w["cancel_reservation"] == {"reservations"}
    assert w["send_certificate"] == {"users"}
    assert w["update_reservation_baggages"] == {"reservations", "users"}  # gift card balance
    assert w["book_reservation"] == {"reservations", "users", "flights"}  # seats, through a local


def test_find_user_id_returns_an_id_not_the_record(airline):
    # `for user_id, profile in users.items(): ... return user_id`
    assert airline.tool("find_user_id_by_email").returns == ()
    assert airline.tool("find_user_id_by_email").reads == ("users",)
    assert {"email", "payment_methods"} <= set(airline.tool("get_user_details").returns)


def test_pure_helpers_are_in_no_skill_and_every_other_tool_in_one(airline):
    skills = cluster_skills(airline)
    placed = [t for s in skills for t in s.tools]
    pure = {"think", "calculate", "transfer_to_human_agents"}
    assert not pure & set(placed)
    assert sorted(placed) == sorted(t.name for t in airline.tools if t.name not in pure)
    assert {t.name for t in airline.tools if not t.state_access} == pure


def test_lone_tools_merged_into_each_other_are_not_lost():
    # Louvain left all three alone (the airline domain's reservation tools were): a joins b,
    # then b, two tools now, must not be moved as its first tool a alone (to c), losing b
    g = nx.Graph()
    g.add_weighted_edges_from([("a", "b", 2.0), ("a", "c", 1.0)])
    groups = _absorb_singletons(g, [["a"], ["b"], ["c"]])
    assert sorted(t for c in groups for t in c) == ["a", "b", "c"]


TOOLS = '''
import copy


def rename_first(state, name: str) -> dict:
    """A list of records is a new list, but its records are the state's."""
    found = [r for r in state["people"].values()]
    found[0]["name"] = name
    return {"ok": True}


def collect(state) -> list:
    """Appending to a copied list writes nothing."""
    out = list(state["people"].values())
    out.append({"id": "x"})
    snapshot = dict(state["people"])
    snapshot["y"] = {}
    deep = copy.deepcopy(state["people"]["p1"])
    deep["tags"].append("z")
    return out


def tag_all(state, tag: str) -> str:
    """Values of .items() are records: updating them writes."""
    for key, person in state["people"].items():
        person.update({"tag": tag})
    return "done"


def first_key(state) -> str:
    """A key of .keys() is a string."""
    for key in state["people"].keys():
        return key
    return "Error: empty"


def copied_tags(state, pid: str) -> list:
    """A shallow copy of a record still shares its lists: appending to one writes."""
    rec = state["people"][pid].copy()
    rec["tags"].append("seen")
    rec["seen"] = True
    return rec
'''


@pytest.fixture
def people(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "domain.toml").write_text(
        '[domain]\nname = "people"\n\n[state]\nformat = "json"\npath = "state"\n'
    )
    people = {"p1": {"id": "p1", "name": "Ada", "tags": []}, "p2": {"id": "p2", "name": "Bo"}}
    (tmp_path / "state" / "people.json").write_text(json.dumps(people))
    (tmp_path / "tools" / "people.py").write_text(TOOLS)
    return load_domain(tmp_path)


def test_copies_and_aliases_of_records(people):
    w = {t.name: t.writes for t in people.tools}
    assert w == {
        "rename_first": ("people",),
        "collect": (),
        "tag_all": ("people",),
        "first_key": (),
        "copied_tags": ("people",),
    }
    assert people.tool("first_key").returns == ()
    assert set(people.tool("copied_tags").returns) == {"id", "name", "tags"}
