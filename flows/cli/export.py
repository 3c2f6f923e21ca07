"""`clawloop export trajectories` and `clawloop export tasks`: a run's episodes and tasks as
Hugging Face datasets (registered under `clawloop export` by flows/cli/task.py).

    clawloop export trajectories --run ID [--iteration K] [--root R] --out DIR [--format hf|jsonl]
    clawloop export tasks --run ID [--iteration K] [--root R] --out DIR [--format hf]

Trajectories are in TRL's conversational tool-calling shape: a `messages` column (OpenAI chat
messages: system, user, assistant with `tool_calls`, tool) and a `tools` column holding the tool
schemas the policy was offered as a JSON string (what TRL's dataset-format guide recommends:
Arrow would otherwise merge the schemas of different tools into one struct), beside `reward`,
`passed`, `task_id`, `capability`, `policy` and where each episode came from. `SFTTrainer` takes
`load_dataset(DIR)["train"]` as it is. The rollout stage's episodes (train tasks) are the `train`
split, diagnose's held-out episodes the `test` split, its episodes on external eval sets
(diagnose.eval_tasks) the `external` split; episodes that ended in an infrastructure fault
(INFRA_END_REASONS) say nothing about the policy and are left out.

`hf` writes the layout of a dataset repository on the Hub: `DIR/data/<split>-00000-of-00001.parquet`
(the `datasets` features stored in the file) and a `DIR/README.md` dataset card, so
`load_dataset(DIR)` (or `load_dataset("parquet", data_files=...)`) reads it and
`huggingface-cli upload` publishes it unchanged. `jsonl` writes
`DIR/data/<split>-00000-of-00001.jsonl`, one JSON object per line (`load_dataset(DIR)` reads that
too).

Tasks go out like Harbor's Parquet task datasets: one row per task, `path` (the folder name),
`task_binary` (the Harbor task folder as `export harbor` writes it, tar.gz) and metadata columns.
By default only the tasks verify kept; `--include-dropped` adds the others (`kept` says which).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from clawloop.flows.cli.config_flags import add_config_flags, config_from_args
from clawloop.flows.names import check_run_id, run_id_arg
from clawloop.flows.records import RunRecordError, run_doc
from clawloop.storage import fs
from clawloop.storage.schemas import INFRA_END_REASONS

# Which stage's table becomes which split of the exported dataset.
TRAJECTORY_SOURCES = (
    ("rollout", "trajectories", "train"),
    ("diagnose", "eval_trajectories", "test"),
    ("diagnose", "external_trajectories", "external"),  # diagnose.eval_tasks' episodes
)
SPLITS = ("train", "test", "external")


class ExportError(Exception):
    """Nothing to export, or a run/iteration that is not there: one line, exit 2."""


def _features() -> Any:
    """The trajectories' `datasets` features: fixed, so every file of every run has one schema."""
    from datasets import Features, List, Value

    call = {
        "id": Value("string"),
        "type": Value("string"),
        "function": {"name": Value("string"), "arguments": Value("string")},
    }
    message = {
        "role": Value("string"),
        "content": Value("string"),
        "reasoning_content": Value("string"),
        "tool_calls": List(call),
        "tool_call_id": Value("string"),
    }
    return Features(
        {
            "messages": List(message),
            "tools": Value("string"),
            "reward": Value("float64"),
            "passed": Value("bool"),
            "task_id": Value("string"),
            "capability": Value("string"),
            "policy": Value("string"),
            "episode_id": Value("string"),
            "run_id": Value("string"),
            "iteration": Value("int32"),
            "stage": Value("string"),
            "split": Value("string"),
            "attempt": Value("int32"),
            "end_reason": Value("string"),
            "n_turns": Value("int32"),
            "n_tool_calls": Value("int32"),
        }
    )


def iterations(root: str, run_id: str, iteration: int | None = None) -> list[int]:
    """The run's iteration numbers that have a folder (just `iteration` when given)."""
    run_url = fs.join(root, check_run_id(run_id))
    try:
        doc = run_doc(root, run_id)
    except RunRecordError as exc:
        raise ExportError(str(exc)) from None
    if doc is None:
        raise ExportError(f"no run {run_id!r} under {root}: list runs with `clawloop runs`")
    found = sorted(
        int(n.removeprefix("iter-"))
        for n in fs.listdir(run_url)
        if n.startswith("iter-") and n.removeprefix("iter-").isdigit()
    )
    if iteration is None:
        return found
    if iteration not in found:
        raise ExportError(f"run {run_id} has no iteration {iteration} (it has {found or 'none'})")
    return [iteration]


