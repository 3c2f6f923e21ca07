"""Skills: deterministic Louvain clustering that groups tools working on the same tables, names
from the dominant table, SKILL.md's capability spec from the code, and the tripartite graph."""

from __future__ import annotations

from pathlib import Path

import yaml

from clawloop.synthesis.domain.load import builtin_domains, load_domain
from clawloop.synthesis.domain.model import Domain, Param, Tool
from clawloop.synthesis.domain.skills import (
    W_SHARED_PARAM,
    W_SHARED_READ,
    W_SHARED_WRITE,
    W_WRITE_READ,
    affinity,
    cluster_skills,
    domain_graph,
    graph_json,
    skill_doc,
)


def _builtin(name: str) -> Domain:
    return load_domain(next(p for p in builtin_domains() if p.name == name))


def _tool(name, reads=(), writes=(), params=(), returns=()) -> Tool:
    return Tool(
        name=name,
        file="tools/x.py",
        shape="function",
        symbol=name,
        description="",
        params=tuple(Param(p, "string") for p in params),
        returns=tuple(returns),
        reads=tuple(reads),
        writes=tuple(writes),
    )


def test_affinity_weights():
    a = _tool("a", reads=("t", "u"), writes=("t",), params=("date",), returns=("code",))
    b = _tool("b", reads=("u",), writes=("t",), params=("date", "code"))
    # shared write t; a writes t which b... does not read; b writes t which a reads; both read u;
    # a returns `code`, a parameter of b; both take `date`
    expected = W_SHARED_WRITE + W_WRITE_READ + W_SHARED_READ + 1.5 + W_SHARED_PARAM
    assert affinity(a, b) == affinity(b, a) == expected
    assert affinity(_tool("x", reads=("p",)), _tool("y", reads=("q",))) == 0


def test_clustering_is_deterministic_and_groups_by_tables():
    d = _builtin("apiary_coop")
    first = cluster_skills(d)
    assert first == cluster_skills(d) == cluster_skills(load_domain(d.root))
    skill_of = {t: s.name for s in first for t in s.tools}
    assert sorted(skill_of) == sorted(t.name for t in d.tools)  # each tool in exactly one skill
    # the order and payment tools share buyers/orders writes; the hive tools share hives writes
    assert skill_of["place_order"] == skill_of["cancel_order"] == skill_of["record_payment"]
    assert skill_of["move_hive"] == skill_of["retire_hive"] == skill_of["quarantine_hive"]
    assert skill_of["place_order"] != skill_of["move_hive"]
    assert skill_of["record_harvest"] == skill_of["record_lab_result"]
    for s in first:
        assert s.name.replace("-", "").isalnum() and s.name == s.name.lower()
        assert len(s.tools) >= 2
    assert [s.name for s in first] == sorted(s.name for s in first)


def test_skills_are_named_after_their_dominant_table():
    s = {sk.name: set(sk.tools) for sk in cluster_skills(_builtin("seed_library"))}
    assert {"checkout_packets", "record_return", "extend_loan"} <= s["loans"]
    assert {"record_germination_test", "donate_seeds"} <= s["lots"]
    assert {"reinstate_member", "record_training"} <= s["members"]


def test_disconnected_tools_stay_apart():
    d = Domain(
        root=Path("."),
        name="two",
        description="",
        state_format="json",
        state_path="state",
        keys={},
        policy="",
        tables=("p", "q"),
        tools=(
            _tool("p1", reads=("p",), writes=("p",)),
            _tool("p2", reads=("p",)),
            _tool("q1", reads=("q",), writes=("q",)),
            _tool("q2", reads=("q",)),
        ),
    )
    skills = cluster_skills(d)
    assert [(s.name, s.tools, s.tables) for s in skills] == [
        ("p", ("p1", "p2"), ("p",)),
        ("q", ("q1", "q2"), ("q",)),
    ]


def test_skill_doc_is_a_capability_spec_from_the_code():
    d = _builtin("seed_library")
    loans = next(s for s in cluster_skills(d) if s.name == "loans")
    doc = skill_doc(d, loans)
    front = yaml.safe_load(doc.split("---")[1])
    assert front["name"] == "loans" and "seed_library" in front["description"]
    assert (
        "skills/loans/record_return --loan_code STRING --date STRING "
        "--outcome grew-and-saved|grew-no-seed|failed [--packets_back INTEGER]"
    ) in doc
    assert "- writes: loans, lots" in doc
    assert "quota exceeded: member {member_no} has {open_loans} open loans" in doc
    assert "## extend_loan" in doc and "## place_holds" not in doc


def test_domain_graph_is_tripartite():
    d = _builtin("apiary_coop")
    g = domain_graph(d)
    kinds = {n: a["kind"] for n, a in g.nodes(data=True)}
    assert set(kinds.values()) == {"tool", "param", "field", "table"}
    assert g.has_edge("tool:place_order", "table:orders", key="writes")
    assert g.has_edge("table:harvests", "tool:place_order", key="reads")
    assert g.has_edge("param:batch_code", "tool:place_order", key="consume")
    assert g.has_edge("tool:get_order", "field:total", key="produce")
    assert not g.has_edge("tool:get_order", "table:orders")  # read-only
    for u, v, k in g.edges(keys=True):
        assert (kinds[u], kinds[v], k) in {
            ("param", "tool", "consume"),
            ("tool", "field", "produce"),
            ("table", "tool", "reads"),
            ("tool", "table", "writes"),
        }
    writes = sum(len(t.writes) for t in d.tools)
    assert sum(1 for *_, k in g.edges(keys=True) if k == "writes") == writes


def test_graph_json_shape():
    d = _builtin("apiary_coop")
    out = graph_json(d, cluster_skills(d))
    assert list(out) == ["domain", "tables", "tools", "skills"]
    assert out["domain"] == "apiary_coop" and out["tables"] == list(d.tables)
    for tool in out["tools"]:
        assert list(tool) == ["name", "params", "returns", "reads", "writes"]
        assert all(isinstance(x, str) for key in list(tool)[1:] for x in tool[key])
    for skill in out["skills"]:
        assert list(skill) == ["name", "tools"]
