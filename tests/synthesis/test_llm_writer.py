"""LLM-written generators: a scripted writer over real HTTP. Synthesize only writes and
host-checks them (nothing runs, no sandbox opens); forge and verify judge them later, and their
errors come back through `repair_candidates`."""

from __future__ import annotations

import hashlib
import textwrap

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.generators.candidates import task_id_for
from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.synthesis.llm_prompts import example_for
from clawloop.synthesis.llm_writer import (
    WriterConfig,
    WriterError,
    WriterSpec,
    extract_code,
    forge_failure,
    normalized_hash,
    repair_candidates,
    repair_count,
    static_check,
    verify_failure,
    write_candidates,
    writer_chat,
)

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


def fenced(code: str, prose: str = "Here is the generator.") -> str:
    return f"{prose}\n```python\n{code}```\n"


def sha(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class ScriptedWriter(FakeOpenAI):
    """FakeOpenAI answering its i-th request with replies[i] (the last one repeats)."""

    def __init__(self, replies: list[str]) -> None:
        super().__init__("chatty")
        self.replies = replies

    def respond(self, body: dict) -> dict:
        resp = super().respond(body)
        step = min(len(self.requests) - 1, len(self.replies) - 1)
        resp["choices"][0]["message"] = {"role": "assistant", "content": self.replies[step]}
        return resp


def _chat(srv: FakeOpenAI):
    return endpoint_chat(LLMEndpoint(srv.base_url, "writer", max_retries=0))


def builtin_row(seed: int = 11, split: str = "train", **over) -> dict:
    row = {
        "task_id": f"builtin-{seed}",
        "generator_code": f"# builtin {seed}\n",
        "generator_sha256": "b" * 64,
        "seed": seed,
        "capability": "domain_calculation",
        "domain": "apiculture",
        "multihop": 0,
        "dirtiness": 0,
        "output_format": "json",
        "split": split,
        "origin": "builtin",
    }
    return {**row, **over}


def llm_row(code: str = GOOD, seed: int = 11, origin: str = "llm:writer") -> dict:
    return builtin_row(
        seed,
        generator_code=code,
        generator_sha256=sha(code),
        task_id=task_id_for(sha(code), seed),
        origin=origin,
    )


# ---- pure helpers -------------------------------------------------------------------------------


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


def test_repair_count_and_failure_texts():
    assert repair_count("llm:writer") == 0 and repair_count("builtin") == 0
    assert repair_count("llm:qwen3:8b:repair:2") == 2 and repair_count("user:x:repair:2") == 0
    forged = {"status": "failed", "error": "build() timed out after 5s", "error_kind": "timeout"}
    assert forge_failure(forged) == "[timeout] build() timed out after 5s"
    checks = [
        {"check": "oracle", "passed": True, "reason": "ok"},
        {"check": "noop", "passed": False, "reason": "untouched workspace passes"},
    ]
    text = verify_failure({"kept": False, "reason": "noop: false positive"}, checks)
    assert text == "noop: false positive\n- noop: untouched workspace passes"


# ---- write_candidates: synthesize's first write, host checks only -------------------------------


def test_a_good_reply_becomes_an_llm_row_with_forges_sha_and_task_id():
    guidance = {
        "patterns": {"domain_calculation": "- bad_edit (x3): rounding half up. rounded 2.45 down"}
    }
    row = builtin_row(11, extra="kept")
    with ScriptedWriter([fenced(GOOD)]) as srv:
        rows, notes = write_candidates([row], _chat(srv), guidance, model="writer")
    assert len(srv.requests) == 1 and len(rows) == 1
    out = rows[0]
    assert out["origin"] == "llm:writer" and out["generator_code"] == GOOD
    assert out["generator_sha256"] == sha(GOOD)
    assert out["task_id"] == task_id_for(sha(GOOD), 11) != row["task_id"]
    assert (out["seed"], out["split"], out["extra"]) == (11, "train", "kept")
    assert "1/1" in notes[0]
    prompt = srv.requests[0]["messages"][1]["content"]
    assert '"dirtiness": 0, "output_format": "json"' in prompt and "rounding half up" in prompt
    assert example_for(SPEC).strip() in prompt


def test_a_malformed_reply_gets_its_error_back_and_the_next_one_is_written():
    broken = GOOD.replace("def solve(workspace):", "def solve(workspace)")
    with ScriptedWriter([fenced(broken), fenced(GOOD)]) as srv:
        rows, _ = write_candidates([builtin_row()], _chat(srv), model="writer")
    assert len(srv.requests) == 2
    assert rows[0]["origin"] == "llm:writer" and rows[0]["generator_code"] == GOOD
    second = srv.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": fenced(broken)}
    assert "fails a static check" in second[-1]["content"]
    assert "not valid Python" in second[-1]["content"]


def test_each_host_check_is_fed_back_in_turn():
    replies = [
        "I would write a generator that totals hives.",  # no code
        fenced(GOOD.replace('"dirtiness": 0', '"dirtiness": 3')),  # wrong metadata
        fenced("import numpy\n" + GOOD),  # not stdlib
        fenced(GOOD),
    ]
    with ScriptedWriter(replies) as srv:
        rows, _ = write_candidates(
            [builtin_row()], _chat(srv), cfg=WriterConfig(max_attempts=4), model="w"
        )
    assert rows[0]["origin"] == "llm:w" and len(srv.requests) == 4
    fed_back = [r["messages"][-1]["content"] for r in srv.requests[1:]]
    assert "could not find usable Python code" in fed_back[0]
    assert "dirtiness=3" in fed_back[1] and "numpy" in fed_back[2]


def test_a_writer_that_never_gets_it_right_leaves_the_builtin_row_with_a_note():
    row = builtin_row()
    with ScriptedWriter([fenced("def build(seed):\n    return {\n")]) as srv:
        rows, notes = write_candidates([row], _chat(srv), cfg=WriterConfig(max_attempts=3))
    assert rows == [row] and len(srv.requests) == 3
    assert "0/1" in notes[0]
    assert "kept its built-in generator" in notes[1] and "static check failed on 3" in notes[1]


def test_duplicates_and_example_copies_keep_the_builtin_row():
    rows_in = [builtin_row(11), builtin_row(12, split="eval")]
    reformatted = GOOD.replace("import json\n", "import json  # out\n")
    with ScriptedWriter([fenced(GOOD), fenced(reformatted)]) as srv:
        rows, notes = write_candidates(rows_in, _chat(srv), model="w")
    assert rows[0]["origin"] == "llm:w" and rows[1] == rows_in[1]
    assert len(srv.requests) == 2 and any("duplicate" in n for n in notes)
    # a verbatim copy of the example is refused (its GENERATOR names another domain) and repaired
    with ScriptedWriter([fenced(example_for(SPEC)), fenced(GOOD)]) as srv:
        rows, _ = write_candidates([builtin_row()], _chat(srv), model="w")
    assert (
        rows[0]["generator_code"] == GOOD
        and "domain=" in srv.requests[1]["messages"][-1]["content"]
    )


def test_a_dead_writer_endpoint_keeps_the_builtin_rows():
    row = builtin_row()
    with FakeOpenAI("drop") as srv:
        rows, notes = write_candidates(
            [row, builtin_row(12)], writer_chat(LLMEndpoint(srv.base_url, "w", max_retries=0))
        )
    assert rows == [row, builtin_row(12)] and all("writer endpoint error" in n for n in notes[1:])


def test_writer_chat_uses_the_writer_settings_and_names_the_model_in_origins():
    with ScriptedWriter([fenced(GOOD)]) as srv:
        chat = writer_chat(
            LLMEndpoint(srv.base_url, "w", max_retries=0), WriterConfig(max_tokens=123)
        )
        rows, _ = write_candidates([builtin_row()], chat)
        named, _ = write_candidates([builtin_row()], chat, model="other")
    body = srv.requests[0]
    assert body["model"] == "w" and body["max_tokens"] == 123 and body["temperature"] == 0.7
    assert rows[0]["origin"] == "llm:w" and named[0]["origin"] == "llm:other"


# ---- repair_candidates: forge/verify errors from the previous iteration -------------------------


def test_a_forge_failure_is_repaired_with_the_previous_code_and_the_error():
    v2 = GOOD.replace("1.5", "1.75")
    failed = llm_row(GOOD, seed=11)
    err = "[timeout] build() timed out after 5s (killed)"
    with ScriptedWriter([fenced(v2)]) as srv:
        rows, notes = repair_candidates([(failed, "forge", err)], _chat(srv), model="writer")
    assert len(srv.requests) == 1 and len(rows) == 1
    msgs = srv.requests[0]["messages"]
    assert msgs[-2]["role"] == "assistant" and GOOD in msgs[-2]["content"]
    assert "Building your generator in the sandbox failed" in msgs[-1]["content"]
    assert err in msgs[-1]["content"]
    out = rows[0]
    assert out["origin"] == "llm:writer:repair:1" and out["generator_code"] == v2
    assert out["generator_sha256"] == sha(v2) and out["task_id"] == task_id_for(sha(v2), 11)
    assert (out["seed"], out["split"]) == (11, "train") and "1/1" in notes[0]


def test_a_verify_repair_counts_the_lineage_and_refuses_unchanged_code():
    v3 = GOOD.replace("1.5", "2.25")
    failed = llm_row(GOOD, origin="llm:old-model:repair:2")
    same_with_comment = GOOD.replace("import csv", "import csv  # tables")
    with ScriptedWriter([fenced(same_with_comment), fenced(v3)]) as srv:
        rows, _ = repair_candidates(
            [(failed, "verify", "noop: false positive: untouched workspace passes")],
            _chat(srv),
            model="new-model",
        )
    assert (
        "Your generator built, but the forged task failed verification"
        in (srv.requests[0]["messages"][-1]["content"])
    )
    again = srv.requests[1]["messages"][-1]["content"]
    assert "same code as a previous attempt" in again and "false positive" in again
    assert [r["origin"] for r in rows] == ["llm:new-model:repair:3"]
    assert rows[0]["generator_code"] == v3


def test_a_lineage_with_three_repairs_is_dropped_without_asking_the_writer():
    tired = llm_row(GOOD, origin="llm:writer:repair:3")
    builtin = builtin_row()
    with ScriptedWriter([fenced(GOOD.replace("1.5", "1.25"))]) as srv:
        rows, notes = repair_candidates(
            [(tired, "verify", "oracle: wrong"), (builtin, "forge", "[crash] boom")], _chat(srv)
        )
        with pytest.raises(ValueError, match="repair stage"):
            repair_candidates([(llm_row(), "rollout", "x")], _chat(srv))
    assert rows == [] and srv.requests == []
    assert "after 3 repair(s)" in notes[1] and "not LLM-written" in notes[2]


def test_a_repair_that_stays_bad_is_dropped_with_a_note():
    with ScriptedWriter(["no code, sorry"]) as srv:
        rows, notes = repair_candidates(
            [(llm_row(), "forge", "[crash] ZeroDivisionError")],
            _chat(srv),
            cfg=WriterConfig(max_attempts=2),
        )
    assert rows == [] and len(srv.requests) == 2
    assert "dropped: repair 1 failed" in notes[1]


# ---- nothing is run on the host, no sandbox is opened -------------------------------------------


def test_writing_and_repairing_open_no_sandbox_and_run_no_code(monkeypatch, tmp_path):
    import clawloop.generators.forge as forge
    import clawloop.generators.verify as verify
    import clawloop.harness.sandbox.backend as backend

    def refuse(*_a, **_k):
        raise AssertionError("synthesize must not open a sandbox or forge/verify")

    monkeypatch.setattr(backend, "open_sandbox", refuse)
    monkeypatch.setattr(forge, "forge_candidate", refuse)
    monkeypatch.setattr(verify, "verify_task", refuse)
    canary = tmp_path / "ran"
    hostile = f"open({str(canary)!r}, 'w').write('x')\n" + GOOD
    with ScriptedWriter([fenced(hostile), fenced(hostile.replace("1.5", "1.75"))]) as srv:
        rows, _ = write_candidates([builtin_row()], _chat(srv), model="w")
        fixed, _ = repair_candidates([(rows[0], "forge", "[crash] x")], _chat(srv), model="w")
    assert rows[0]["origin"] == "llm:w" and fixed[0]["origin"] == "llm:w:repair:1"
    assert not canary.exists()
