"""`clawloop export trajectories` / `export tasks`: a run's TRAJECTORIES rows come out in TRL's
conversational tool-calling shape, `datasets` loads them as they are, and one `SFTTrainer` step
runs on them with the tiny offline model; forged tasks come out as a Hub-layout dataset of
Harbor folders (tar.gz) with metadata columns.

The run is written by hand (run.json, committed rollout / diagnose / forge / verify stages) from
the training tests' fake episodes (tests/training/conftest.py), so nothing here needs a sandbox.
"""

from __future__ import annotations

import io
import json
import math
import shutil
import tarfile
import time
from pathlib import Path

import doubles.episodes as episodes
import pytest

from clawloop.flows.cli import main
from clawloop.harness.taskfolder.rows import import_folder
from clawloop.storage import artifacts, fs, schemas
from clawloop.training.tiny_model import ensure_tiny_model

RUN = "exp"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "tasks" / "hive_totals"


def commit(root: Path, k: int, stage: str, tables: dict) -> None:
    url = fs.stage_url(str(root), RUN, k, stage)
    files = [artifacts.write_table(url, n, rows, schema) for n, (schema, rows) in tables.items()]
    artifacts.commit_stage(
        url,
        stage=stage,
        iteration=k,
        run_id=RUN,
        inputs_hash="x",
        code_version="x",
        upstream={},
        files=files,
        started_at=time.time(),
    )


def with_reasoning(row: dict) -> dict:
    """The first assistant turn came with a reasoning parser's reasoning_content."""
    turns = json.loads(row["turns_json"])
    turns[0]["reasoning_content"] = "The file lists hives; read it first."
    return {**row, "turns_json": json.dumps(turns)}


@pytest.fixture
def run_root(tmp_path) -> Path:
    root = tmp_path / "runs"
    (root / RUN).mkdir(parents=True)
    (root / RUN / "run.json").write_text(json.dumps({"run_id": RUN, "config": {"iterations": 2}}))
    row = episodes.episode_row
    commit(
        root,
        1,
        "rollout",
        {
            "trajectories": (
                schemas.TRAJECTORIES,
                [
                    with_reasoning(row("t1", 0, 1.0)),
                    row("t1", 1, 0.5, variant=1),
                    row("t2", 0, 0.0, variant=2, end_reason="sandbox_error"),  # infra: left out
                ],
            )
        },
    )
    commit(
        root,
        1,
        "diagnose",
        {"eval_trajectories": (schemas.TRAJECTORIES, [row("e1", 0, 0.0, split="eval")])},
    )
    commit(
        root,
        2,
        "rollout",
        {"trajectories": (schemas.TRAJECTORIES, [row("t3", 0, 1.0, variant=3, policy_id="ck1")])},
    )
    return root


def export(*argv: str) -> int:
    return main(["export", *argv])


