"""`clawloop domain graph DIR [--json]`: the fixed JSON shape, a readable table, exit 2 with the
DomainError on stderr for a folder that breaks the contract."""

from __future__ import annotations

import json

from clawloop.flows.cli import main
from clawloop.synthesis.domain.load import builtin_domains


def test_graph_json_on_each_builtin_domain(capsys):
    for root in builtin_domains():
        assert main(["domain", "graph", str(root), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert set(out) == {"domain", "tables", "tools", "skills"}
        assert out["domain"] == root.name
        names = [t["name"] for t in out["tools"]]
        assert len(names) >= 10
        assert sorted(n for s in out["skills"] for n in s["tools"]) == sorted(names)
        for t in out["tools"]:
            assert set(t) == {"name", "params", "returns", "reads", "writes"}
            assert set(t["reads"]) | set(t["writes"]) <= set(out["tables"])


def test_graph_table(capsys):
    root = next(p for p in builtin_domains() if p.name == "seed_library")
    assert main(["domain", "graph", str(root)]) == 0
    out = capsys.readouterr().out
    assert "seed_library" in out and "checkout_pa" in out


def test_contract_error_exits_2_with_the_message(tmp_path, capsys):
    (tmp_path / "domain.toml").write_text('[domain]\nname = "x"\n[state]\nformat = "yaml"\n')
    assert main(["domain", "graph", str(tmp_path), "--json"]) == 2
    err = capsys.readouterr()
    assert err.out == ""
    assert "domain.toml: [state] format is 'yaml'" in err.err
