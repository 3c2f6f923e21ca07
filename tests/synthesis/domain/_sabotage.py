"""Shared by the end-state tests: a domain task made by synth.make_task from a reference end
state given as data, and end states (correct or sabotaged) written as a workspace and graded.

No domain code runs: the reference "run" is the state the tools would leave, written by hand (a
PlanRun), and a sqlite state is changed with SQL on its own dump, as data.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawloop.harness.taskfolder.grader import grade, read_output
from clawloop.harness.taskfolder.state_predicates import load_records
from clawloop.synthesis.domain.execute import PlanRun
from clawloop.synthesis.domain.ground import Grounded, Step
from clawloop.synthesis.domain.load import builtin_domains, load_domain
from clawloop.synthesis.domain.model import Domain
from clawloop.synthesis.domain.skills import cluster_skills
from clawloop.synthesis.domain.synth import make_task
from clawloop.synthesis.domain.taskgraph import TaskGraph
from clawloop.synthesis.domain.workspace import skill_of, snapshot_file, workspace_files

Tables = dict[str, list[dict[str, Any]]]
FIXTURES = Path(__file__).parents[2] / "fixtures" / "domains"
DOMAINS = {p.name: p for p in builtin_domains()} | {"retail": FIXTURES / "retail_cls"}


@dataclass
class Made:
    domain: Domain
    files: dict[str, str]  # the starting workspace
    built: dict[str, Any]  # the generator's build(): instruction, files, answer, contract
    final: Tables  # the reference end state
    final_sql: str = ""  # a sqlite store's reference end state, as its dump
    note: str = ""  # how the instruction was written
    code: str = ""  # the rendered generator (its TASK holds the stored reference plan)

    @property
    def snapshot(self) -> str:
        return snapshot_file(self.domain)


def _schema(domain: Domain) -> dict[str, Any]:
    if domain.state_format == "sqlite":
        return {"store": "sqlite", "file": Path(snapshot_file(domain)).name}
    return {"store": "json"}


def write_files(ws: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)


def records(domain: Domain, files: dict[str, str], ws: Path) -> Tables:
    """The state as the grader reads it (json objects keyed by id carry the key as `_key`)."""
    write_files(ws, {r: t for r, t in files.items() if r.startswith("state/")})
    return load_records(read_output, str(ws), "state", _schema(domain))


def sql_apply(dump: str, sql: str) -> str:
    """The dump with `sql` applied (as data: no tool runs)."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.executescript(sql)
    out = "\n".join(conn.iterdump()) + "\n"
    conn.close()
    return out


def json_files(made: Made, tables: Tables) -> dict[str, str]:
    """`tables` as the json store's files, each in its starting shape (object by key, or list)."""
    out = {}
    for t, rows in tables.items():
        start = json.loads(made.files.get(f"state/{t}.json", "[]"))
        if isinstance(start, dict):
            data: Any = {r["_key"]: {k: v for k, v in r.items() if k != "_key"} for r in rows}
        else:
            data = rows
        out[f"state/{t}.json"] = json.dumps(data, indent=1)
    return out


def make(
    name: str | Path,
    steps: list[Step],
    change: Callable[[Tables], None] | str,
    tmp: Path,
    references: dict[int, dict[str, Any]] | None = None,
    chat: Any = None,
) -> Made:
    """The task synth makes for a reference whose end state is `change` applied to the start (a
    function on the records, or SQL on a sqlite dump); `references` are the records the plan's
    lookups read (Grounded.references), `chat` an instruction writer. `name` is a domain of
    DOMAINS, or the folder of one."""
    domain = load_domain(DOMAINS[name] if isinstance(name, str) else name)
    skills = cluster_skills(domain)
    files = workspace_files(domain, skills)
    initial = records(domain, files, tmp / "initial")
    final_sql = ""
    if isinstance(change, str):
        final_sql = sql_apply(files[snapshot_file(domain)], change)
        final = records(domain, {snapshot_file(domain): final_sql}, tmp / "final")
    else:
        final = copy.deepcopy(initial)
        change(final)
    g = Grounded(graph=TaskGraph(nodes=()), steps=steps, references=dict(references or {}))
    run = PlanRun(True, "", [], final)
    code, note = make_task(domain, g, initial, (run, None), files, skill_of(skills), chat)
    ns: dict[str, Any] = {}
    exec(compile(code, "generator.py", "exec"), ns)  # our own rendered generator: data only
    return Made(domain, files, ns["build"](0), final, final_sql, note, code)


def reward(made: Made, state_files: dict[str, str], ws: Path, extra: dict[str, str] | None = None):
    """(reward, failed check names) of an end state given as the state files."""
    write_files(ws, {r: t for r, t in made.files.items() if not r.startswith("state/")})
    write_files(ws, state_files | (extra or {}))
    result = grade(made.built["contract"], made.built["answer"], str(ws))
    return result["reward"], [
        c["name"] + ": " + c["detail"] for c in result["checks"] if not c["passed"]
    ]


def end_state(made: Made, tables: Tables | None = None, sql: str = "") -> dict[str, str]:
    """The reference end state's files, or `tables` (json) / the reference dump plus `sql`."""
    if made.domain.state_format == "sqlite":
        return {made.snapshot: sql_apply(made.final_sql, sql) if sql else made.final_sql}
    return json_files(made, tables if tables is not None else made.final)


def row(tables: Tables, table: str, **match: Any) -> dict[str, Any]:
    (found,) = [r for r in tables[table] if all(r.get(k) == v for k, v in match.items())]
    return found
