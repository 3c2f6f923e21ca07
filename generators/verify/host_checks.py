"""The checks verify runs on the host, on the task's files in memory (no sandbox): leak,
decision_fields, ablation (a built-in generator's own code, run here) and derivable; HOST_CHECKS is
their order. What each drops and what only warns: generators/verify/__init__.py."""

from __future__ import annotations

import functools
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawloop.generators.candidates import parse_meta
from clawloop.generators.contract import ContractError
from clawloop.generators.runner import (
    compiled,
    run_pieces,
)
from clawloop.generators.verify.derivable import DOMAIN_ORIGIN, GENERATOR, derivable_verdict
from clawloop.generators.verify.leaks import (
    CERTAIN,
    find_leak_signals,
    is_data,
    unheld_decision_fields,
)
from clawloop.generators.verify.taskfiles import TaskFiles, warning
from clawloop.harness.sandbox.scratch import scratch
from clawloop.harness.taskfolder.folder import TaskFolderError, parse_task_info
from clawloop.harness.taskfolder.grader import grade
from clawloop.harness.taskfolder.packing import write_files
from clawloop.synthesis.library import RenderError, render_generator


def hidden_answer(answer: dict[str, Any], contract: dict[str, Any]) -> dict[str, Any]:
    """The answer values the agent must not be told. Of a state output's predicates, those are
    the ones each lists as "hidden" (what the domain's tools derive): a value the instruction
    gives (a payment's amount) is the task itself, and the guard only restates the records."""
    out = dict(answer)
    for o in contract.get("outputs", []):
        if o.get("format") == "state" and isinstance(answer.get(o.get("path")), dict):
            preds = answer[o["path"]].get("predicates") or []
            out[o["path"]] = [p.get("hidden", []) for p in preds if isinstance(p, dict)]
        if o.get("format") == "report" and isinstance(answer.get(o.get("path")), dict):
            # A report's criteria: the values its text must state are the answer; the fields
            # and keys they name are what the contract's `covers` tells the agent to cover.
            facts = answer[o["path"]].get("facts") or []
            out[o["path"]] = [f.get("value") for f in facts if isinstance(f, dict)]
    return out


def contract_keys(contract: dict[str, Any]) -> frozenset[str]:
    """Every field the contract names as a row key (csv `key`, a schema's `key` at any depth)."""
    out: set[str] = set()

    def walk(v: Any, d: int = 0) -> None:
        if isinstance(v, dict) and d < 12:
            k = v.get("key")
            if isinstance(k, list):
                out.update(str(x) for x in k)
            for x in v.values():
                walk(x, d + 1)
        elif isinstance(v, list) and d < 12:
            for x in v:
                walk(x, d + 1)

    walk(contract.get("outputs", []))
    return frozenset(out)


def non_input_files(files: dict[str, str], texts: dict[str, str]) -> list[str]:
    """Starting files the task never points to: neither the instruction, the contract nor any
    other starting file names the file or a folder it is in (a README, a stray notes file)."""
    told = "\n".join(texts.values())
    out = []
    for rel in files:
        parts = rel.split("/")
        names = [rel] + ["/".join(parts[:i]) + "/" for i in range(1, len(parts))]
        others = "\n".join(t for r, t in files.items() if r != rel)
        if not any(n in told or n in others for n in names):
            out.append(rel)
    return out


