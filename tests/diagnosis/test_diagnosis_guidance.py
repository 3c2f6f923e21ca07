"""Clustering, pass rates and guidance (diagnosis/guidance.py), and the report
(diagnosis/report.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from clawloop.diagnosis.guidance import (
    MAX_LEVEL,
    ClusterConfig,
    GuidanceConfig,
    agglomerate,
    cluster_summaries,
    compute_guidance,
    guidance_rows,
    hashed_bow_embedder,
    pass_rates,
)
from clawloop.diagnosis.report import pass_rate_table, plot_pass_rates, render_report
from clawloop.storage.schemas import CLUSTERS, FAILURE_SUMMARIES, GUIDANCE, PASS_RATES


def _rate(cap, passed, n, it=1):
    return {
        "iteration": it,
        "capability": cap,
        "n_episodes": n,
        "n_passed": passed,
        "n_tasks": n,
        "pass_rate": passed / n,
    }


def _summary(eid, cap, rc, missing, evidence, tid=None):
    return {
        "episode_id": eid,
        "task_id": tid or f"task-{eid}",
        "capability": cap,
        "iteration": 1,
        "failure_step": 1,
        "root_cause": rc,
        "missing_capability": missing,
        "evidence": evidence,
        "fallback": False,
        "fallback_reason": "",
        "attempts": 1,
        "summarizer": "p",
        "cluster_id": "",
    }


def test_weights_shift_toward_the_capability_that_failed_most():
    prev = {"capability_weights": {"audit": 1 / 3, "merge": 1 / 3, "reconciliation": 1 / 3}}
    rates = [_rate("audit", 9, 10), _rate("merge", 5, 10), _rate("reconciliation", 1, 10)]
    g = compute_guidance(rates, [], prev, GuidanceConfig(), iteration=1)
    w = g["capability_weights"]
    assert math.isclose(sum(w.values()), 1.0)
    assert max(w, key=w.get) == "reconciliation"
    assert w["reconciliation"] > prev["capability_weights"]["reconciliation"] > w["audit"]
    assert w["reconciliation"] > w["merge"] > w["audit"]
    assert g["for_iteration"] == 2


def test_weight_floor_keeps_mastered_capabilities_alive_and_unseen_get_neutral_rate():
    cfg = GuidanceConfig(weight_floor=0.1)
    rates = [_rate("audit", 10, 10), _rate("merge", 0, 10)]
    g = compute_guidance(rates, [], {"capability_weights": {"geo": 0.5}}, cfg, iteration=1)
    w = g["capability_weights"]
    assert math.isclose(w["audit"] / w["merge"], 0.1)
    assert math.isclose(w["geo"] / w["merge"], cfg.unseen_failure_rate)
    assert g["pass_rates"]["geo"] is None and math.isnan(guidance_rows(g)[1]["pass_rate"])
    g2 = compute_guidance(rates, [], None, cfg, iteration=1, capabilities=["audit", "merge", "geo"])
    assert g2["capability_weights"] == w


@pytest.mark.parametrize("start", [(0, 0), (1, 0), (0, 2), (2, 3), (3, 3)])
def test_difficulty_rises_at_most_one_level_and_only_when_mastered(start):
    prev = {
        "difficulty": {
            "audit": {"multihop": start[0], "dirtiness": start[1]},
            "merge": {"multihop": start[0], "dirtiness": start[1]},
        }
    }
    rates = [_rate("audit", 9, 10), _rate("merge", 3, 10)]
    g = compute_guidance(rates, [], prev, GuidanceConfig(mastery_threshold=0.8), iteration=1)
    d = g["difficulty"]["audit"]
    rise = (d["multihop"] - start[0], d["dirtiness"] - start[1])
    assert min(rise) >= 0 and sum(rise) == (0 if start == (MAX_LEVEL, MAX_LEVEL) else 1)
    assert max(d.values()) <= MAX_LEVEL
    assert g["difficulty"]["merge"] == {"multihop": start[0], "dirtiness": start[1]}
    assert g["mastered"] == ["audit"]


def test_difficulty_over_iterations_never_jumps():
    g = None
    levels = []
    for it in range(1, 8):
        g = compute_guidance([_rate("audit", 10, 10, it)], [], g, GuidanceConfig(), iteration=it)
        levels.append(g["difficulty"]["audit"]["multihop"] + g["difficulty"]["audit"]["dirtiness"])
    assert levels == [1, 2, 3, 4, 5, 6, 6]


def test_one_lucky_episode_is_not_mastery():
    g = compute_guidance(
        [_rate("audit", 1, 1)], [], None, GuidanceConfig(min_episodes_for_mastery=2), iteration=1
    )
    assert g["mastered"] == [] and g["difficulty"]["audit"] == {"multihop": 0, "dirtiness": 0}


def test_agglomerate_separates_far_points_and_merges_near_ones():
    emb = np.array([[1, 0], [0.99, 0.14], [0, 1], [0.1, 0.99], [-1, 0]], dtype=float)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    assert agglomerate(emb, 0.2) == [0, 0, 1, 1, 2]
    assert agglomerate(emb, 5.0) == [0, 0, 0, 0, 0]
    assert agglomerate(emb[:0], 0.2) == []


def test_cluster_summaries_groups_by_capability_and_root_cause_then_text():
    s = [
        _summary(
            "1",
            "audit",
            "bad_edit",
            "rounding half up",
            "rounded 2.45 to 2.4 instead of 2.5",
            tid="tA",
        ),
        _summary(
            "2",
            "audit",
            "bad_edit",
            "rounding half up",
            "rounded 3.45 to 3.4 instead of 3.5",
            tid="tB",
        ),
        _summary(
            "3",
            "audit",
            "bad_edit",
            "joining sources by key",
            "joined hive logs on name not hive id",
            tid="tC",
        ),
        _summary(
            "4",
            "audit",
            "early_stop",
            "rounding half up",
            "stopped before writing output",
            tid="tD",
        ),
        _summary(
            "5",
            "merge",
            "bad_edit",
            "rounding half up",
            "rounded 2.45 to 2.4 instead of 2.5",
            tid="tE",
        ),
    ]
    out, clusters = cluster_summaries(
        s, hashed_bow_embedder(), iteration=1, cfg=ClusterConfig(distance_threshold=0.5)
    )
    ids = [o["cluster_id"] for o in out]
    assert ids[0] == ids[1] != ids[2]
    assert len(set(ids)) == 4 and all(
        i.split("/")[0] == o["capability"] for i, o in zip(ids, out, strict=False)
    )
    top = clusters[0]
    assert top["size"] == 2 and json.loads(top["example_task_ids_json"]) == ["tA", "tB"]
    assert math.isclose(top["share"], 2 / 4) and "rounding half up" in top["pattern"]
    pa.Table.from_pylist(out, schema=FAILURE_SUMMARIES)
    pa.Table.from_pylist(clusters, schema=CLUSTERS)


def test_pattern_text_reaches_guidance():
    s = [
        _summary(str(i), "audit", "bad_edit", "rounding half up", f"rounded {i}.45 down")
        for i in range(3)
    ]
    _, clusters = cluster_summaries(s, hashed_bow_embedder(), iteration=1)
    g = compute_guidance([_rate("audit", 0, 3)], clusters, None, GuidanceConfig(), iteration=1)
    assert "bad_edit (x3)" in g["patterns"]["audit"] and "rounding half up" in g["pattern_text"]
    pa.Table.from_pylist(guidance_rows(g), schema=GUIDANCE)


def test_pass_rates_table_plot_and_report(tmp_path):
    traj = pd.DataFrame(
        {
            "task_id": ["a", "a", "b", "c"],
            "capability": ["audit", "audit", "audit", "merge"],
            "passed": [True, False, False, True],
        }
    )
    rows = pass_rates(traj, iteration=2)
    assert rows[0] == {
        "iteration": 2,
        "capability": "audit",
        "n_episodes": 3,
        "n_passed": 1,
        "n_tasks": 2,
        "pass_rate": 1 / 3,
    }
    pa.Table.from_pylist(rows, schema=PASS_RATES)
    all_rates = pd.DataFrame([_rate("audit", 1, 2, it=1), _rate("merge", 0, 2, it=1), *rows])
    table = pass_rate_table(all_rates)
    assert "| audit | 0.50 (1/2) | 0.33 (1/3) |" in table
    png = plot_pass_rates(all_rates, tmp_path / "plot.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    g = compute_guidance(rows, [], None, GuidanceConfig(), iteration=2)
    md = render_report(2, all_rates, [], [], g, "plot.png", notes=["heuristic embedder"])
    assert "## Guidance for iteration 3" in md and "![pass rate per capability](plot.png)" in md
    assert "> heuristic embedder" in md


@pytest.mark.slow
def test_minilm_embeddings_cluster_paraphrases():
    from clawloop.diagnosis.guidance import minilm_embedder

    embed = minilm_embedder()
    emb = embed(
        [
            "stopped before writing the output csv file",
            "stopped early without writing the output file",
            "joined the two files on the wrong key column",
            "rounded 2.45 down instead of half up",
        ]
    )
    assert agglomerate(emb, ClusterConfig().distance_threshold) == [0, 0, 1, 2]


# ---- the stage function -------------------------------------------------------------------------


def _episode(eid, cap, passed, messages, tid=None):
    return {
        "episode_id": eid,
        "task_id": tid or f"task-{eid}",
        "capability": cap,
        "split": "eval",
        "attempt": 0,
        "policy_id": "p",
        "messages_json": json.dumps(messages),
        "tools_json": "[]",
        "turns_json": "[]",
        "reward": 1.0 if passed else 0.0,
        "passed": passed,
        "checks_json": "[]",
        "end_reason": "finished",
        "n_turns": 1,
        "n_tool_calls": 0,
        "duration_s": 1.0,
        "error": "",
    }


CHATTY = [
    {"role": "user", "content": "Merge the update documents into output/records.json"},
    {"role": "assistant", "content": "Done, the records are merged."},
]


def _eval_frame():
    rows = [_episode(f"m{i}", "multi_document_merge", False, CHATTY) for i in range(4)]
    rows += [_episode("m4", "multi_document_merge", True, CHATTY)]
    rows += [_episode(f"a{i}", "anomaly_flagging", True, CHATTY) for i in range(4)]
    rows += [_episode("a4", "anomaly_flagging", False, CHATTY)]
    return pd.DataFrame(rows)


def test_diagnose_stage_writes_report_plot_guidance_and_valid_tables(tmp_path):
    from clawloop.diagnosis.diagnose import DiagnoseConfig, diagnose_stage
    from clawloop.storage.artifacts import write_table

    caps = ["anomaly_flagging", "multi_document_merge", "reconciliation"]
    prev_rates = pd.DataFrame(
        [_rate("anomaly_flagging", 1, 2, it=1), _rate("multi_document_merge", 1, 2, it=1)]
    )
    prev_guidance = {
        "capability_weights": {c: 1 / 3 for c in caps},
        "difficulty": {"anomaly_flagging": {"multihop": 1, "dirtiness": 0}},
    }
    res = diagnose_stage(
        _eval_frame(),
        prev_rates,
        DiagnoseConfig(embedder="hashed"),
        None,
        tmp_path,
        iteration=2,
        prev_guidance=prev_guidance,
        capabilities=caps,
    )
    w = res.guidance["capability_weights"]
    assert w["multi_document_merge"] > 1 / 3 > w["anomaly_flagging"]
    assert res.guidance["difficulty"]["anomaly_flagging"] == {"multihop": 1, "dirtiness": 1}
    assert res.guidance["difficulty"]["multi_document_merge"] == {"multihop": 0, "dirtiness": 0}
    assert len(res.summaries) == 5 and all(
        s["fallback"] and s["root_cause"] == "early_stop" for s in res.summaries
    )
    merge = [c for c in res.clusters if c["capability"] == "multi_document_merge"]
    assert len(merge) == 1 and merge[0]["size"] == 4
    assert "early_stop (x4)" in res.guidance["patterns"]["multi_document_merge"]
    assert json.loads(res.guidance_path.read_text()) == res.guidance
    md = res.report_path.read_text()
    assert "| multi_document_merge | 0.50 (1/2) | 0.20 (1/5) |" in md and "no policy endpoint" in md
    assert res.plot_path.read_bytes()[:4] == b"\x89PNG"
    for name, (schema, rows) in res.tables().items():
        write_table(str(tmp_path), name, rows, schema)
    back = pd.read_parquet(tmp_path / "pass_rates.parquet")
    assert sorted(back["capability"]) == ["anomaly_flagging", "multi_document_merge"]


def test_diagnose_leaves_infrastructure_failures_out_of_rates_and_summaries(tmp_path):
    from clawloop.diagnosis.diagnose import DiagnoseConfig, diagnose_stage

    rows = _eval_frame().to_dict("records")
    infra = [
        dict(_episode(f"x{i}", "anomaly_flagging", False, CHATTY), end_reason=reason)
        for i, reason in enumerate(["server_error", "sandbox_error", "harness_error"])
    ]
    res = diagnose_stage(
        pd.DataFrame(rows + infra),
        None,
        DiagnoseConfig(embedder="hashed"),
        None,
        tmp_path,
        iteration=1,
        capabilities=["anomaly_flagging", "multi_document_merge"],
    )
    anomaly = next(r for r in res.pass_rates if r["capability"] == "anomaly_flagging")
    assert (anomaly["n_episodes"], anomaly["n_passed"]) == (5, 4)
    assert len(res.summaries) == 5  # the policy's own failures only
    assert res.summary["infra_excluded"] == 3 and res.summary["eval_episodes"] == 10
    assert any("3 eval episodes ended in infrastructure faults" in n for n in res.notes)
    assert "infrastructure faults" in res.report_path.read_text()


def test_diagnose_stage_with_no_eval_episodes_keeps_going(tmp_path):
    from clawloop.diagnosis.diagnose import DiagnoseConfig, diagnose_stage

    empty = pd.DataFrame(columns=list(FAILURE_SUMMARIES.names))
    res = diagnose_stage(
        empty,
        None,
        DiagnoseConfig(embedder="hashed"),
        None,
        tmp_path,
        iteration=1,
        capabilities=["audit"],
    )
    assert (
        res.summaries == []
        and res.clusters == []
        and res.guidance["capability_weights"] == {"audit": 1.0}
    )
    assert "no eval episodes" in res.report_path.read_text()


def test_diagnose_stage_summaries_come_from_the_policy_over_http(tmp_path):
    from doubles.fake_openai import FakeOpenAI

    from clawloop.diagnosis.diagnose import DiagnoseConfig, diagnose_stage
    from clawloop.harness.llm import LLMEndpoint

    answer = {
        "failure_step": 0,
        "root_cause": "task_misunderstanding",
        "missing_capability": "applying the precedence rule",
        "evidence": "claimed success without files",
    }

    class Policy(FakeOpenAI):
        def respond(self, body):
            resp = super().respond(body)
            # malformed first, valid once the validation error has been fed back
            first = not any(m.get("role") == "assistant" for m in body["messages"])
            resp["choices"][0]["message"] = {
                "role": "assistant",
                "content": "{oops" if first else json.dumps(answer),
            }
            return resp

    with Policy("chatty") as srv:
        res = diagnose_stage(
            _eval_frame(),
            None,
            DiagnoseConfig(embedder="hashed", workers=2),
            LLMEndpoint(srv.base_url, "tiny-policy", max_retries=0),
            tmp_path,
            iteration=1,
        )
    assert len(srv.requests) == 10
    assert all(
        not s["fallback"] and s["attempts"] == 2 and s["summarizer"] == "tiny-policy"
        for s in res.summaries
    )
    assert {c["root_cause"] for c in res.clusters} == {"task_misunderstanding"}
    assert "applying the precedence rule" in res.guidance["pattern_text"]


def test_guidance_shifts_the_next_synthesis_toward_the_weakest_capability(tmp_path):
    from collections import Counter

    from clawloop.diagnosis.diagnose import DiagnoseConfig, diagnose_stage
    from clawloop.synthesis.config import SynthesizeConfig
    from clawloop.synthesis.synthesize import synthesize

    caps = ["anomaly_flagging", "domain_calculation", "reconciliation"]
    scfg = SynthesizeConfig(n_train=60, n_eval=0, capabilities=caps)
    before, _ = synthesize(scfg, 0, 2, None)
    rows = [_episode(f"r{i}", "reconciliation", i == 0, CHATTY) for i in range(6)]
    rows += [_episode(f"a{i}", "anomaly_flagging", i < 5, CHATTY) for i in range(6)]
    rows += [_episode(f"d{i}", "domain_calculation", i < 3, CHATTY) for i in range(6)]
    res = diagnose_stage(
        pd.DataFrame(rows),
        None,
        DiagnoseConfig(embedder="hashed"),
        None,
        tmp_path,
        1,
        capabilities=caps,
    )
    after, summary = synthesize(scfg, 0, 2, res.guidance)
    n_before = Counter(r["capability"] for r in before)
    n_after = Counter(r["capability"] for r in after)
    print(
        "weights before: uniform",
        dict(n_before),
        "\nweights after:",
        res.guidance["capability_weights"],
        dict(n_after),
    )
    assert summary["guided"] and n_after["reconciliation"] > n_before["reconciliation"]
    assert n_after["reconciliation"] > n_after["domain_calculation"] > n_after["anomaly_flagging"]
    # anomaly_flagging was mastered (5/6): one level harder, in the candidates synthesize made
    assert {
        (r["multihop"], r["dirtiness"]) for r in after if r["capability"] == "anomaly_flagging"
    } == {(1, 0)}
    assert {
        (r["multihop"], r["dirtiness"]) for r in after if r["capability"] == "reconciliation"
    } == {(0, 0)}
