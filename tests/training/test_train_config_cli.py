"""TrainConfig validation and the CLI flags generated from it."""

from __future__ import annotations

import argparse

import pytest

from clawloop.flows.cli.train import add_config_flags, config_from_args
from clawloop.training.config import TrainConfig, TrainConfigError


def test_config_rejects_bad_values_with_the_field_name():
    with pytest.raises(ValueError, match="phases"):
        TrainConfig(phases="ppo")
    with pytest.raises(ValueError, match="clip_eps"):
        TrainConfig(clip_eps=1.5)
    with pytest.raises(ValueError, match="reward"):
        TrainConfig(reward="shaped")
    assert TrainConfig().reward == "outcome"
    with pytest.raises(TrainConfigError, match="unknown train settings"):
        TrainConfig.from_dict({"learning_rate": 1.0})
    assert TrainConfig.from_dict({"phases": "grpo"}).run_sft is False
    assert all(TrainConfig().help_lines().values())  # every field has help


def test_every_field_is_a_typed_flag():
    parser = argparse.ArgumentParser()
    add_config_flags(parser)
    args = parser.parse_args(
        [
            "--phases",
            "sft",
            "--lora",
            "true",
            "--sft-learning-rate",
            "3e-5",
            "--bf16",
            "false",
            "--gradient-accumulation-steps",
            "4",
            "--deepspeed",
            "training/configs/zero3.json",
            "--reward",
            "fraction",
        ]
    )
    cfg = config_from_args(args)
    assert cfg.phases == "sft" and cfg.lora is True and cfg.sft_learning_rate == 3e-5
    assert cfg.bf16 is False and cfg.gradient_accumulation_steps == 4
    assert cfg.deepspeed == "training/configs/zero3.json" and cfg.reward == "fraction"
    assert config_from_args(parser.parse_args([])) == TrainConfig()


def test_run_config_train_section_takes_the_reward_and_refuses_a_bad_one():
    from clawloop.tasks.config import ConfigError, parse_config

    assert parse_config({}).train.reward == "outcome"
    assert parse_config({"train": {"reward": "fraction"}}).train.reward == "fraction"
    with pytest.raises(ConfigError, match="train.reward"):
        parse_config({"train": {"reward": "shaped"}})