def check_leak(task: Path | TaskFiles) -> tuple[bool, str]:
    """Drops a task on a certain leak; a guessed one (find_leak_signals), or any found only in a
    data file the task describes without naming its path (an input, not a note), warns."""
    task = TaskFiles.of(task)
    contract = task.json("tests/contract.json")
    answer = hidden_answer(task.json("tests/answer.json"), contract)
    files = task.workspace
    texts = {
        "instruction.md": task.text("instruction.md"),
        "the contract": json.dumps(contract, ensure_ascii=False),
    }
    strays = non_input_files(files, texts)
    inputs = "\n".join(t for r, t in files.items() if r not in strays)
    data = {f"workspace file {r}" for r in strays if is_data(files[r])}
    # Prose strays before data ones: a value a note and a data file both hold is the note's.
    for r in sorted(strays, key=lambda r: f"workspace file {r}" in data):
        texts[f"workspace file {r}"] = files[r]
    tolerance = contract.get("tolerance", {})
    found = find_leak_signals(answer, texts, inputs, tolerance, contract_keys(contract))
    certain = [what for what, where, how in found if how == CERTAIN and where not in data]
    if certain:
        return False, "answer values visible to the agent: " + "; ".join(certain[:5])
    if found:
        return True, warning(
            "answer values the agent may be told, read from prose or an unnamed data file: "
            + "; ".join(what for what, _, _ in found[:5])
            + "; kept, as the text may mean something else (a rule's parameter, an input). "
            "If it gives the answer away, reword it"
        )
    return True, (
        "no non-trivial answer value, nor a categorical one stated as the answer, appears in the "
        "instruction, the contract" + (" or a file the task never points to" if strays else "")
    )


BUILTIN_FORMATS = frozenset(("json", "csv", "report"))  # the contract outputs built-ins write


@functools.lru_cache(maxsize=256)  # the ablation check and verify_tasks both ask, per task
def builtin_source(code: str) -> bool:
    """Is `code` a built-in generator exactly as synthesis/library.py renders it? Then it is
    this project's own code and the ablation may run it here, outside a sandbox."""
    try:
        m = parse_meta(code).meta
        return code == render_generator(
            m.capability, m.domain, m.multihop, m.dirtiness, m.output_format
        )
    except (ContractError, RenderError, KeyError):
        return False


