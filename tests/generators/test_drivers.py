"""The programs that run inside sandboxes (runner's build/solve driver, verify's grading driver)
are real stdlib files: the sandbox gets their text, importing them runs nothing, and the stage
cache keys follow edits to them (storage/cache_key.py reads imports, so they must be imported)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from clawloop.generators import runner, runner_driver, verify
from clawloop.generators.verify import orchestrate, probe_driver
from clawloop.storage.cache_key import import_closure


@pytest.mark.parametrize(
    ("text", "module"),
    [(runner.DRIVER_SOURCE, runner_driver), (verify.PROBE_DRIVER, probe_driver)],
)
def test_the_sandbox_gets_the_driver_files_text(text, module):
    assert text == Path(module.__file__).read_text()
    assert 'if __name__ == "__main__":' in text  # importing it (the host does) runs nothing


@pytest.mark.parametrize("module", [runner_driver, probe_driver])
def test_a_driver_imports_only_the_standard_library(module):
    tree = ast.parse(Path(module.__file__).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, "a driver is one file: no relative imports"
            names.add((node.module or "").split(".")[0])
    assert names and names <= set(sys.stdlib_module_names)


def test_the_stage_cache_keys_follow_the_drivers():
    assert "clawloop.generators.runner_driver" in import_closure("clawloop.tasks.forge")
    verify_closure = import_closure("clawloop.tasks.verify")
    assert "clawloop.generators.verify.probe_driver" in verify_closure
    assert "clawloop.generators.runner_driver" in verify_closure


def test_a_task_without_a_folder_in_the_sandbox_half_is_an_error_not_an_assert():
    state = orchestrate._Verifying({}, None, [], {"task_id": "t1"})
    with pytest.raises(RuntimeError, match="'t1' reached the sandbox checks"):
        orchestrate._task_of(state)
