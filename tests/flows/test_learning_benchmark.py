"""benchmarks/learning.py's run config: what it hands `clawloop run` for a local model and for a
vLLM endpoint (the script itself is measured by hand; see its docstring)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from clawloop.tasks.config import parse_config

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "learning.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("learning_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(*argv: str) -> dict:
    bench = _benchmark()
    parser_args = bench.parse_args(["--iterations", "2", *argv])
    return bench.run_config(parser_args)


def test_a_vllm_endpoint_that_would_keep_the_base_weights_is_refused():
    with pytest.raises(SystemExit, match=r"llm.reload is none.*--reload lora.*--reload restart"):
        _config("--base-url", "http://vllm:8000/v1", "--model", "m", "--lora")


def test_reload_lora_keeps_the_adapters_unmerged_so_the_config_loads():
    cfg = _config(
        "--base-url", "http://vllm:8000/v1", "--model", "m", "--base-model", "m",
        "--lora", "--reload", "lora",
    )  # fmt: skip
    run = parse_config(cfg)  # merge_lora: true would be refused with reload: lora
    assert (run.llm.reload, run.train.lora, run.train.merge_lora) == ("lora", True, False)
    restart = parse_config(_config("--base-url", "http://v/v1", "--reload", "restart"))
    assert restart.llm.reload == "restart" and restart.llm.base_url == "http://v/v1"


def test_the_local_server_path_needs_no_reload():
    run = parse_config(_config("--base-model", "/models/m.gguf", "--lora"))
    assert run.llm.base_url is None and run.train.lora and run.train.merge_lora


def test_every_iteration_grades_the_same_held_out_tasks_and_row_0_is_the_base_policy():
    run = parse_config(_config("--base-model", "/m.gguf", "--heldout", "6", "--eval-n", "4"))
    assert run.synthesize.fixed_eval and run.diagnose.baseline
    assert (run.synthesize.n_eval, run.diagnose.eval_n) == (6, 4)
    assert not parse_config(_config("--no-baseline")).diagnose.baseline


def test_the_table_starts_at_the_base_row():
    from clawloop.flows.report import IterationFigures, RunFigures

    bench = _benchmark()
    base = IterationFigures(iteration=0, heldout={"tally": (1, 4)})
    one = IterationFigures(iteration=1, heldout={"tally": (3, 4)}, train_status="trained")
    rows = bench.table(RunFigures("r", 1, [base, one])).splitlines()[2:]
    assert rows[0].startswith("| base | 1/4 25.0% [") and rows[1].startswith("| 1 | 3/4 75.0% [")
