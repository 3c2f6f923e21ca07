"""Fixtures for training tests: the tiny model (built once per session) and synthetic episodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawloop.training.tiny_model import ensure_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return ensure_tiny_model(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))
