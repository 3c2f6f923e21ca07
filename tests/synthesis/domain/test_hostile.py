"""Odd and hostile tools files: writes through closures, lambdas, helper chains, keyword calls,
recursion, walrus and state aliases are found; broken files fail with a named DomainError."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.model import DomainError

HOSTILE = Path(__file__).parents[2] / "fixtures" / "domains" / "hostile"
EXPECTED = {
    "nested": ({"items"}, {"items"}),  # `+=` in a closure: reads the old value, writes
    "via_lambda": (set(), {"items"}),
    "through_two_helpers": (set(), {"items"}),
    "recursive": (set(), {"log"}),
    "walrus": ({"items"}, {"items"}),
    "kwargs_helper": (set(), {"items"}),
    "alias_state": (set(), {"other"}),
    "reads_only_copy": ({"items"}, set()),  # a JSON round-trip copy is not the table
    "try_except": ({"items"}, {"items"}),
    "later": (set(), {"log"}),  # async def
}


def test_odd_tools_edge_by_edge():
    d = load_domain(HOSTILE)
    assert {t.name: (set(t.reads), set(t.writes)) for t in d.tools} == EXPECTED
    assert d.tool("try_except").errors == ("no item {code}",)


def _with_tool(tmp_path: Path, code: str) -> Path:
    root = tmp_path / "dom"
    shutil.copytree(HOSTILE, root)
    (root / "tools" / "extra.py").write_text(code)
    return root


@pytest.mark.parametrize(
    ("code", "what"),
    [
        ("def broken(state:\n", "does not parse"),
        ("def spread(state, *codes):\n    return {}\n", "takes *codes"),
        ("def spread(state, **params):\n    return {}\n", "takes **params"),
        ("def t(state):\n    return " + "+".join(["state['items']"] * 3000) + "\n", "too deeply"),
        (
            "class T:\n    def invoke(data):\n        return 1\n\n"
            "    @staticmethod\n    def get_info():\n        return {}\n",
            "must both be @staticmethod",
        ),
    ],
)
def test_broken_files_name_the_file(tmp_path, code, what):
    with pytest.raises(DomainError) as info:
        load_domain(_with_tool(tmp_path, code))
    assert "tools/extra.py" in str(info.value) and what in str(info.value)


def test_a_folder_named_like_a_tools_file_is_ignored(tmp_path):
    root = _with_tool(tmp_path, "def t(state):\n    return state['log']\n")
    (root / "tools" / "pkg.py").mkdir()
    assert load_domain(root).tool("t").reads == ("log",)
