"""`clawloop report` and `clawloop export` on a real K=2 run: the loop of test_loop_trains.py (the
cheapest run that trains: user generators, bubblewrap sandboxes, a scripted policy over HTTP that
passes one attempt in two, SFT + GRPO on the tiny model, diagnose). The report's PNG is a PNG, its
markdown has one row per iteration with the numbers in the manifests; the run's trajectories and
tasks export and load with `datasets`. Slow: about a minute on 2 shared cores.
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from PIL import Image

from clawloop.flows import runs
from clawloop.flows.cli import main
from clawloop.flows.pipeline import STAGES
from clawloop.storage import artifacts
from clawloop.storage.manifest import read_manifest
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.training.tiny_model import ensure_tiny_model

pytestmark = pytest.mark.slow

_spec = importlib.util.spec_from_file_location(
    "loop_trains", Path(__file__).with_name("test_loop_trains.py")
)
loop = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = loop  # its dataclasses look their module up there
_spec.loader.exec_module(loop)

RUN = "reported"


def run_k2(tmp_path: Path) -> Path:
    from doubles.fake_openai import FakeOpenAI

    gens = tmp_path / "gens"
    gens.mkdir()
    for cap, dom in loop.GENERATORS:
        (gens / f"{cap}_{dom}.py").write_text(loop.GENERATOR.format(cap=cap, domain=dom))
    base = ensure_tiny_model()
    root = tmp_path / "runs"
    policy = loop.HalfSolvingPolicy(root / RUN, tmp_path / "policy-tasks")
    served = lambda: loop.newest_checkpoint(root / RUN, str(base))  # noqa: E731
    with FakeOpenAI(
        "routed", router=policy, model=loop.MODEL, served_root=served, text_tool_calls=True
    ) as fake:
        cfg = parse_config(
            {
                "iterations": 2,
                "storage": {"root": str(root)},
                "sandbox": {"backend": "bwrap"},
                "llm": {
                    "base_url": fake.base_url,
                    "model": loop.MODEL,
                    "api_key_env": "",
                    "reload": "restart",
                },
                "synthesize": {
                    "builtin": False,
                    "generator_paths": [str(gens)],
                    "n_train": 3,
                    "n_eval": 1,
                    "eval_fraction": 0.25,
                },
                "rollout": {"n": 2, "band": [1, 1], "max_turns": 8, "workers": 2},
                "train": {
                    "base_model": str(base),
                    "phases": "sft+grpo",
                    "sft_max_steps": 1,
                    "grpo_max_steps": 1,
                    "max_seq_len": 4096,
                    "per_device_batch_size": 2,
                },
                "diagnose": {"embedder": "hashed", "summary_attempts": 1},
            }
        )
        out = runs.run_loop(cfg, RUN, STAGES, thread_mapper(False))
    assert out.ok, [(o.iteration, o.stage, o.status, o.error[:800]) for o in out.outcomes]
    return root


def md_rows(md: str) -> list[list[str]]:
    lines = md.split("## Per iteration", 1)[1].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[start + 2 : end]]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_report_and_exports_of_a_k2_run(tmp_path, capsys):
    from datasets import load_dataset

    root = run_k2(tmp_path)
    capsys.readouterr()
    assert main(["report", "--run", RUN, "--root", str(root)]) == 0
    assert "held-out pass rate per capability" in capsys.readouterr().out
    png = (root / RUN / "report.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(png)) as img:
        assert img.format == "PNG" and img.size[0] > 0
    md = (root / RUN / "report.md").read_text()
    rows = md_rows(md)
    assert [r[0] for r in rows] == ["1", "2"]
    for row in rows:
        k = int(row[0])
        m = {s.name: read_manifest(str(root / RUN / f"iter-{k}" / s.name)) for s in STAGES}
        ro = m["rollout"].summary
        metrics = artifacts.read_table(str(root / RUN / f"iter-{k}" / "train"), "metrics")
        rates = artifacts.read_table(str(root / RUN / f"iter-{k}" / "diagnose"), "pass_rates")
        loss = {p: metrics.loc[metrics["phase"] == p, "loss"] for p in ("sft", "grpo")}
        sft, grpo = (f"{v.mean():.4f}" if len(v) else "-" for v in loss.values())
        held = rates["n_passed"].sum() / rates["n_episodes"].sum()
        assert row == [
            str(k),
            str(m["synthesize"].rows["candidates.parquet"]),
            str(m["forge"].summary["forged"]),
            str(m["verify"].summary["kept"]),
            str(m["verify"].summary["kept_train"]),
            str(ro["tasks"]),
            str(ro["kept_tasks"]),
            f"{100 * ro['kept_tasks'] / ro['tasks']:.1f}%",
            f"{ro['passed']}/{ro['episodes']}",
            f"{m['train'].summary['status']} ({m['train'].summary['steps']})",
            sft,
            grpo,
            f"{100 * held:.1f}%",
        ], row
        assert 0 < ro["kept_tasks"] < ro["tasks"] and ro["passed"] > 0

    # the real run's episodes export and load; their messages are the recorded ones
    out = tmp_path / "traj"
    assert (
        main(["export", "trajectories", "--run", RUN, "--root", str(root), "--out", str(out)]) == 0
    )
    data = load_dataset(str(out))
    traj = [
        artifacts.read_table(str(root / RUN / f"iter-{k}" / "rollout"), "trajectories")
        for k in (1, 2)
    ]
    recorded = [r for t in traj for r in t.to_dict("records")]
    assert data["train"]["episode_id"] == [r["episode_id"] for r in recorded]
    assert data["train"]["passed"] == [bool(r["passed"]) for r in recorded]
    for got, r in zip(data["train"], recorded, strict=True):
        present = [{k: v for k, v in m.items() if v is not None} for m in got["messages"]]
        assert present == json.loads(r["messages_json"])
        assert json.loads(got["tools"]) == json.loads(r["tools_json"])
    assert len(data["test"]) == sum(
        read_manifest(str(root / RUN / f"iter-{k}" / "diagnose")).rows["eval_trajectories.parquet"]
        for k in (1, 2)
    )

    tasks = tmp_path / "tasks"
    assert main(["export", "tasks", "--run", RUN, "--root", str(root), "--out", str(tasks)]) == 0
    kept = sum(
        read_manifest(str(root / RUN / f"iter-{k}" / "verify")).summary["kept"] for k in (1, 2)
    )
    exported = load_dataset(str(tasks))
    assert sum(len(s) for s in exported.values()) == kept