def ablation_rewards(
    code: str,
    contract: dict[str, Any],
    answer: dict[str, Any],
    workspace: Path | dict[str, str],
    levels: dict[str, tuple[str, int]] | None = None,
) -> dict[str, float]:
    """The reward of the reference solution run with each injection the generator declares
    (its injections()) skipped, on a copy of the starting workspace (a folder, or its files'
    texts). A skip that crashes the solution scores 0: the injection is needed to get any
    answer at all."""
    ns: dict[str, Any] = {"__name__": "clawloop_ablation"}
    # A built-in's source (see builtin_source), compiled once per text for forge and verify.
    run_pieces(compiled(code.encode()) or (compile(code, "generator.py", "exec"),), ns)
    out: dict[str, float] = {}
    if levels is not None:
        levels.update(ns.get("INJECTION_LEVELS", {}))
    names = ns["injections"]()
    if not names:
        return out
    with scratch("clawloop-ablation-") as tmp:
        ws = Path(tmp, "ws")
        if isinstance(workspace, dict):  # its files in memory: written once, no copy
            write_files({rel: (text.encode(), False) for rel, text in workspace.items()}, ws)
        else:
            shutil.copytree(workspace, ws)
        inputs = _tree_paths(str(ws))
        for name in names:
            try:
                ns["solve"](str(ws), skip=name)
            except Exception:  # noqa: BLE001 (the ablated reader failing is a changed answer)
                out[name] = 0.0
            else:
                out[name] = float(grade(contract, answer, str(ws)).get("reward", 0.0))
            # One copy for every skip: the built-in solve only adds its outputs, so removing
            # what it added restores the starting workspace.
            for p in sorted(_tree_paths(str(ws)) - inputs, reverse=True):
                os.rmdir(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
    return out


def _tree_paths(top: str) -> set[str]:
    """Every path below `top` (folders and files, symlinks not followed)."""
    out = set()
    for folder, dirs, files in os.walk(top):
        out.update(os.path.join(folder, n) for n in dirs + files)
    return out


def check_ablation(task: Path | TaskFiles) -> tuple[bool, str]:
    task = TaskFiles.of(task)
    code = task.text("solution/generator.py", "")
    if not builtin_source(code):
        return True, "not a built-in generator: it declares no injections to ablate"
    contract = task.json("tests/contract.json")
    answer = task.json("tests/answer.json")
    # This runs on the host: only outputs a built-in writes (parsed in plain Python), never a
    # task folder's other kinds (a state output's SQL is run by sqlite, C code).
    odd = sorted({str(o.get("format")) for o in contract.get("outputs", [])} - BUILTIN_FORMATS)
    if odd:
        return False, (
            f"the contract has {', '.join(odd)} outputs, which no built-in generator writes: "
            "not this generator's task"
        )
    levels: dict[str, tuple[str, int]] = {}
    rewards = ablation_rewards(code, contract, answer, task.workspace, levels)
    if not rewards:
        return True, "this knob level injects no difficulty"
    inert = [n for n, r in rewards.items() if r >= 1.0]
    if inert:
        lower: dict[str, int] = {}
        for n in inert:  # the level an inert injection's knob really reaches
            if n in levels:
                knob, level = levels[n]
                lower[knob] = min(lower.get(knob, level), level - 1)
        acts = ", ".join(f"{k} {v}" for k, v in sorted(lower.items()))
        return False, (
            f"the reference solution skipping {', '.join(inert)} still scores 1.0: injected, "
            "but the answer does not depend on it (the task is easier than its knobs say"
            + (f"; it acts as {acts}" if acts else "")
            + ")"
        )
    return True, f"skipping any of {', '.join(rewards)} changes the answer"


def check_decision_fields(task: Path | TaskFiles) -> tuple[bool, str]:
    """Drops a task only when a decision names, as code, a field no output holds; a plain word
    read as a field from prose ("values are sums") may be English: a passing row that warns."""
    task = TaskFiles.of(task)
    contract = task.json("tests/contract.json")
    answer = task.json("tests/answer.json")
    unheld = unheld_decision_fields(contract, answer, task.workspace)
    certain = [f for f, how in unheld.items() if how == CERTAIN]
    if certain:
        return False, (
            f"the decisions define {', '.join(certain[:5])}, which no output holds: a rule for "
            "nothing the agent writes (drop the rule or add the field)"
        )
    if unheld:
        return True, warning(
            f"the decisions may define {', '.join(list(unheld)[:5])}, which no output holds; "
            "kept, as each is a plain word opening a rule (maybe prose) or a step another rule "
            "uses. If it is a field, add it to an output; to be checked, write it as code "
            "(`name`, name = ...)"
        )
    return True, "every field the decisions define is in some output"


def check_derivable(task: Path | TaskFiles) -> tuple[bool, str] | None:
    """Drops a domain task whose reference writes a value the agent cannot know (neither stated
    in instruction.md nor read from a record it names), the value named; None (no row) for a
    task of another origin, which has no reference plan to read."""
    task = TaskFiles.of(task)
    try:
        origin = parse_task_info(task.text("task.toml"), Path(task.name)).origin
    except (OSError, TaskFolderError):  # not a clawloop task.toml: no origin, so not a domain's
        return None
    if not origin.startswith(DOMAIN_ORIGIN):
        return None
    return derivable_verdict(
        task.text(GENERATOR), task.json("tests/answer.json"), task.text("instruction.md")
    )


# The checks verify runs on the host, in the order of their rows. Before them: forge (a row
# without a task folder) and unpack fail alone; determinism, when the solve cannot rebuild
# (_rebuild_of is None: check_determinism), runs first (else it comes from the solve and its row
# is moved first). After them, from the sandbox (sandbox_verdicts): oracle, noop, trivial:*,
# answer_file.
# A check that returns None does not apply to the task: it writes no row.
HOST_CHECKS: tuple[tuple[str, Callable[[TaskFiles], tuple[bool, str] | None]], ...] = (
    ("leak", check_leak),
    ("decision_fields", check_decision_fields),
    ("ablation", check_ablation),
    ("derivable", check_derivable),
)
