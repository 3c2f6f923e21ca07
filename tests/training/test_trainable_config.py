"""A run config that can never train is refused when it loads, with the fix in the message; the
sound configs (the shipped ones, a shaped reward on an all-failed band) still load."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from doubles.episodes import band_frame, episode_row

from clawloop.tasks.config import ConfigError, load_config, parse_config
from clawloop.training.config import TrainConfig
from clawloop.training.stage import train_stage

ROOT = Path(__file__).resolve().parents[2]


def _cfg(rollout: dict, train: dict | None = None):
    return parse_config({"rollout": rollout, "train": train or {}})


@pytest.mark.parametrize(
    ("rollout", "train", "words"),
    [
        ({"n": 1, "band": [0, 1]}, {}, ["rollout.n=1", "set rollout.n to 2", "train.phases: sft"]),
        ({"n": 4, "band": [0, 0]}, {"phases": "grpo"}, ["all failed", "e.g. [1, 3]"]),
        ({"n": 4, "band": [4, 4]}, {"phases": "grpo"}, ["all passed", "e.g. [1, 3]"]),
        ({"n": 4, "band": [4, 4]}, {"phases": "grpo", "reward": "fraction"}, ["all passed"]),
        ({"n": 4, "band": [0, 0]}, {"phases": "sft"}, ["never passed", "train.phases: grpo"]),
        ({"n": 2, "band": [3, 3]}, {}, ["no task can be kept", "e.g. [1, 1]"]),
        ({"n": 4, "band": [1, 3], "temperature": 0.7}, {}, ["rollout.temperature=0.7"]),
        ({"n": 4, "band": [1, 3], "temperature": 0.0}, {"phases": "grpo"}, ["temperature: 1"]),
    ],
)
def test_untrainable_configs_are_refused_with_the_fix(rollout, train, words):
    with pytest.raises(ConfigError) as err:
        _cfg(rollout, train)
    msg = str(err.value)
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize(
    ("rollout", "train"),
    [
        ({"n": 2, "band": [1, 1]}, {}),
        ({"n": 8, "band": [1, 5]}, {}),
        ({"n": 1, "band": [0, 1]}, {"phases": "sft"}),
        ({"n": 4, "band": [0, 0]}, {"phases": "grpo", "reward": "fraction"}),  # fractions differ
        ({"n": 4, "band": [4, 4]}, {"phases": "sft"}),  # SFT on what it always solves
        ({"n": 4, "band": [1, 3], "temperature": 0.7}, {"phases": "sft"}),  # SFT: any sampler
    ],
)
def test_trainable_configs_load(rollout, train):
    _cfg(rollout, train)


def test_shipped_configs_load():
    for name in ("local", "cluster", "learning-cpu"):
        load_config(name)


def test_groups_of_one_are_not_reported_as_equal_rewards(tiny_model_dir, tmp_path):
    traj = pd.DataFrame([episode_row("t1", 0, 1.0), episode_row("t2", 0, 0.0)])
    cfg = TrainConfig(phases="grpo")
    result = train_stage(
        traj, band_frame(["t1", "t2"], [True, True]), cfg, tiny_model_dir, tmp_path
    )
    assert result.status == "nothing_to_train"
    assert "0 with equal rewards" in result.reason and "2 of one rollout" in result.reason