def _committed(root: str, run_id: str, k: int, stage: str) -> str | None:
    """The stage's folder when the stage committed (a manifest), else None."""
    from clawloop.storage.manifest import check_manifest

    url = fs.stage_url(root, run_id, k, stage)
    manifest, problem = check_manifest(url)
    if problem is not None:  # exporting around it would silently drop its rows
        raise ExportError(
            f"{problem}: re-run that stage (clawloop rerun --run-id {run_id} --iteration {k} "
            f"--stage {stage}{'' if root == 'runs' else f' --root {root}'}), then export"
        )
    return url if manifest is not None else None


def _assistant_messages(messages: list[dict[str, Any]], turns: list[dict[str, Any]]) -> None:
    """Put each turn's `reasoning_content` on its assistant message (chat templates render it as
    <think>); only when the record has one turn per assistant message, so none is misplaced."""
    replies = [m for m in messages if m.get("role") == "assistant"]
    if len(replies) != len(turns):
        return
    for m, t in zip(replies, turns, strict=True):
        if isinstance(t.get("reasoning_content"), str) and t["reasoning_content"]:
            m["reasoning_content"] = t["reasoning_content"]


def _message(m: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI chat message with only the keys the export's features hold."""
    out: dict[str, Any] = {"role": str(m.get("role", "")), "content": m.get("content") or ""}
    if m.get("reasoning_content"):
        out["reasoning_content"] = str(m["reasoning_content"])
    if m.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": str(c.get("id") or ""),
                "type": str(c.get("type") or "function"),
                "function": {
                    "name": str((c.get("function") or {}).get("name") or ""),
                    "arguments": _arguments((c.get("function") or {}).get("arguments")),
                },
            }
            for c in m["tool_calls"]
        ]
    if m.get("tool_call_id"):
        out["tool_call_id"] = str(m["tool_call_id"])
    return out


def _arguments(value: Any) -> str:
    """A tool call's arguments as the OpenAI JSON string (a dict some servers return, dumped)."""
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {})


def trajectory_record(row: dict[str, Any], run_id: str, iteration: int, stage: str) -> dict:
    """A TRAJECTORIES row -> one exported example (messages + tools + what the episode scored)."""
    messages = json.loads(row["messages_json"] or "[]")
    turns = json.loads(row.get("turns_json") or "[]")
    _assistant_messages(messages, turns)
    tools = json.loads(row.get("tools_json") or "[]")
    return {
        "messages": [_message(m) for m in messages],
        "tools": json.dumps(tools),
        "reward": float(row["reward"]),
        "passed": bool(row["passed"]),
        "task_id": str(row["task_id"]),
        "capability": str(row["capability"]),
        "policy": str(row["policy_id"]),
        "episode_id": str(row["episode_id"]),
        "run_id": run_id,
        "iteration": int(iteration),
        "stage": stage,
        "split": str(row["split"]),
        "attempt": int(row["attempt"]),
        "end_reason": str(row["end_reason"]),
        "n_turns": int(row["n_turns"]),
        "n_tool_calls": int(row["n_tool_calls"]),
    }


def trajectory_records(
    root: str, run_id: str, iteration: int | None = None, passed_only: bool = False
) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """{split: exported examples} over the run's committed rollout and diagnose stages, in
    iteration order; and how many infrastructure-fault episodes were left out."""
    from clawloop.storage import artifacts

    out: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    infra = 0
    for k in iterations(root, run_id, iteration):
        for stage, table, split in TRAJECTORY_SOURCES:
            url = _committed(root, run_id, k, stage)
            if url is None or not fs.exists(fs.join(url, f"{table}.parquet")):
                continue
            for row in artifacts.read_rows(url, table):
                if row["end_reason"] in INFRA_END_REASONS:
                    infra += 1
                elif row["passed"] or not passed_only:
                    out[split].append(trajectory_record(row, run_id, k, stage))
    return out, infra


def _card(title: str, body: str) -> str:
    """The dataset card. No `configs` block: the file names say the splits, and `datasets` (5.x)
    caches a local folder whose card names its files by the card alone, so a second export with
    the same card would load the first one's rows; without it the files' mtimes key the cache."""
    head = ["---", f"pretty_name: {json.dumps(title)}", "tags:", "- clawloop", "---"]
    return "\n".join([*head, "", f"# {title}", "", body.strip(), ""])