def test_trajectories_load_with_datasets_and_train_one_sftrainer_step(run_root, tmp_path, capsys):
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    out = tmp_path / "traj"
    assert export("trajectories", "--run", RUN, "--root", str(run_root), "--out", str(out)) == 0
    assert "1 infrastructure-fault episodes left out" in capsys.readouterr().out
    assert "# clawloop trajectories: exp" in (out / "README.md").read_text()
    data = load_dataset(str(out))
    assert set(data) == {"train", "test"}
    train, test = data["train"], data["test"]
    assert train["episode_id"] == ["t1-0", "t1-1", "t3-0"]  # the sandbox_error episode left out
    assert test["episode_id"] == ["e1-0"] and test["stage"] == ["diagnose"]
    assert train["iteration"] == [1, 1, 2] and train["stage"] == ["rollout"] * 3
    assert train["reward"] == [1.0, 0.5, 1.0] and train["passed"] == [True, False, True]
    assert train["policy"] == ["tiny", "tiny", "ck1"]
    assert set(train["task_id"]) == {"t1", "t3"} and set(train["capability"]) == {"reconciliation"}
    assert json.loads(train[0]["tools"]) == episodes.TOOLS

    # the messages are the record's, key for key (absent keys read back as None)
    for got, variant in zip(train["messages"], (0, 1, 3), strict=True):
        present = [{k: v for k, v in m.items() if v is not None} for m in got]
        assert [{k: v for k, v in m.items() if k != "reasoning_content"} for m in present] == (
            episodes.tool_messages(variant)
        )
    first = train[0]["messages"]
    assert first[2]["reasoning_content"] == "The file lists hives; read it first."
    assert first[2]["tool_calls"][0]["function"]["name"] == "bash"
    assert first[3]["role"] == "tool" and first[3]["tool_call_id"] == "c1"

    # one SFTTrainer step on the exported rows as they are (tools column and all)
    model = ensure_tiny_model()
    tok = AutoTokenizer.from_pretrained(str(model))
    args = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        max_steps=1,
        per_device_train_batch_size=2,
        max_length=4096,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        use_cpu=True,
    )
    trainer = SFTTrainer(model=str(model), args=args, train_dataset=train, processing_class=tok)
    text = tok.decode(trainer.train_dataset[0]["input_ids"])
    # the chat template saw the tool schemas, the tool calls, the tool output and the reasoning
    assert "Run a shell command in /workspace." in text
    assert '<tool_call>\n{"name": "bash", "arguments": {"command": "cat data/hives.csv"}}' in text
    assert "<tool_response>\nhive,weight\nA,10\nB,32\n\n</tool_response>" in text
    assert "<think>\nThe file lists hives; read it first.\n</think>" in text
    trainer.train()
    assert trainer.state.global_step == 1
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 1 and math.isfinite(losses[0]) and losses[0] > 0


def test_jsonl_one_object_per_line_passed_only_and_one_iteration(run_root, tmp_path):
    from datasets import load_dataset

    out = tmp_path / "jl"
    argv = ["--run", RUN, "--root", str(run_root), "--out", str(out), "--format", "jsonl"]
    assert export("trajectories", *argv, "--iteration", "1", "--passed-only") == 0
    files = sorted(p.name for p in (out / "data").iterdir())
    assert files == ["train-00000-of-00001.jsonl"]  # the eval episode failed
    lines = (out / "data" / files[0]).read_text().splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert obj["episode_id"] == "t1-0" and obj["passed"] is True and obj["iteration"] == 1
    want = episodes.tool_messages(0)
    want[2]["reasoning_content"] = "The file lists hives; read it first."
    assert obj["messages"] == want  # plain JSON: only the keys each message has
    assert json.loads(obj["tools"]) == episodes.TOOLS
    loaded = load_dataset(str(out), split="train")
    assert loaded["episode_id"] == ["t1-0"] and loaded["messages"][0][0]["role"] == "system"


def test_errors_are_one_line(run_root, tmp_path, capsys):
    out = tmp_path / "o"
    base = ["--root", str(run_root), "--out", str(out)]
    assert export("trajectories", "--run", "nope", *base) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert export("trajectories", "--run", RUN, "--iteration", "5", *base) == 2
    assert "has no iteration 5 (it has [1, 2])" in capsys.readouterr().err
    assert export("trajectories", "--run", RUN, "--iteration", "2", "--passed-only", *base) == 0
    capsys.readouterr()
    assert export("trajectories", "--run", RUN, *base) == 2  # out is no longer empty
    assert "not an empty folder" in capsys.readouterr().err
    assert export("tasks", "--run", RUN, "--root", str(run_root), "--out", str(tmp_path / "t")) == 2
    assert "has no kept tasks" in capsys.readouterr().err


