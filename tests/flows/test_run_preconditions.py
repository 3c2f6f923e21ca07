"""Preconditions before any stage, and flags over the config before validation: `--runner dask`
wins over a config's `runner: threads` (with an execution.address, which alone would be a
contradiction), and a cluster without a Prefect API its workers can reach is refused when the run
loads, before synthesize writes anything, on the command line and in the loop flow."""

from __future__ import annotations

import pytest

from clawloop.flows import pipeline, runs
from clawloop.flows.cli import main
from clawloop.tasks.config import ConfigError, load_config
from clawloop.tasks.stage import StageError

CLUSTER = "tcp://127.0.0.1:9"  # nothing is dialled: the run is refused first


def _yaml(tmp_path, body: str):
    path = tmp_path / "c.yaml"
    path.write_text(body)
    return str(path)


def test_runner_flag_wins_and_the_missing_api_is_refused_at_load(tmp_path, capsys, monkeypatch):
    pytest.importorskip("prefect_dask")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    root = tmp_path / "runs"
    config = _yaml(
        tmp_path,
        f"iterations: 1\nstorage: {{root: {root}}}\n"
        f"execution: {{runner: threads, address: '{CLUSTER}'}}\n",
    )
    assert main(["run", "--config", config, "--runner", "dask", "--run-id", "r"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"execution.address {CLUSTER}" in err and "PREFECT_API_URL is not set" in err
    assert not root.exists(), "a stage (or run.json) was written before the refusal"


def test_the_loop_flow_refuses_it_before_any_stage(tmp_path, monkeypatch):
    pytest.importorskip("prefect_dask")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    root = tmp_path / "runs"
    config = {
        "iterations": 1,
        "storage": {"root": str(root)},
        "execution": {"runner": "dask", "address": CLUSTER},
    }
    with pytest.raises(StageError, match="PREFECT_API_URL is not set"):
        pipeline.loop_flow.fn("r", config)
    assert not root.exists()


def test_flags_override_a_config_before_validation(tmp_path):
    pytest.importorskip("prefect_dask")
    config = _yaml(tmp_path, f"execution: {{runner: threads, address: '{CLUSTER}'}}\n")
    with pytest.raises(ConfigError, match="runner is threads"):
        load_config(config)
    cfg = runs.resolve_config(config, None, execution={"runner": "dask"})
    assert cfg.execution.runner == "dask" and cfg.execution.address == CLUSTER


def test_an_override_does_not_hide_an_invalid_value_in_the_file(tmp_path):
    config = _yaml(tmp_path, "iterations: 1000\n")
    with pytest.raises(ConfigError, match=r"c.yaml: iterations: .*100.*\(got 1000\).*fix the file"):
        runs.resolve_config(config, None, iterations=1)
    assert (
        runs.resolve_config(_yaml(tmp_path, "iterations: 3\n"), None, iterations=1).iterations == 1
    )


@pytest.mark.parametrize("value", ["true", "2.0", "'2'"])
def test_iterations_must_be_an_integer(tmp_path, value):
    with pytest.raises(ConfigError, match="iterations"):
        load_config(_yaml(tmp_path, f"iterations: {value}\n"))
