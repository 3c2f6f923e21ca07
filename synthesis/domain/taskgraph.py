"""Abstract task graphs: the structure of a task before any tool, entity or value is chosen.

Sampling structure first and content second is what keeps domain-grounded tasks from collapsing
onto the few tool chains a writer would think of. A graph is a list of nodes in execution order:

- `lookup`: a read that produces a value (a field of a record) consumed by a later node;
- `act`: a write that changes the state; it consumes the values of its `inputs` (lookups);
- `branch`: a condition on a record's field; the two acts after it carry `arm` "then"/"else"
  and only the arm the data selects happens;
- `recover`: a write the domain's rules refuse at first (it returns an error), then a fix that
  removes the cause, then the same write again.

The structural features a graph can have (`FEATURES`) are what the sampler aims for and what
`features_of` reads back from a graph, so the synth report can say what was covered.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

FEATURES = ("long_range", "branching", "convergence", "error_recovery", "subgoals")
LONG_RANGE = 3  # positions between a lookup and its consumer that count as long-range


@dataclass(frozen=True)
class Knobs:
    """Difficulty knobs (synthesize.domain_* settings): size, sub-goals, error recovery."""

    max_nodes: int = 6
    subgoals: int = 2
    error_recovery: bool = True
    branching: bool = True
    # features the domain cannot support (synth.py relaxes them and says why): never sampled
    exclude: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Node:
    id: int
    kind: str  # lookup | act | branch | recover
    goal: int  # the sub-goal this node serves
    inputs: tuple[int, ...] = ()  # lookup nodes whose produced value this node consumes
    arm: str = ""  # "then" | "else" for the acts after a branch
    branch: int = -1  # the branch node an arm belongs to


@dataclass(frozen=True)
class TaskGraph:
    nodes: tuple[Node, ...]
    wanted: tuple[str, ...] = field(default_factory=tuple)  # features the sampler aimed for

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [asdict(n) for n in self.nodes], "wanted": list(self.wanted)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> TaskGraph:
        nodes = tuple(
            Node(**{**n, "inputs": tuple(n.get("inputs", ()))}) for n in d.get("nodes", [])
        )
        return TaskGraph(nodes=nodes, wanted=tuple(d.get("wanted", ())))


def features_of(graph: TaskGraph) -> set[str]:
    pos = {n.id: i for i, n in enumerate(graph.nodes)}
    out: set[str] = set()
    for i, n in enumerate(graph.nodes):
        if any(i - pos[j] >= LONG_RANGE for j in n.inputs):
            out.add("long_range")
        if len(n.inputs) >= 2:
            out.add("convergence")
        if n.kind == "branch":
            out.add("branching")
        if n.kind == "recover":
            out.add("error_recovery")
    if len({n.goal for n in graph.nodes}) >= 2:
        out.add("subgoals")
    return out


def _wanted(rng: random.Random, knobs: Knobs) -> list[str]:
    options = ["long_range", "convergence"]
    if knobs.branching:
        options.append("branching")
    if knobs.error_recovery:
        options.append("error_recovery")
    options = [f for f in options if f not in knobs.exclude]
    picked = rng.sample(options, k=rng.randint(1, min(2, len(options)))) if options else []
    if knobs.subgoals >= 2 and "subgoals" not in knobs.exclude:
        picked.append("subgoals")
    return sorted(picked)


def sample_task_graph(rng: random.Random, knobs: Knobs = Knobs()) -> TaskGraph:
    """A graph with a few features drawn at random; lookups come first and are consumed in
    reverse order, so the first value produced is the last one used (long range)."""
    wanted = _wanted(rng, knobs)
    goals = max(1, knobs.subgoals) if "subgoals" in wanted else 1
    nodes: list[Node] = []
    budget = max(2, knobs.max_nodes)
    lookups: list[list[int]] = []
    for g in range(goals):  # every goal's lookups first
        n_in = 2 if "convergence" in wanted and g == 0 else 1 if "long_range" in wanted else 0
        if "error_recovery" in wanted and g == goals - 1 and not ("branching" in wanted and g == 0):
            n_in = 0  # a recover node replays a refusal execution found: it consumes no lookup
        mine = []
        for _ in range(n_in):
            if len(nodes) < budget - goals:
                nodes.append(Node(id=len(nodes), kind="lookup", goal=g))
                mine.append(nodes[-1].id)
        lookups.append(mine)
    for g in reversed(range(goals)):
        inputs = tuple(lookups[g])
        if "branching" in wanted and g == 0:
            b = len(nodes)
            nodes.append(Node(id=b, kind="branch", goal=g))
            nodes.append(Node(id=b + 1, kind="act", goal=g, inputs=inputs, arm="then", branch=b))
            nodes.append(Node(id=b + 2, kind="act", goal=g, inputs=inputs, arm="else", branch=b))
        elif "error_recovery" in wanted and g == goals - 1:
            nodes.append(Node(id=len(nodes), kind="recover", goal=g, inputs=inputs))
        else:
            nodes.append(Node(id=len(nodes), kind="act", goal=g, inputs=inputs))
    return TaskGraph(nodes=tuple(nodes), wanted=tuple(wanted))
