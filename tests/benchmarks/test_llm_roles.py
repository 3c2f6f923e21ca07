"""benchmarks/llm_roles.py at a tiny scale: every LLM role is driven once through the loop's own
code, and what the table says is consistent, whatever the model answers (slow); and the readers
that count a role's replies (fast).

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


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (the sandbox)")
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


def _bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("llm_roles", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["llm_roles"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_a_role_reader_counts_json_and_validity_apart() -> None:
    roles = _bench_module()
    check = roles.scenario_check()
    good = '```json\n{"pre": {"summary": "a folder of CSV logs", "artifacts": ["csv"]}, '
    good += '"post": {"summary": "a markdown report with a table", "artifacts": ["md"]}}\n```'
    assert check(good) == (True, True)
    assert check('{"pre": {"summary": "csv"}}') == (True, False)  # JSON, but not a valid reply
    assert check("I cannot do that.") == (False, False)
    calls = [roles.Call(1.0, good, "", False, ""), roles.Call(2.0, None, "timeout", True, "")]
    res = roles.tally("scenarios", calls, check, "x")
    assert (res.calls, res.parsed, res.valid, res.repairs, res.seconds) == (2, 1, 1, 1, 3.0)
