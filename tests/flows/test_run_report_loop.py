"""`clawloop report` and `clawloop export` on a real K=2 run: tests/doubles/k2_loop.py's loop (the
cheapest run that trains: user generators, bubblewrap sandboxes, a scripted policy over HTTP that
passes one attempt in two, SFT + GRPO on the tiny model, diagnose). The report's PNG is a PNG, its
markdown has one row per iteration with the numbers in the manifests; the run's trajectories and
tasks export and load with `datasets`. Slow: about a minute on 2 shared cores.
"""

from __future__ import annotations

import io
import json
import shutil

import pytest
from doubles.k2_loop import run_k2
from PIL import Image

from clawloop.flows.cli import main
from clawloop.flows.pipeline import STAGES
from clawloop.storage import artifacts
from clawloop.storage.manifest import read_manifest

pytestmark = pytest.mark.slow

RUN = "reported"


def md_rows(md: str) -> list[list[str]]:
    lines = md.split("## Per iteration", 1)[1].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[start + 2 : end]]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_report_and_exports_of_a_k2_run(tmp_path, capsys):
    from datasets import load_dataset

    root = run_k2(tmp_path, RUN, text_tool_calls=True).root
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
