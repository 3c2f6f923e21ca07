"""Contract violations: each a DomainError naming the file and what is wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.model import DomainError

FIXTURES = Path(__file__).parents[2] / "fixtures" / "domains"
TOML = '[domain]\nname = "t"\n\n[state]\nformat = "json"\npath = "state"\n'
GOOD_TOOL = 'def get(state, code: str) -> dict:\n    return state["items"][code]\n'


def _domain(tmp_path: Path, toml: str = TOML, tools: dict[str, str] | None = None) -> Path:
    root = tmp_path / "dom"
    (root / "state").mkdir(parents=True)
    (root / "state" / "items.json").write_text(json.dumps({"A1": {"code": "A1", "qty": 2}}))
    (root / "domain.toml").write_text(toml)
    (root / "tools").mkdir()
    for name, code in (tools if tools is not None else {"items.py": GOOD_TOOL}).items():
        (root / "tools" / name).write_text(code)
    return root


def _error(root: Path) -> str:
    with pytest.raises(DomainError) as info:
        load_domain(root)
    return str(info.value)


def test_a_minimal_domain_loads(tmp_path):
    d = load_domain(_domain(tmp_path))
    assert (d.name, d.tables, d.tool("get").reads) == ("t", ("items",), ("items",))
    assert d.policy == "" and d.keys == {}


@pytest.mark.parametrize(
    ("toml", "file", "what"),
    [
        ('[state]\nformat = "json"\npath = "state"\n', "domain.toml", "no [domain] name"),
        ('[domain]\nname = "t"\n', "domain.toml", "no [state] table"),
        (TOML.replace('"json"', '"csv"'), "domain.toml", "format is 'csv'"),
        (TOML.replace('path = "state"\n', ""), "domain.toml", "[state] has no path"),
        (TOML.replace('"state"', '"nowhere"'), "domain.toml", "is not a folder"),
        (TOML.replace('"json"', '"sqlite"'), "domain.toml", "is not a sqlite .db file"),
        (TOML + '\n[state.keys]\norders = "code"\n', "domain.toml", "names table 'orders'"),
        (TOML + '\n[state.keys]\nitems = "sku"\n', "domain.toml", "not a field of items"),
        ("[domain\nname=", "domain.toml", "not valid TOML"),
    ],
)
def test_toml_violations(tmp_path, toml, file, what):
    message = _error(_domain(tmp_path, toml))
    assert file in message and what in message


def test_missing_toml_and_empty_state(tmp_path):
    root = _domain(tmp_path)
    (root / "domain.toml").unlink()
    assert "domain.toml: not found" in _error(root)
    root = _domain(tmp_path / "b")
    (root / "state" / "items.json").unlink()
    assert "no <table>.json files" in _error(root)
    root = _domain(tmp_path / "c")
    (root / "state" / "items.json").write_text("[1, 2]")
    assert "items.json" in _error(root) and "list of records" in _error(root)


def test_tools_violations(tmp_path):
    root = _domain(tmp_path, tools={})
    assert "no tools/*.py" in _error(root)
    root = _domain(tmp_path / "a", tools={"bad.py": "def get(state:\n"})
    message = _error(root)
    assert "tools/bad.py" in message and "does not parse (line 1" in message
    root = _domain(tmp_path / "b", tools={"_only_helpers.py": GOOD_TOOL})
    assert "no tools found" in _error(root)
    root = _domain(tmp_path / "c", tools={"a.py": GOOD_TOOL, "b.py": GOOD_TOOL})
    assert "tool 'get' is also defined in tools/a.py" in _error(root)
    root = _domain(tmp_path / "d", tools={"a.py": "def ping():\n    return 1\n"})
    assert "takes no state argument" in _error(root)


CLASS = """
class Get:
    @staticmethod
    def invoke(data, code):
        return data["items"][code]

    @staticmethod
    def get_info():
        return {INFO}
"""


@pytest.mark.parametrize(
    ("info", "what"),
    [
        ('{"type": "function", "function": {"parameters": {}}}', "has no function name"),
        ('{"type": "function", "function": {"name": "get"}}', "has no parameters object"),
        ("dict(name='get')", "must return a dict literal"),
        (
            '{"type": "function", "function": {"name": "get", "parameters": {"type": "object", '
            '"properties": {"code": {"type": "string"}, "qty": {"type": "integer"}}}}}',
            "does not take qty",
        ),
    ],
)
def test_class_schema_violations(tmp_path, info, what):
    root = _domain(tmp_path, tools={"get.py": CLASS.replace("{INFO}", info)})
    message = _error(root)
    assert "tools/get.py" in message and what in message


def test_a_sqlite_state_that_is_not_a_database(tmp_path):
    root = tmp_path / "inn"
    shutil.copytree(FIXTURES / "sqlite_cls", root)
    (root / "state.db").write_text("not a database")
    assert "state.db: not a readable sqlite database" in _error(root)
