"""A scripted SkillSynth LLM: the Planner's plan, a Constructor's generator (rain gauges: two
CSVs joined, a JSON summary) that can ask for less than it grades or plant a bug, and a judge that
reads the instruction the way a careful reviewer does. `router_for(constructor)` routes each
request by its role mark; `plan_for(skills)` names the path's skills in the plan's steps."""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

from clawloop.synthesis.skillgraph.prompts import CONSTRUCTOR_MARK, JUDGE_MARK, PLANNER_MARK

PLAN = {
    "goal": "Total the rainfall per region from station logs and name the wettest station.",
    "domain": "rain gauges",
    "multihop": 1,
    "files": [
        {"path": "stations.csv", "kind": "csv", "holds": "station id and region"},
        {"path": "rain.csv", "kind": "csv", "holds": "daily rainfall in mm per station"},
    ],
    "steps": [
        {"skill": "csv-join", "state": "rainfall rows carry their station's region"},
        {"skill": "json-summary", "state": "output/summary.json holds the totals"},
    ],
    "outputs": [{"path": "output/summary.json", "format": "json", "contains": "totals"}],
    "checks": [
        {"fact": "rainfall total per region", "output": "output/summary.json"},
        {"fact": "the wettest station", "output": "output/summary.json"},
    ],
}

GENERATOR = textwrap.dedent(
    '''
    """Total rainfall per region and find the wettest station from two gauge logs."""
    GENERATOR = {"capability": "skill_graph", "domain": "rain_gauges",
                 "multihop": 1, "dirtiness": 0, "output_format": "json"}

    import csv
    import json
    import os
    import random

    ASKS = __ASKS__
    BROKEN = __BROKEN__


    def _data(seed):
        rng = random.Random(seed)
        regions = ["north", "coast", "valley"]
        stations = [("ST-%d" % n, regions[i % 3]) for i, n in enumerate(sorted(rng.sample(range(100, 999), 6)))]
        rain = [(s, d, round(rng.uniform(0.1, 30.0), 1)) for s, _ in stations for d in range(1, 6)]
        return stations, rain


    def _summary(stations, rain):
        region = dict(stations)
        totals, per_station = {}, {}
        for s, _, mm in rain:
            totals[region[s]] = round(totals.get(region[s], 0.0) + float(mm), 1)
            per_station[s] = per_station.get(s, 0.0) + float(mm)
        wettest = sorted(per_station, key=lambda s: (-per_station[s], s))[0]
        return {"region_totals": dict(sorted(totals.items())), "wettest_station": wettest}


    def build(seed):
        if BROKEN == "build":
            raise ValueError("rain.csv template has no header")
        stations, rain = _data(seed)
        ask = "Write output/summary.json with region_totals, the total rainfall in mm per region."
        if ASKS:
            ask += " Also give wettest_station, the station with the most rainfall overall."
        return {
            "instruction": "stations.csv maps each gauge station to its region; rain.csv logs "
                           "daily rainfall per station. " + ask,
            "files": {
                "stations.csv": "station,region\\n" + "".join("%s,%s\\n" % r for r in stations),
                "rain.csv": "station,day,mm\\n" + "".join("%s,%d,%.1f\\n" % r for r in rain),
            },
            "answer": {"output/summary.json": _summary(stations, rain)},
            "contract": {
                "outputs": [{"path": "output/summary.json", "format": "json", "schema": {
                    "type": "object",
                    "properties": {
                        "region_totals": {"type": "object", "additionalProperties": {"type": "number"}},
                        "wettest_station": {"type": "string"}}}}],
                "tolerance": {"abs": 0.05, "rel": 0.0},
                "decisions": ["Key region_totals by region name as written in stations.csv",
                              "Round each region total to 1 decimal",
                              "Break a tie for the wettest station by the smaller id"],
            },
        }


    def solve(workspace):
        with open(os.path.join(workspace, "stations.csv")) as f:
            stations = [(r["station"], r["region"]) for r in csv.DictReader(f)]
        with open(os.path.join(workspace, "rain.csv")) as f:
            rain = [(r["station"], int(r["day"]), float(r["mm"])) for r in csv.DictReader(f)]
        out = _summary(stations, rain)
        if BROKEN == "solve":
            out["region_totals"] = {k: v + 7.0 for k, v in out["region_totals"].items()}
        os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
        with open(os.path.join(workspace, "output", "summary.json"), "w") as f:
            json.dump(out, f)
    '''
).lstrip()


def generator(asks: bool, broken: str = "") -> str:
    return GENERATOR.replace("__ASKS__", repr(asks)).replace("__BROKEN__", repr(broken))


def system_of(messages: list[dict[str, Any]]) -> str:
    return str(messages[0].get("content", "")) if messages else ""


def turns(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


def fake_judge(messages: list[dict[str, Any]]) -> str:
    """A judge that reads like one: every graded top-level field must be named in the
    instruction's prose (the text before the rendered contract)."""
    text = str(messages[-1]["content"])
    prose = text.split("<<<", 1)[1].split("## Outputs", 1)[0]
    graded = text.split("values hidden):", 1)[1]
    fields = sorted(set(re.findall(r"[{,]\s*([a-z_]+):", graded)))
    unasked = [f for f in fields if f not in prose]
    verdict = {
        "agree": not unasked,
        "untested_asks": [],
        "unasked_tests": unasked,
        "reason": "fields graded but never asked for" if unasked else "they agree",
    }
    return "```json\n" + json.dumps(verdict) + "\n```"


def plan_for(skills: list[str]) -> dict[str, Any]:
    """PLAN with its steps' skills renamed to `skills` (a path of two)."""
    steps = [{**st, "skill": sk} for st, sk in zip(PLAN["steps"], skills, strict=True)]
    return {**PLAN, "steps": steps}


def router_for(constructor, plan: dict[str, Any] | None = None) -> Any:
    def route(messages: list[dict[str, Any]]) -> str:
        system = system_of(messages)
        if PLANNER_MARK in system:
            return "Here is the plan:\n```json\n" + json.dumps(plan or PLAN) + "\n```"
        if CONSTRUCTOR_MARK in system:
            return "```python\n" + constructor(turns(messages)) + "```"
        if JUDGE_MARK in system:
            return fake_judge(messages)
        return "unexpected role"

    return route
