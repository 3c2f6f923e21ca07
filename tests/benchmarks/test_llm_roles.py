"""benchmarks/llm_roles.py at a tiny scale: every LLM role is driven once through the loop's own
code, and what the table says is consistent, whatever the model answers. Slow.

The endpoint: CLAWLOOP_ROLES_BASE_URL and CLAWLOOP_ROLES_MODEL when set (a real model, e.g.
llama.cpp serving Qwen2.5-Coder-1.5B-Instruct: README, "A GGUF model on CPU"), else the tiny
offline model served locally (random weights: every reply is junk, which is the point — the
roles must report it, never raise). About 2-8 min on two shared cores with the tiny model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "llm_roles.py"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (the sandbox)"),
]
ROLES = ["policy_builtin", "policy_clawgym", "writer", "summary", "scenarios", "planner",
         "constructor", "judge", "domain_analysis"]  # fmt: skip
TINY = ["--max-tokens", "16", "--json-max-tokens", "16", "--policy-max-tokens", "16",
        "--max-turns", "1", "--attempts", "1", "--repairs", "0", "--request-timeout", "300"]  # fmt: skip


def _endpoint() -> list[str]:
    url, model = os.environ.get("CLAWLOOP_ROLES_BASE_URL"), os.environ.get("CLAWLOOP_ROLES_MODEL")
    if url and model:
        return ["--base-url", url, "--model", model]
    from clawloop.training.tiny_model import ensure_tiny_model

    return ["--model-dir", str(ensure_tiny_model())]


@pytest.mark.timeout(1800)
def test_every_role_is_called_once_and_reported(tmp_path: Path) -> None:
    clawgym = sorted((Path(__file__).parents[1] / "fixtures" / "clawgym").glob("*/data_entry.json"))
    assert clawgym, "the ClawGym fixture tasks are missing"
    out = tmp_path / "roles.json"
    argv = [sys.executable, str(SCRIPT), *_endpoint(), *TINY, "--json", str(out)]
    argv += ["--clawgym-task", str(clawgym[0].parent)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    rows = doc["roles"]
    assert [r["role"] for r in rows] == ROLES
    for r in rows:
        where = f"{r['role']}: {r}"
        assert not r["raised"], where  # a failure is a reported outcome, never an exception
        assert r["calls"] >= 1 and r["outcome"], where
        assert 0 <= r["valid"] <= r["parsed"] <= r["calls"], where
        assert 0 <= r["repairs"] <= r["calls"] and r["seconds"] >= 0, where
        assert len(r["replies"]) == r["calls"], where
    # the printed table has one line per role, with the same counts
    lines = {ln.split("|")[1].strip(): ln for ln in done.stdout.splitlines() if ln.startswith("| ")}
    for r in rows:
        cells = [c.strip() for c in lines[r["role"]].split("|")[2:6]]
        assert cells == [str(r["calls"]), str(r["parsed"]), str(r["valid"]), str(r["repairs"])]
