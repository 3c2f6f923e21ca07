"""The programs clawloop ships as files (shell scripts, the sandbox launcher's C source, the
task-folder templates) and reads at run time through storage.cache_key.data_text: each exists,
ships as package data, passes shellcheck, and keys the stages whose code reads it."""

from __future__ import annotations

import ast
import fnmatch
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from doubles.layout import PACKAGES

from clawloop.storage.cache_key import _data_calls, data_text

ROOT = Path(__file__).resolve().parents[2]
# Checks a shipped program is exempt from, and why. clawgym_test.sh's bytes are in every imported
# ClawGym row (its task tar): `cd /workspace || exit` would change them and re-import every task.
SHELLCHECK_EXCLUDE = {"harness/taskfolder/templates/clawgym_test.sh": ["SC2164"]}


def _programs() -> list[Path]:
    """Every data file a project module reads through data_text, as the cache keys see them."""
    found = set()
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            for rel in _data_calls(ast.parse(path.read_bytes())):
                found.add((path.parent / rel).resolve())
    return sorted(found)


def _package_of(path: Path) -> tuple[str, Path]:
    """(dotted package name, its folder) of the nearest package above `path`."""
    folder = path.parent
    while not (folder / "__init__.py").is_file():
        folder = folder.parent
    return "clawloop." + ".".join(folder.relative_to(ROOT).parts), folder


def test_the_programs_are_files_the_code_reads():
    names = {p.relative_to(ROOT).as_posix() for p in _programs()}
    assert {
        "harness/sandbox/reset_dirs.sh",
        "harness/sandbox/kill_strays.sh",
        "harness/sandbox/launcher.c",
        "harness/taskfolder/templates/Dockerfile",
        "harness/taskfolder/templates/clawgym_test.sh",
        "harness/taskfolder/templates/solve.sh",
        "harness/taskfolder/templates/test.sh",
    } <= names
    assert all(p.is_file() for p in _programs())


def test_every_program_ships_as_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    for path in _programs():
        package, folder = _package_of(path)
        rel = path.relative_to(folder).as_posix()
        patterns = data.get("*", []) + data.get(package, [])
        assert any(
            fnmatch.fnmatch(rel, pat) and ("/" in pat) == ("/" in rel) for pat in patterns
        ), f"{path.relative_to(ROOT)} is not in pyproject.toml's package-data for {package}"


def test_a_missing_program_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="reinstall the package"):
        data_text(str(tmp_path / "mod.py"), "gone.sh")


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="needs shellcheck")
@pytest.mark.parametrize(
    "path", [p for p in _programs() if p.suffix == ".sh"], ids=lambda p: p.name
)
def test_each_shell_program_passes_shellcheck(path):
    rel = path.relative_to(ROOT).as_posix()
    exclude = SHELLCHECK_EXCLUDE.get(rel, [])
    argv = ["shellcheck", *(["-e", ",".join(exclude)] if exclude else []), str(path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
