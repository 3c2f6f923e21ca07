"""The launcher files a GPU host starts from name things that exist: every `-m MODULE` in
training/configs and in the training README resolves to an importable module."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    *sorted((ROOT / "training" / "configs").glob("*.yaml")),
    ROOT / "training" / "README.md",
]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_launched_module_exists(path):
    launcher = r"(?:python\S*|accelerate launch|torchrun)[^\n`]*?\s-m\s+([A-Za-z_][\w.]*)"
    modules = re.findall(launcher, path.read_text())
    assert modules, f"{path.name} names no launched module"
    for module in modules:
        assert importlib.util.find_spec(module) is not None, f"{path.name}: -m {module}"
