"""Skills: tools clustered by weighted affinity, their SKILL.md, and the domain's tripartite graph.

Two tools belong together when they work on the same data. The affinity of a pair is a sum over
what they share, weighted by how strongly it ties them (module constants below):

- a table both write (3.0): they change the same records, a task that uses one needs the other;
- a table one writes and the other reads (2.0): a write's effect is observed through the read;
- a table both read (1.0): the same data, but neither changes it;
- a return field of one that is a parameter of the other (1.5): one feeds the other's input;
- a parameter name both take (0.5): a weak hint (`date` is taken by many).

Communities come from networkx's Louvain method (`seed=0`, so the same domain always clusters the
same way); a lone tool joins the community it has the most affinity with (a one-tool skill is a
poor unit to practise), unless it shares nothing with any other tool. Tools whose code never uses
the state argument (pure helpers: think, calculate, transfer) are in no skill. A skill is named after its dominant table (3 per tool writing it, 1 per tool reading
it), then the next table, then its most common verb, until the name is unique.

The capability spec in SKILL.md is extracted from the code: the CLI usage from the schema's
parameters (types, required, enum), the tables the analysis found, the errors the code returns.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any

import networkx as nx
import yaml

from clawloop.synthesis.domain.model import Domain, Skill, Tool

W_SHARED_WRITE = 3.0
W_WRITE_READ = 2.0
W_SHARED_READ = 1.0
W_FIELD_PARAM = 1.5
W_SHARED_PARAM = 0.5
RESOLUTION = 1.5  # Louvain's resolution: above 1 favours smaller skills (3-7 tools here)


def affinity(a: Tool, b: Tool) -> float:
    """The weight of the edge between two tools (0 when they share nothing)."""
    pa, pb = {p.name for p in a.params}, {p.name for p in b.params}
    wa, wb, ra, rb = set(a.writes), set(b.writes), set(a.reads), set(b.reads)
    return (
        W_SHARED_WRITE * len(wa & wb)
        + W_WRITE_READ * (len(wa & rb) + len(ra & wb))
        + W_SHARED_READ * len(ra & rb)
        + W_FIELD_PARAM * (len(set(a.returns) & pb) + len(set(b.returns) & pa))
        + W_SHARED_PARAM * len(pa & pb)
    )


def skill_tools(domain: Domain) -> list[Tool]:
    """The tools skills are made of: every tool whose code uses the state. A pure helper (`think`,
    `calculate`, `transfer_to_human_agents`: the state argument never named) is not a skill."""
    return [t for t in domain.tools if t.state_access]


def affinity_graph(domain: Domain) -> nx.Graph:
    g = nx.Graph()
    tools = sorted(skill_tools(domain), key=lambda t: t.name)
    g.add_nodes_from(t.name for t in tools)
    for a, b in combinations(tools, 2):
        w = affinity(a, b)
        if w > 0:
            g.add_edge(a.name, b.name, weight=w)
    return g


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower())
    return "-".join(p for p in out.split("-") if p) or "skill"


def _candidates(domain: Domain, names: list[str]) -> list[str]:
    """Name parts in order of preference: tables by weight, then verbs by frequency."""
    score: Counter[str] = Counter()
    for n in names:
        t = domain.tool(n)
        score.update(dict.fromkeys(t.writes, 3))
        score.update(dict.fromkeys(t.reads, 1))
    tables = sorted(score, key=lambda t: (-score[t], t))
    verbs = Counter(n.split("_")[0] for n in names)
    return tables + sorted(verbs, key=lambda v: (-verbs[v], v))


def _absorb_singletons(g: nx.Graph, groups: list[list[str]]) -> list[list[str]]:
    """Move each one-tool community into its most affine community (ties: first by name)."""
    groups = sorted(groups, key=lambda c: (-len(c), c))
    for lone in [c for c in groups if len(c) == 1]:
        if len(lone) != 1:  # it took in another lone tool already: a community now, kept whole
            continue
        others = [c for c in groups if c is not lone and c]
        tool = lone[0]
        scored = [(sum(g[tool][n]["weight"] for n in c if g.has_edge(tool, n)), c) for c in others]
        scored = [(w, c) for w, c in scored if w > 0]
        if scored:
            best = min(scored, key=lambda wc: (-wc[0], wc[1]))[1]
            best.append(tool)
            best.sort()
            lone.clear()
    return sorted((c for c in groups if c), key=lambda c: (-len(c), c))


def cluster_skills(domain: Domain, resolution: float = RESOLUTION) -> list[Skill]:
    """Tools grouped into skills by weighted affinity (deterministic), sorted by name."""
    g = affinity_graph(domain)
    communities = nx.community.louvain_communities(
        g, weight="weight", resolution=resolution, seed=0
    )
    groups = _absorb_singletons(g, [sorted(c) for c in communities])
    taken: set[str] = set()
    out = []
    for names in groups:
        parts = _candidates(domain, names) or [names[0]]
        name = _slug(parts[0])
        for extra in parts[1:]:
            if name not in taken:
                break
            name = f"{name}-{_slug(extra)}"
        base, i = name, 2
        while name in taken:
            name, i = f"{base}-{i}", i + 1
        taken.add(name)
        tables = sorted({t for n in names for t in (*domain.tool(n).reads, *domain.tool(n).writes)})
        out.append(Skill(name=name, tools=tuple(names), tables=tuple(tables)))
    return sorted(out, key=lambda s: s.name)


def usage(skill: Skill, tool: Tool) -> str:
    """`skills/<skill>/<tool> --param TYPE [--optional TYPE]` (enums as a|b|c)."""
    flags = []
    for p in tool.params:
        value = "|".join(str(v) for v in p.enum) if p.enum else p.type.upper()
        flag = f"--{p.name} {value}"
        flags.append(flag if p.required else f"[{flag}]")
    return " ".join([f"skills/{skill.name}/{tool.name}", *flags])


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "(no description)"


def skill_doc(domain: Domain, skill: Skill) -> str:
    """SKILL.md: YAML front matter, then per tool its usage, tables and errors (from the code)."""
    tools = [domain.tool(n) for n in skill.tools]
    writes = sorted({t for tool in tools for t in tool.writes})
    verbs = "changes " + ", ".join(writes) if writes else "reads only"
    description = (
        f"{domain.name}: {len(tools)} tools over {', '.join(skill.tables) or 'no tables'} ({verbs})"
    )
    front = yaml.safe_dump({"name": skill.name, "description": description}, sort_keys=False)
    lines = [
        "---",
        front.rstrip("\n"),
        "---",
        f"# {skill.name}",
        "",
        _one_line(domain.description),
        "",
        "Run a tool as `skills/<skill>/<tool> --param VALUE ...` from the workspace root. It acts "
        "on the state snapshot in the workspace and prints its result as JSON; an error prints "
        '`{"error": ...}`, exits 1 and leaves the state unchanged.',
    ]
    if domain.policy:
        lines += ["", "The domain's rules are in `policy.md`; the tools enforce them."]
    for tool in tools:
        lines += ["", f"## {tool.name}", "", _one_line(tool.description), "", "```"]
        lines += [usage(skill, tool), "```", ""]
        for p in tool.params:
            extra = f" one of {', '.join(map(str, p.enum))}" if p.enum else ""
            need = "required" if p.required else "optional"
            desc = f": {_one_line(p.description)}" if p.description else ""
            lines.append(f"- `--{p.name}` {p.type}, {need}{extra}{desc}")
        lines.append(f"- reads: {', '.join(tool.reads) or 'nothing'}")
        lines.append(f"- writes: {', '.join(tool.writes) or 'nothing (read-only)'}")
        if tool.returns:
            lines.append(f"- returns fields: {', '.join(tool.returns)}")
        if tool.errors:
            lines.append("- errors it can return:")
            lines += [f"  - `{e}`" for e in tool.errors]
    return "\n".join(lines) + "\n"


def domain_graph(domain: Domain) -> nx.MultiDiGraph:
    """The tripartite graph: tool, parameter, return-field and table nodes.

    Node ids are `tool:<name>`, `param:<name>`, `field:<name>`, `table:<name>` (a parameter or a
    field shared by tools is one node). Edges: param -> tool `consume`, tool -> field `produce`,
    table -> tool `reads`, tool -> table `writes`.
    """
    g = nx.MultiDiGraph(domain=domain.name)
    for t in domain.tables:
        g.add_node(f"table:{t}", kind="table", name=t)
    for tool in domain.tools:
        node = f"tool:{tool.name}"
        g.add_node(node, kind="tool", name=tool.name, read_only=tool.read_only)
        for p in tool.params:
            g.add_node(f"param:{p.name}", kind="param", name=p.name)
            g.add_edge(f"param:{p.name}", node, key="consume", kind="consume", type=p.type)
        for f in tool.returns:
            g.add_node(f"field:{f}", kind="field", name=f)
            g.add_edge(node, f"field:{f}", key="produce", kind="produce")
        for t in tool.reads:
            g.add_edge(f"table:{t}", node, key="reads", kind="reads")
        for t in tool.writes:
            g.add_edge(node, f"table:{t}", key="writes", kind="writes")
    return g


def graph_json(domain: Domain, skills: list[Skill]) -> dict[str, Any]:
    """The `clawloop domain graph --json` shape (fixed by the issue)."""
    return {
        "domain": domain.name,
        "tables": list(domain.tables),
        "tools": [
            {
                "name": t.name,
                "params": [p.name for p in t.params],
                "returns": list(t.returns),
                "reads": list(t.reads),
                "writes": list(t.writes),
            }
            for t in domain.tools
        ],
        "skills": [{"name": s.name, "tools": list(s.tools)} for s in skills],
    }