def _partial_note(root: str, run_id: str) -> str:
    """The card's note on a run another process still writes ("" when none does)."""
    from clawloop.flows.lease import in_progress

    why = in_progress(root, run_id)
    return f"\n\n**Partial:** exported while {why}; export again when it ends.\n" if why else ""


def _say_partial(args: argparse.Namespace) -> None:
    from clawloop.flows.lease import in_progress

    why = in_progress(args.root, args.run)
    if why:
        print(f"clawloop export {args.format}: {why} (the dataset card says so)", file=sys.stderr)


def _prepare_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"--out {out} already exists and is not an empty folder; choose another")
    out.parent.mkdir(parents=True, exist_ok=True)


@contextmanager
def _staged(out: Path) -> Iterator[Path]:
    """A hidden folder beside `out` to write the dataset into, renamed to `out` when complete:
    a failed or killed export leaves no half-written dataset under the name asked for."""
    _prepare_out(out)
    tmp = out.parent / f"{fs.TMP_PREFIX}{uuid.uuid4().hex}-{out.name}"
    tmp.mkdir()
    try:
        yield tmp
        if out.exists():
            out.rmdir()  # the empty folder _prepare_out accepted
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _split_file(out: Path, split: str, ext: str) -> Path:
    """`DIR/data/<split>-00000-of-00001.<ext>`: the Hub's sharded names, which `load_dataset(DIR)`
    reads as split <split> for any split name (train, test, external)."""
    (out / "data").mkdir(parents=True, exist_ok=True)
    return out / "data" / f"{split}-00000-of-00001.{ext}"


def _write_parquet_splits(
    by_split: dict[str, list[dict[str, Any]]], out: Path, features: Any
) -> None:
    """One Parquet file per non-empty split, typed by `features` (stored in the file)."""
    from datasets import Dataset

    for split, rows in by_split.items():
        if rows:
            path = _split_file(out, split, "parquet")
            Dataset.from_list(rows, features=features).to_parquet(str(path))


TRAJECTORY_CARD = """\
Episodes of the clawloop run `{run_id}` ({iterations}), in TRL's conversational tool-calling
format: `messages` (OpenAI chat messages; assistant turns carry `tool_calls`, tool results are
`tool` messages) and `tools` (the tool schemas offered, as a JSON string). `reward` is the
verifier's reward in [0, 1] as recorded, `passed` whether the episode passed; `policy` is the
model that was served. `train`: the rollout stage's episodes on train tasks; `test`: diagnose's
held-out episodes; `external`: diagnose's episodes on external eval sets (diagnose.eval_tasks).
{counts}

```python
from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

data = load_dataset("{out}")
passed = data["train"].filter(lambda r: r["passed"])
SFTTrainer(model=MODEL, train_dataset=passed, args=SFTConfig(output_dir="out")).train()
```
"""


def export_trajectories(
    root: str,
    run_id: str,
    out: Path,
    fmt: str = "hf",
    iteration: int | None = None,
    passed_only: bool = False,
) -> tuple[dict[str, int], int]:
    """Write the run's trajectories to `out` (see the module docstring); returns the examples per
    split and the infrastructure-fault episodes left out."""
    by_split, infra = trajectory_records(root, run_id, iteration, passed_only)
    counts = {s: len(rows) for s, rows in by_split.items()}
    if not sum(counts.values()):
        which = f"iteration {iteration}" if iteration is not None else "any iteration"
        raise ExportError(
            f"run {run_id} has no {'passed ' if passed_only else ''}trajectories in {which} "
            f"({infra} infrastructure-fault episodes left out): did rollout run?"
        )
    with _staged(out) as dest:
        if fmt == "jsonl":
            for split, rows in by_split.items():
                if rows:
                    with _split_file(dest, split, "jsonl").open("w", encoding="utf-8") as f:
                        for r in rows:
                            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            return counts, infra
        _write_parquet_splits(by_split, dest, _features())
        its = f"iteration {iteration}" if iteration is not None else "every iteration"
        body = TRAJECTORY_CARD.format(
            run_id=run_id,
            iterations=its,
            out=out,
            counts=", ".join(f"{s}: {n} episodes" for s, n in counts.items()) + ".",
        ) + _partial_note(root, run_id)
        (dest / "README.md").write_text(_card(f"clawloop trajectories: {run_id}", body))
    return counts, infra


# ---- tasks --------------------------------------------------------------------------------------


