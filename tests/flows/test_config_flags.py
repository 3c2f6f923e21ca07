"""Flags generated from a settings class (flows/cli/config_flags.py): `clawloop rollout` takes
RolloutConfig's fields, with their defaults, under the spellings the verb always had."""

from __future__ import annotations

import argparse
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from clawloop.flows.cli import make_parser
from clawloop.flows.cli.config_flags import add_config_flags, config_from_args
from clawloop.flows.cli.rollout import ROLLOUT_SKIP
from clawloop.harness.rollout import RolloutConfig


def test_rollout_flags_are_rollout_configs_fields_with_its_defaults():
    args = make_parser().parse_args(["rollout", "some/task"])
    cfg = config_from_args(args, RolloutConfig, skip=ROLLOUT_SKIP, band=(1, 5))
    # the library's defaults, but the verb's own concurrency (2)
    assert cfg == RolloutConfig(workers=2)
    for name in RolloutConfig.model_fields:
        assert (name in ROLLOUT_SKIP) != hasattr(args, name), name


def test_rollout_keeps_its_flag_names_and_refuses_a_bad_choice():
    argv = ["rollout", "t", "-n", "3", "--episode-timeout", "9", "--concurrency", "5"]
    argv += ["--temperature", "0.5", "--tool-choice", "required", "--max-turns", "4"]
    args = make_parser().parse_args(argv)
    assert (args.n, args.episode_timeout_s, args.workers) == (3, 9.0, 5)
    assert (args.temperature, args.tool_choice, args.max_turns) == (0.5, "required", 4)
    with pytest.raises(SystemExit):
        make_parser().parse_args(["rollout", "t", "--tool-choice", "sometimes"])


def test_a_field_added_to_a_config_is_a_flag():
    class Toy(BaseModel):
        top_p: float = Field(1.0, description="nucleus mass")
        mode: str = Field("a", description="which", json_schema_extra={"choices": ("a", "b")})
        strict: bool = False

    parser = argparse.ArgumentParser()
    add_config_flags(parser, Toy, names={"mode": ["-m"]})
    assert config_from_args(parser.parse_args([]), Toy) == Toy()
    got = config_from_args(parser.parse_args(["--top-p", "0.9", "-m", "b", "--strict", "yes"]), Toy)
    assert got == Toy(top_p=0.9, mode="b", strict=True)
    assert "nucleus mass (default: 1.0)" in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["-m", "c"])


def test_the_agent_loop_takes_its_settings_from_the_rollout_section():
    agent = RolloutConfig(temperature=0.7, max_turns=5).agent_config(request_timeout_s=9)
    assert (agent.temperature, agent.max_turns, agent.request_timeout_s) == (0.7, 5, 9)
    assert RolloutConfig().agent_config().temperature == RolloutConfig().temperature


def test_synth_verbs_take_their_defaults_from_the_run_configs_sections():
    from clawloop.synthesis.config import DomainSource, SkillsSource

    skills = make_parser().parse_args(["skills", "synth", "g", "--n", "1", "--out", "o"])
    want = SkillsSource()
    assert (skills.sampler, (skills.min_len, skills.max_len), skills.max_repairs) == (
        want.sampler,
        tuple(want.path_len),
        want.max_repairs,
    )
    domain = make_parser().parse_args(["domain", "synth", "d", "--out", "o"])
    assert (domain.max_nodes, domain.subgoals) == (
        DomainSource().max_nodes,
        DomainSource().subgoals,
    )


def test_audit_export_and_run_flags_come_from_their_config_classes():
    from clawloop.flows.cli.export import TaskExport, TrajectoryExport
    from clawloop.harness.audit import AuditConfig
    from clawloop.tasks.config import RunConfig
    from clawloop.tasks.settings import ExecutionSettings

    audit = make_parser().parse_args(["audit", "d"])
    assert config_from_args(audit, AuditConfig) == AuditConfig()
    audit = make_parser().parse_args(["audit", "d", "--sample", "3", "--backend", "bwrap"])
    assert config_from_args(audit, AuditConfig) == AuditConfig(sample=3, backend="bwrap")

    argv = ["export", "trajectories", "--run", "run-1", "--out", "o", "--passed-only"]
    traj = config_from_args(make_parser().parse_args(argv), TrajectoryExport)
    assert traj == TrajectoryExport(run="run-1", out="o", passed_only=True)
    assert (traj.root, traj.iteration, traj.fmt) == ("runs", None, "hf")
    argv = ["export", "tasks", "--run", "run-1", "--out", "o", "--format", "hf"]
    assert config_from_args(make_parser().parse_args(argv), TaskExport).org == "clawloop"
    with pytest.raises(SystemExit):  # --run and --out are required (fields with no default)
        make_parser().parse_args(["export", "tasks", "--out", "o"])
    with pytest.raises(SystemExit):  # a run id is checked as the verb always did
        make_parser().parse_args(["export", "tasks", "--run", "../x", "--out", "o"])

    # run's settings flags override the config: None when not given, the class's choices
    run = make_parser().parse_args(["run"])
    assert (run.iterations, run.runner, run.root) == (None, None, None)
    run = make_parser().parse_args(["run", "--iterations", "3", "--runner", "dask"])
    assert (run.iterations, run.runner) == (3, "dask")
    helps = {a.dest: a.help for a in _verb("run")._actions}
    assert helps["iterations"].startswith(RunConfig.model_fields["iterations"].description)
    assert helps["runner"].startswith(ExecutionSettings.model_fields["runner"].description)
    with pytest.raises(SystemExit):
        make_parser().parse_args(["run", "--runner", "spark"])


def _verb(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_a_model_field_is_a_flag_too():
    class Toy(BaseModel):
        level: int = Field(2, description="how deep")
        mode: Literal["a", "b"] = Field("a", description="which")

    parser = argparse.ArgumentParser()
    add_config_flags(parser, Toy)
    assert config_from_args(parser.parse_args(["--level", "5", "--mode", "b"]), Toy) == Toy(
        level=5, mode="b"
    )
    assert "how deep (default: 2)" in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "c"])
    over = argparse.ArgumentParser()
    add_config_flags(over, Toy, only={"level"}, overrides="toy")
    assert over.parse_args([]).level is None and "overrides the config's toy.level" in (
        over.format_help()
    )