def task_rows(tmp_path: Path) -> list[dict]:
    """Two forged tasks from the fixture folder: a train one and an eval one."""
    rows = []
    for task_id, split in (("hive-a", "train"), ("hive-b", "eval")):
        d = tmp_path / task_id
        shutil.copytree(FIXTURE, d)
        toml = (d / "task.toml").read_text()
        toml = toml.replace('name = "fixture-hive-totals"', f'name = "clawloop/{task_id}"')
        toml = toml.replace('task_id = "fixture-hive-totals"\n', "")
        extra = f'split = "{split}"\ngenerator_sha256 = "{"ab" * 32}"\norigin = "fixture"'
        (d / "task.toml").write_text(toml.replace('origin = "fixture"', extra))
        rows.append(import_folder(d))
    return rows


def test_tasks_as_a_hub_dataset_of_harbor_folders(run_root, tmp_path):
    from datasets import load_dataset

    forged = task_rows(tmp_path)
    commit(run_root, 1, "forge", {"tasks": (schemas.FORGED, forged)})
    verdicts = [
        {"task_id": r["task_id"], "kept": r["task_id"] == "hive-a", "reason": why, "capability": "x",
         "domain": "y", "split": r["split"]}
        for r, why in zip(forged, ("all checks passed", "noop passed"), strict=True)
    ]  # fmt: skip
    commit(run_root, 1, "verify", {"verdicts": (schemas.VERDICTS, verdicts)})

    out = tmp_path / "tasks"
    argv = ["--run", RUN, "--root", str(run_root), "--format", "hf", "--org", "acme"]
    assert export("tasks", *argv, "--out", str(out)) == 0
    data = load_dataset(str(out))
    assert set(data) == {"train"}  # the eval task was dropped by verify
    (row,) = data["train"]
    assert row["path"] == "hive-a" and row["name"] == "acme/hive-a" and row["kept"] is True
    assert (row["capability"], row["domain"], row["split"]) == (
        "aggregation",
        "apiculture",
        "train",
    )
    with tarfile.open(fileobj=io.BytesIO(row["task_binary"]), mode="r:gz") as tar:
        names = set(tar.getnames())
        toml = tar.extractfile("task.toml").read().decode()
    assert {"task.toml", "instruction.md", "tests/test.sh"} <= names
    assert 'name = "acme/hive-a"' in toml  # as `export harbor` writes it: Harbor's org/name

    both = tmp_path / "both"
    assert export("tasks", *argv, "--out", str(both), "--include-dropped") == 0
    data = load_dataset(str(both))
    assert data["test"]["path"] == ["hive-b"] and data["test"]["kept"] == [False]
    assert data["test"]["verify_reason"] == ["noop passed"]


def test_two_exports_of_the_same_name_load_their_own_rows(run_root, tmp_path):
    """`datasets` caches a local folder by its card when the card names its files: the export's
    card does not, so a second export under the same folder name is read, not the first's cache."""
    from datasets import load_dataset

    base = ["trajectories", "--run", RUN, "--root", str(run_root)]
    for sub, it in (("a", "1"), ("b", "2")):
        assert export(*base, "--iteration", it, "--out", str(tmp_path / sub / "traj")) == 0
    first = load_dataset(str(tmp_path / "a" / "traj"), split="train")
    second = load_dataset(str(tmp_path / "b" / "traj"), split="train")
    assert first["episode_id"] == ["t1-0", "t1-1"] and second["episode_id"] == ["t3-0"]


def test_a_failed_export_leaves_no_half_written_dataset(run_root, tmp_path, monkeypatch, capsys):
    from clawloop.flows.cli import export as export_mod

    real = export_mod._split_file

    def one_then_full(out, split, ext):  # the first split is written, then the disk is "full"
        if (out / "data").exists() and any((out / "data").iterdir()):
            raise OSError(28, "No space left on device")
        return real(out, split, ext)

    monkeypatch.setattr(export_mod, "_split_file", one_then_full)
    out = tmp_path / "ds"
    assert export("trajectories", "--run", RUN, "--root", str(run_root), "--out", str(out)) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
