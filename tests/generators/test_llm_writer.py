"""LLM-written generators: a scripted writer over real HTTP; broken code repaired, hostile code
contained by the sandbox, duplicates dropped. Fast tests inject forge/verify; the sandbox ones
(marked slow) run the real forge + verify in bubblewrap."""

from __future__ import annotations

import shutil
import textwrap

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.generators.llm_writer import (
    WriterConfig,
    WriterError,
    WriterSpec,
    extract_code,
    normalized_hash,
    static_check,
    write_generator,
    write_generators,
)
from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.harness.sandbox.base import SandboxConfig

SPEC = WriterSpec("domain_calculation", "apiculture", 0, 0, "json", seed=11)

GOOD = textwrap.dedent(
    '''
    """Total the nectar flow per hive from a flow-meter log."""
    GENERATOR = {"capability": "domain_calculation", "domain": "apiculture",
                 "multihop": 0, "dirtiness": 0, "output_format": "json"}

    import csv
    import json
    import os
    import random


    def _rows(seed):
        rng = random.Random(seed)
        hives = ["HV-%d" % n for n in sorted(rng.sample(range(100, 999), 3))]
        return [(hives[i % 3], round(rng.uniform(0.3, 4.7), 3)) for i in range(10)]


    def _totals(rows):
        out = {}
        for hive, litres in rows:
            out[hive] = out.get(hive, 0.0) + litres
        return {h: round(v * 1.5, 2) for h, v in sorted(out.items())}


    def build(seed):
        rows = _rows(seed)
        text = "hive,litres\\n" + "".join("%s,%s\\n" % r for r in rows)
        return {
            "instruction": "flow.csv logs nectar flow in litres. Report the weighted total per hive.",
            "files": {"flow.csv": text},
            "answer": {"output/totals.json": _totals(rows)},
            "contract": {
                "outputs": [{"path": "output/totals.json", "format": "json",
                             "schema": {"type": "object", "additionalProperties": {"type": "number"}}}],
                "tolerance": {"abs": 0.01, "rel": 0.0},
                "decisions": ["Multiply each hive's litres by the nectar factor 1.5",
                              "Round each total to 2 decimals"],
            },
        }


    def solve(workspace):
        with open(os.path.join(workspace, "flow.csv")) as f:
            rows = [(r["hive"], float(r["litres"])) for r in csv.DictReader(f)]
        os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
        with open(os.path.join(workspace, "output", "totals.json"), "w") as f:
            json.dump(_totals(rows), f)
    '''
).lstrip()


def _hostile(body: str) -> str:
    """GOOD with build() replaced by a hostile one (it must never run on the host)."""
    head, _, tail = GOOD.partition("def build(seed):")
    rest = tail[tail.index("def solve") :]
    return (
        head + "def build(seed):\n" + textwrap.indent(textwrap.dedent(body), "    ") + "\n\n" + rest
    )


def fenced(code: str, prose: str = "Here is the generator.") -> str:
    return f"{prose}\n```python\n{code}```\n"


class ScriptedWriter(FakeOpenAI):
    """FakeOpenAI answering reply i to a conversation holding i assistant messages."""

    def __init__(self, replies: list[str]) -> None:
        super().__init__("chatty")
        self.replies = replies

    def respond(self, body: dict) -> dict:
        step = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
        resp = super().respond(body)
        resp["choices"][0]["message"] = {
            "role": "assistant",
            "content": self.replies[min(step, len(self.replies) - 1)],
        }
        return resp


def _chat(srv: FakeOpenAI):
    return endpoint_chat(LLMEndpoint(srv.base_url, "writer", max_retries=0))


