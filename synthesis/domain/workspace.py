"""A domain-grounded task's starting workspace, as {relative path: text}.

    state/<table>.json | state/<name>.sql   the snapshot (a sqlite domain's .db as an SQL dump, so
                                            the workspace stays text, like every task's files)
    skills/<skill>/SKILL.md                 what the skill's tools do, extracted from their code
    skills/<skill>/<tool>                   an executable CLI: --param VALUE ..., JSON out
    skills/_lib/runtime.py                  the CLIs' runtime (runtime.py, standard library only)
    skills/_lib/tools.json                  how to call each tool: file, shape, symbol, params
    skills/_lib/domain/tools/*.py           the domain's own tools, run only inside the sandbox
    policy.md                               the domain's rules, if it has any

Host side and pure apart from reading the domain's files as text (and its .db as data).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clawloop.synthesis.domain import runtime
from clawloop.synthesis.domain.model import Domain, Skill
from clawloop.synthesis.domain.skills import skill_doc
from clawloop.synthesis.domain.state import connect_ro

RUNTIME_PATH = Path(str(runtime.__file__))  # imported so cache keys follow runtime edits
STATE_DIR = "state"


def snapshot_file(domain: Domain) -> str:
    """Where the snapshot lives in the workspace: the folder (json) or the dump (sqlite)."""
    if domain.state_format == "sqlite":
        return f"{STATE_DIR}/{Path(domain.state_path).stem}.sql"
    return STATE_DIR


def state_files(domain: Domain) -> dict[str, str]:
    root = domain.root / domain.state_path
    if domain.state_format == "sqlite":
        with connect_ro(root) as conn:
            return {snapshot_file(domain): "\n".join(conn.iterdump()) + "\n"}
    return {f"{STATE_DIR}/{p.name}": p.read_text() for p in sorted(root.glob("*.json"))}


def tool_spec(domain: Domain) -> dict[str, Any]:
    return {
        "store": domain.state_format,
        "state": snapshot_file(domain),
        "tools": {
            t.name: {
                "file": t.file,
                "shape": t.shape,
                "symbol": t.symbol,
                "params": [
                    {k: v for k, v in asdict(p).items() if k != "description"} for p in t.params
                ],
            }
            for t in domain.tools
        },
    }


def cli_shim(tool: str, skill: str, summary: str) -> str:
    first = " ".join(summary.split())[:120] or tool
    return (
        "#!/usr/bin/env python3\n"
        f'"""{tool} (skill {skill}): {first.replace(chr(34) * 3, "")}\n\n'
        'Run with --help for its parameters; prints JSON, exits 1 on an error."""\n'
        "import os\nimport sys\n\n"
        'sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_lib"))\n'
        "import runtime  # noqa: E402\n\n"
        f"sys.exit(runtime.main({tool!r}, sys.argv[1:]))\n"
    )


def skill_of(skills: list[Skill]) -> dict[str, str]:
    return {t: s.name for s in skills for t in s.tools}


def workspace_files(domain: Domain, skills: list[Skill]) -> dict[str, str]:
    files = state_files(domain)
    files["skills/_lib/runtime.py"] = RUNTIME_PATH.read_text()
    files["skills/_lib/tools.json"] = json.dumps(tool_spec(domain), indent=1) + "\n"
    for rel in sorted({t.file for t in domain.tools} | _siblings(domain)):
        files[f"skills/_lib/domain/{rel}"] = (domain.root / rel).read_text()
    for s in skills:
        files[f"skills/{s.name}/SKILL.md"] = skill_doc(domain, s)
        for name in s.tools:
            files[f"skills/{s.name}/{name}"] = cli_shim(name, s.name, domain.tool(name).description)
    if domain.policy.strip():
        files["policy.md"] = domain.policy
    return files


def _siblings(domain: Domain) -> set[str]:
    """Every tools/*.py (tools may import their neighbours, e.g. a shared helpers module)."""
    return {p.relative_to(domain.root).as_posix() for p in (domain.root / "tools").glob("*.py")}