def _task_features() -> Any:
    from datasets import Features, Value

    cols = {
        "path": "string",
        "task_binary": "binary",
        "name": "string",
        "task_id": "string",
        "run_id": "string",
        "iteration": "int32",
        "capability": "string",
        "domain": "string",
        "split": "string",
        "output_format": "string",
        "seed": "int64",
        "multihop": "int32",
        "dirtiness": "int32",
        "origin": "string",
        "title": "string",
        "generator_sha256": "string",
        "task_sha256": "string",
        "kept": "bool",
        "verify_reason": "string",
    }
    return Features({k: Value(v) for k, v in cols.items()})


def _tar_gz(folder: Path) -> bytes:
    """The folder's deterministic tar (harness.taskfolder pack_dir), gzipped with mtime 0."""
    from clawloop.harness.taskfolder.packing import pack_dir

    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(pack_dir(folder))
    return buf.getvalue()


def task_records(
    root: str,
    run_id: str,
    iteration: int | None = None,
    org: str = "clawloop",
    include_dropped: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """{split: task rows} from the run's forge stages (first iteration that forged a task id
    wins), each folder exported as `clawloop export harbor` writes it."""
    from clawloop.harness.taskfolder.folder import TaskFolder
    from clawloop.harness.taskfolder.rows import export_rows
    from clawloop.storage import artifacts

    out: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    seen: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="clawloop-export-") as tmp:
        for k in iterations(root, run_id, iteration):
            forge = _committed(root, run_id, k, "forge")
            if forge is None:
                continue
            verify = _committed(root, run_id, k, "verify")
            verdicts = (
                {v["task_id"]: v for v in artifacts.read_rows(verify, "verdicts")} if verify else {}
            )
            rows = [
                r
                for r in artifacts.read_rows(forge, "tasks")
                if r["status"] == "ok" and r["task_id"] not in seen
            ]
            for folder in export_rows(rows, Path(tmp) / f"iter-{k}", org=org):
                verdict = verdicts.get(folder.name)
                kept = bool(verdict and verdict["kept"])
                if not kept and not include_dropped:
                    continue
                info = TaskFolder.read_clawloop(folder).info
                seen.add(folder.name)
                split = "test" if info.split == "eval" else "train"
                out[split].append(
                    {
                        "path": folder.name,
                        "task_binary": _tar_gz(folder),
                        "name": f"{org}/{folder.name}",
                        "task_id": folder.name,
                        "run_id": run_id,
                        "iteration": k,
                        "capability": info.capability,
                        "domain": info.domain,
                        "split": info.split,
                        "output_format": info.output_format,
                        "seed": int(info.seed),
                        "multihop": int(info.multihop),
                        "dirtiness": int(info.dirtiness),
                        "origin": info.origin,
                        "title": info.title,
                        "generator_sha256": info.generator_sha256,
                        "task_sha256": info.task_sha256,
                        "kept": kept,
                        "verify_reason": str(verdict["reason"]) if verdict else "not verified",
                    }
                )
    return out


TASK_CARD = """\
Tasks of the clawloop run `{run_id}` ({which}), one row per task as in Harbor's Parquet task
datasets: `path` is the task folder's name and `task_binary` the Harbor task folder (task.toml,
instruction.md, environment/, solution/, tests/; `[task] name` = `name`) as a gzipped tar;
the other columns are its metadata and verify's verdict. `train`: train-split tasks, `test`:
held-out (eval) tasks. {counts}

```python
import io, tarfile
from datasets import load_dataset

for row in load_dataset("{out}", split="train"):
    tarfile.open(fileobj=io.BytesIO(row["task_binary"])).extractall(f"tasks/{{row['path']}}")
```
then `harbor run -p tasks/<path> -a oracle`.
"""


def export_tasks(
    root: str,
    run_id: str,
    out: Path,
    iteration: int | None = None,
    org: str = "clawloop",
    include_dropped: bool = False,
) -> dict[str, int]:
    """Write the run's forged tasks to `out` as a Hugging Face dataset; returns rows per split."""
    by_split = task_records(root, run_id, iteration, org, include_dropped)
    counts = {s: len(rows) for s, rows in by_split.items()}
    if not sum(counts.values()):
        raise ExportError(
            f"run {run_id} has no {'forged' if include_dropped else 'kept'} tasks"
            + (f" in iteration {iteration}" if iteration is not None else "")
            + ("" if include_dropped else " (--include-dropped adds the ones verify dropped)")
        )
    with _staged(out) as dest:
        _write_parquet_splits(by_split, dest, _task_features())
        which = "kept by verify" if not include_dropped else "every forged task"
        body = TASK_CARD.format(
            run_id=run_id,
            which=which + (f", iteration {iteration}" if iteration is not None else ""),
            out=out,
            counts=", ".join(f"{s}: {n} tasks" for s, n in counts.items()) + ".",
        ) + _partial_note(root, run_id)
        (dest / "README.md").write_text(_card(f"clawloop tasks: {run_id}", body))
    return counts