class ScriptedSandbox:
    """Stand-ins for forge_candidate / verify_task that replay outcomes and record what they got."""

    def __init__(self, forge_errors: list[str], verify_failures: list[str]) -> None:
        self.forge_errors, self.verify_failures = list(forge_errors), list(verify_failures)
        self.forged_codes: list[str] = []

    def forge(self, row, sandbox):
        self.forged_codes.append(row["generator_code"])
        err = self.forge_errors.pop(0) if self.forge_errors else ""
        base = {"task_id": row["task_id"], "capability": row["capability"], "split": row["split"]}
        if err:
            return {**base, "status": "failed", "error": err, "error_kind": "timeout"}
        return {**base, "status": "ok", "error": "", "error_kind": "", "task_tar": b"x"}

    def verify(self, forged, sandbox):
        reason = self.verify_failures.pop(0) if self.verify_failures else ""
        checks = [
            {
                "task_id": forged["task_id"],
                "check": "oracle",
                "passed": not reason,
                "reason": reason or "ok",
            }
        ]
        return checks, {"task_id": forged["task_id"], "kept": not reason, "reason": reason}


def test_extract_code_and_normalized_hash_ignore_layout_comments_and_docs():
    code = extract_code(
        "<think>plan</think>Sure:\n```python\nx = 1\n```\nand\n```\nprint(2)\nprint(3)\n```"
    )
    assert code == "print(2)\nprint(3)\n"
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # add\n'
    b = "def f(x):\n\n    return (x +\n            1)\n"
    assert (
        normalized_hash(a) == normalized_hash(b) != normalized_hash("def f(x):\n    return x + 2\n")
    )
    with pytest.raises(WriterError, match="SyntaxError"):
        normalized_hash("def f(:\n")


def test_static_check_uses_ast_only_and_says_what_is_wrong(tmp_path):
    static_check(GOOD, SPEC)
    with pytest.raises(WriterError, match="dirtiness=0 \\(asked for 2\\)"):
        static_check(GOOD, WriterSpec("domain_calculation", "apiculture", 0, 2, "json"))
    with pytest.raises(WriterError, match="standard library.*numpy"):
        static_check("import numpy\n" + GOOD, SPEC)
    canary = tmp_path / "ran"
    hostile = f"open({str(canary)!r}, 'w').write('x')\n" + GOOD
    static_check(hostile, SPEC)  # parsing is all the host does: the module-level code never runs
    assert not canary.exists()


def test_broken_code_is_repaired_with_the_error_fed_back():
    replies = [
        "I would write a generator that totals hives.",  # no code
        fenced(GOOD.replace("def solve(workspace):", "def solve(workspace)")),  # syntax error
        fenced(GOOD.replace('"dirtiness": 0', '"dirtiness": 3')),  # wrong metadata
        fenced(GOOD),
    ]
    box = ScriptedSandbox([], [])
    with ScriptedWriter(replies) as srv:
        res = write_generator(
            SPEC,
            _chat(srv),
            SandboxConfig(),
            model="writer",
            forge_fn=box.forge,
            verify_fn=box.verify,
        )
    assert res.status == "ok", res.reason
    assert [a.stage for a in res.attempts] == ["reply", "static", "static", "ok"]
    assert res.candidate["origin"] == "llm:writer" and res.candidate["generator_code"] == GOOD
    assert box.forged_codes == [GOOD]  # nothing that failed host checks reached the sandbox
    last = srv.requests[-1]["messages"]
    assert (
        "does not match the request" in last[-1]["content"] and "dirtiness=3" in last[-1]["content"]
    )
    assert "not valid Python" in srv.requests[2]["messages"][-1]["content"]


def test_forge_and_verify_failures_go_back_to_the_writer():
    v2 = GOOD.replace("1.5", "1.75")
    v3 = GOOD.replace("1.5", "2.25")
    box = ScriptedSandbox(
        ["build() timed out after 5s (killed)"],
        ["noop: false positive: untouched workspace passes"],
    )
    with ScriptedWriter([fenced(GOOD), fenced(v2), fenced(v3)]) as srv:
        res = write_generator(
            SPEC, _chat(srv), SandboxConfig(), model="w", forge_fn=box.forge, verify_fn=box.verify
        )
    assert res.status == "ok" and [a.stage for a in res.attempts] == ["forge", "verify", "ok"]
    assert "timed out" in srv.requests[1]["messages"][-1]["content"]
    assert "false positive" in srv.requests[2]["messages"][-1]["content"]
    assert box.forged_codes == [GOOD, v2, v3]


