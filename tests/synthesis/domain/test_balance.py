"""The kept set is balanced across features where the wide grounding makes its tasks (issue 36):
in sampling order, the feature the wide grounding opens most easily (a recovery from every
refusal met) would fill the set and push out the others (tau_retail's convergence fell from
.83 to .17 when its recoveries started to run). Tasks the plain grounding makes keep their
sampling order, so the built-in domains keep exactly the tasks they drew."""

from __future__ import annotations

from collections import Counter

from clawloop.synthesis.domain.ground import Grounded, Step
from clawloop.synthesis.domain.structure import carried
from clawloop.synthesis.domain.synth import _pick
from clawloop.synthesis.domain.taskgraph import Node, TaskGraph


def _fill(offers: list[tuple[bool, set[str]]], n: int) -> list[int]:
    """The order in which `n` of these pending graphs are made (indices into `offers`)."""
    pending = list(enumerate(offers))
    kept: Counter[str] = Counter()
    made = []
    while pending and len(made) < n:
        i, (_, feats) = pending.pop(_pick([o for _, o in pending], kept))
        made.append(i)
        kept.update(feats)
    return made


def test_plain_tasks_are_made_in_sampling_order_whatever_they_carry():
    offers = [(False, {"error_recovery"})] * 4 + [(False, {"convergence"})] * 2
    assert _fill(offers, 4) == [0, 1, 2, 3]


def test_wide_recoveries_do_not_push_out_the_convergence_the_pool_holds():
    rec, conv, lr = {"error_recovery"}, {"convergence"}, {"long_range"}
    offers = [(True, rec), (True, lr), (True, rec), (True, rec), (True, lr), (True, rec),
              (True, conv), (True, conv | lr), (True, rec)]  # fmt: skip
    made = _fill(offers, 6)
    kept = Counter(f for i in made for f in offers[i][1])
    in_order = Counter(f for i in range(6) for f in offers[i][1])
    assert in_order["convergence"] == 0 and in_order["error_recovery"] == 4
    assert kept["convergence"] >= 2 and kept["error_recovery"] >= 2 and kept["long_range"] >= 2
    assert made[0] == 7  # all at zero: the one carrying more features first


def test_a_plain_task_next_in_order_is_made_before_any_wide_one():
    offers = [(False, {"error_recovery"}), (True, {"convergence"}), (False, {"branching"})]
    assert _pick(offers, Counter()) == 0
    assert _pick(offers[1:], Counter()) == 0  # the wide one is next: the only wide offer
    assert _pick([(True, set()), (True, {"long_range"})], Counter()) == 1  # carries something
    assert _pick([(True, set())], Counter()) == 0


def test_a_plan_carries_what_its_steps_show():
    graph = TaskGraph(nodes=(Node(0, "recover", 0),))
    refused = Step("pay", {"id": "o1"}, "error", node=0)
    g = Grounded(graph=graph, steps=[refused, Step("fix", {"id": "o2"}, node=0),
                                     Step("pay", {"id": "o1"}, node=0)])  # fmt: skip
    assert carried(g) == {"error_recovery"}
    g.condition = {"table": "t", "key_field": "k", "key": 1, "field": "f", "value": 1}
    assert carried(g) == {"error_recovery", "branching"}