# ---- CLI ----------------------------------------------------------------------------------------


def _switch(help: str) -> Any:
    """A flag that takes no value (off unless given)."""
    return Field(False, description=help, json_schema_extra={"switch": True})


class RunExport(BaseModel):
    """What an export of one run reads and where it writes (the flags of both export verbs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str = Field(
        description="run id (see `clawloop runs`)", json_schema_extra={"type": run_id_arg}
    )
    iteration: int | None = Field(None, description="only iteration K (default: all)")
    root: str = Field("runs", description="storage root the run is under")
    out: str = Field(description="folder to write (must not exist or be empty)")


class TrajectoryExport(RunExport):
    """`clawloop export trajectories`: a run's episodes as a TRL-ready dataset."""

    fmt: Literal["hf", "jsonl"] = Field(
        "hf",
        description="hf: Parquet + dataset card; jsonl: a JSON object per line; "
        "load_dataset(DIR) both",
    )
    passed_only: bool = _switch("only episodes that passed (SFT data)")


class TaskExport(RunExport):
    """`clawloop export tasks`: a run's forged tasks as a Hugging Face dataset."""

    fmt: Literal["hf"] = Field(
        "hf", description="hf: Parquet (path, task_binary tar.gz, metadata) + dataset card"
    )
    org: str = Field("clawloop", description="org of each task's name, ORG/<task_id>")
    include_dropped: bool = _switch("also the tasks verify dropped")


def _cmd_trajectories(args: argparse.Namespace) -> int:
    cfg = config_from_args(args, TrajectoryExport)
    counts, infra = export_trajectories(
        cfg.root, cfg.run, Path(cfg.out), cfg.fmt, cfg.iteration, cfg.passed_only
    )
    what = ", ".join(f"{n} {s}" for s, n in counts.items())
    note = f"; {infra} infrastructure-fault episodes left out" if infra else ""
    how = "load_dataset(DIR)" if cfg.fmt == "hf" else "one JSON object per line"
    print(f"exported {what} episodes of run {cfg.run} to {cfg.out} ({how}){note}")
    _say_partial(args)
    return 0


def _cmd_tasks(args: argparse.Namespace) -> int:
    from clawloop.harness.taskfolder.folder import harbor_name

    cfg = config_from_args(args, TaskExport)
    harbor_name("x", cfg.org)  # a bad org is a TaskFolderError: one line
    counts = export_tasks(
        cfg.root, cfg.run, Path(cfg.out), cfg.iteration, cfg.org, cfg.include_dropped
    )
    what = ", ".join(f"{n} {s}" for s, n in counts.items())
    print(f"exported {what} tasks of run {cfg.run} to {cfg.out} (load_dataset(DIR))")
    _say_partial(args)
    return 0


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Expected failures as one line on stderr, exit 2."""

    def run(args: argparse.Namespace) -> int:
        from clawloop.harness.taskfolder.folder import TaskFolderError

        try:
            return fn(args)
        except (ExportError, TaskFolderError, OSError) as exc:
            print(f"clawloop export {args.format}: {exc}", file=sys.stderr)
            return 2

    return run


# The export verbs' own spelling of a field (`--format`: `format` is the verb's dest).
EXPORT_FLAGS = {"fmt": ["--format"]}


def register_export(formats: argparse._SubParsersAction) -> None:
    """Add `trajectories` and `tasks` under `clawloop export` (flows/cli/task.py's parser)."""
    t = formats.add_parser(
        "trajectories", help="a run's episodes as a TRL-ready dataset (messages + tools)"
    )
    add_config_flags(t, TrajectoryExport, names=EXPORT_FLAGS)
    t.set_defaults(func=_guard(_cmd_trajectories))

    k = formats.add_parser("tasks", help="a run's forged tasks as a Hugging Face dataset")
    add_config_flags(k, TaskExport, names=EXPORT_FLAGS)
    k.set_defaults(func=_guard(_cmd_tasks))