def test_unrepairable_writer_is_dropped_after_three_repairs():
    box = ScriptedSandbox([], [])
    with ScriptedWriter([fenced("def build(seed):\n    return {\n")]) as srv:
        res = write_generator(
            SPEC,
            _chat(srv),
            SandboxConfig(),
            model="w",
            cfg=WriterConfig(max_repairs=3),
            forge_fn=box.forge,
            verify_fn=box.verify,
        )
    assert res.status == "dropped" and len(res.attempts) == 4 and len(srv.requests) == 4
    assert "static failed after 4" in res.reason and box.forged_codes == []


def test_resubmitting_failed_code_is_not_forged_again():
    box = ScriptedSandbox(["crash: ZeroDivisionError"], [])
    same_with_comment = GOOD.replace("import csv", "import csv  # tables")
    with ScriptedWriter(
        [fenced(GOOD), fenced(same_with_comment), fenced(GOOD.replace("1.5", "1.25"))]
    ) as srv:
        res = write_generator(
            SPEC, _chat(srv), SandboxConfig(), model="w", forge_fn=box.forge, verify_fn=box.verify
        )
    assert res.status == "ok" and [a.stage for a in res.attempts] == ["forge", "static", "ok"]
    assert (
        len(box.forged_codes) == 2
        and "same code as a previous attempt" in srv.requests[2]["messages"][-1]["content"]
    )


def test_duplicates_are_dropped_across_specs_and_no_endpoint_means_builtin():
    box = ScriptedSandbox([], [])
    reformatted = GOOD.replace('"""Total the nectar', '"""Sum the nectar').replace(
        "import json\n", "import json  # out\n"
    )
    specs = [SPEC, WriterSpec("domain_calculation", "apiculture", 0, 0, "json", seed=12)]
    with ScriptedWriter([fenced(GOOD)]) as srv:
        results, notes = write_generators(
            specs,
            None,
            SandboxConfig(),
            chat_fn=_chat(srv),
            forge_fn=box.forge,
            verify_fn=box.verify,
        )
    assert [r.status for r in results] == ["ok", "duplicate"] and "1/2" in notes[0]
    assert normalized_hash(reformatted) == results[0].normalized_hash
    results, notes = write_generators(specs, None, SandboxConfig())
    assert results == [] and "built-in library" in notes[0]


def test_dead_writer_endpoint_is_a_dropped_row():
    with FakeOpenAI("drop") as srv:
        res = write_generator(SPEC, _chat(srv), SandboxConfig(), model="w")
    assert res.status == "dropped" and "writer endpoint error" in res.reason


