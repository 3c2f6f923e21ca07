"""Run configuration: embedded defaults, profiles, and errors that name the field and the fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flows.config import ConfigError, RunConfig, load_config, parse_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_no_file_gives_the_local_profile():
    cfg = load_config(None)
    assert cfg.profile == "local" and cfg.iterations == 1 and cfg.storage.root == "runs"
    assert load_config(None, iterations=3).iterations == 3


def test_shipped_profiles_parse():
    local = load_config(CONFIGS / "local.yaml")
    cluster = load_config(CONFIGS / "cluster.yaml")
    assert local.profile == "local" and local == load_config(
        None
    )  # the YAML writes out the defaults
    assert cluster.profile == "cluster" and cluster.llm.base_url and cluster.train.deepspeed


def test_unknown_field_suggests_the_right_name():
    with pytest.raises(
        ConfigError, match=r"synthesize\.n_trian: unknown field; did you mean 'n_train'"
    ):
        parse_config({"synthesize": {"n_trian": 4}})


def test_wrong_value_names_the_field_and_what_was_given():
    with pytest.raises(ConfigError) as err:
        parse_config({"forge": {"workers": 0}, "sandbox": {"backend": "podman"}})
    text = str(err.value)
    assert "forge.workers" in text and "greater than or equal to 1" in text
    assert "sandbox.backend" in text and "'podman'" in text


def test_cluster_profile_needs_an_endpoint():
    with pytest.raises(ConfigError, match="llm.base_url"):
        parse_config({"profile": "cluster"})
    ok = parse_config({"profile": "cluster", "llm": {"base_url": "http://gpu:8000/v1"}})
    assert isinstance(ok, RunConfig)


def test_bad_yaml_and_missing_file_are_one_clear_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("synthesize: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_sandbox_settings_map_to_the_sandbox_interface():
    box = parse_config(
        {"sandbox": {"backend": "bwrap", "memory_mb": 512}}
    ).sandbox.to_sandbox_config()
    assert box.backend == "bwrap" and box.limits.memory_mb == 512


def test_a_configured_docker_host_reaches_the_sandbox_backends(monkeypatch):
    from flows.runs import apply_environment

    # setenv first, so monkeypatch restores (or removes) DOCKER_HOST for the tests after this one.
    monkeypatch.setenv("DOCKER_HOST", "unset")
    monkeypatch.delenv("DOCKER_HOST")
    apply_environment(parse_config({"sandbox": {"docker_host": "tcp://sandbox-host:2376"}}))
    assert os.environ["DOCKER_HOST"] == "tcp://sandbox-host:2376"