# ---- the real sandbox (bubblewrap): hostile code is contained, reported, and repaired ----------

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.mark.slow
@needs_bwrap
def test_hostile_generators_are_contained_by_the_sandbox_and_repaired(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST-SECRET-7781")
    loops = _hostile("while True:\n    pass\n")
    forks = _hostile("import os\nwhile True:\n    os.fork()\n")
    reads = _hostile(
        f"return {{'instruction': open({str(secret)!r}).read(), 'files': {{}}, 'answer': {{}}, 'contract': {{}}}}\n"
    )
    cfg = SandboxConfig(backend="bwrap")
    with ScriptedWriter([fenced(loops), fenced(forks), fenced(reads), fenced(GOOD)]) as srv:
        res = write_generator(
            SPEC, _chat(srv), cfg, model="w", cfg=WriterConfig(max_repairs=3, build_timeout_s=5)
        )
    stages = [(a.stage, a.error[:80]) for a in res.attempts]
    assert res.status == "ok", (res.reason, stages)
    assert [a.stage for a in res.attempts] == ["forge", "forge", "forge", "ok"]
    assert (
        "timeout" in res.attempts[0].error.lower() or "timed out" in res.attempts[0].error.lower()
    )
    assert "No such file" in res.attempts[2].error or "FileNotFoundError" in res.attempts[2].error
    assert all("HOST-SECRET" not in a.error for a in res.attempts)
    assert res.verdict["kept"] is True


@pytest.mark.slow
@needs_bwrap
def test_hostile_writer_that_never_improves_is_dropped(tmp_path):
    loops = _hostile("while True:\n    pass\n")
    variants = [fenced(loops.replace("pass", f"x = {i}")) for i in range(4)]
    with ScriptedWriter(variants) as srv:
        res = write_generator(
            SPEC,
            _chat(srv),
            SandboxConfig(backend="bwrap"),
            model="w",
            cfg=WriterConfig(max_repairs=3, build_timeout_s=2),
        )
    assert (
        res.status == "dropped"
        and len(res.attempts) == 4
        and all(a.stage == "forge" for a in res.attempts)
    )


def test_llm_candidates_replace_builtin_rows_and_keep_the_rest():
    from clawloop.generators.llm_writer import llm_candidates

    builtin = [
        {
            "task_id": "b1",
            "generator_code": "# builtin 1",
            "seed": 11,
            "capability": "domain_calculation",
            "domain": "apiculture",
            "multihop": 0,
            "dirtiness": 0,
            "output_format": "json",
            "split": "train",
            "origin": "builtin",
        },
        {
            "task_id": "b2",
            "generator_code": "# builtin 2",
            "seed": 12,
            "capability": "domain_calculation",
            "domain": "apiculture",
            "multihop": 0,
            "dirtiness": 0,
            "output_format": "json",
            "split": "eval",
            "origin": "builtin",
        },
    ]
    box = ScriptedSandbox([], [])
    with ScriptedWriter([fenced(GOOD)]) as srv:  # the same code twice: the second is a duplicate
        rows, notes = llm_candidates(
            builtin,
            None,
            SandboxConfig(),
            chat_fn=_chat(srv),
            forge_fn=box.forge,
            verify_fn=box.verify,
        )
    assert (
        rows[0]["origin"] == "llm:scripted"
        and rows[0]["seed"] == 11
        and rows[0]["split"] == "train"
    )
    assert rows[1] == builtin[1] and "1 candidate(s) kept their built-in" in notes[-1]
    same, notes = llm_candidates(builtin, None, SandboxConfig())
    assert same == builtin and "built-in library" in notes[0]


def test_writer_prompt_carries_spec_patterns_and_a_builtin_example():
    from clawloop.generators.llm_writer import example_for

    example = example_for(SPEC)
    assert "GENERATOR" in example and "def build" in example and '"apiculture"' not in example
    guidance = {
        "patterns": {"domain_calculation": "- bad_edit (x3): rounding half up. rounded 2.45 down"}
    }
    box = ScriptedSandbox([], [])
    with ScriptedWriter(
        [fenced(example), fenced(GOOD)]
    ) as srv:  # a verbatim copy of the example first
        results, _ = write_generators(
            [SPEC],
            None,
            SandboxConfig(),
            guidance=guidance,
            chat_fn=_chat(srv),
            forge_fn=box.forge,
            verify_fn=box.verify,
        )
    prompt = srv.requests[0]["messages"][1]["content"]
    assert '"dirtiness": 0, "output_format": "json"' in prompt and "rounding half up" in prompt
    assert example.strip() in prompt
    # the copy is refused on the host (its GENERATOR names the example's domain) and repaired
    assert [a.stage for a in results[0].attempts] == ["static", "ok"] and box.forged_codes == [GOOD]
    assert "domain=" in srv.requests[1]["messages"][-1]["content"]
