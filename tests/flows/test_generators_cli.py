"""`clawloop generators list | render`: the library shown, one generator written as a file that
the contract accepts and forge builds."""

from __future__ import annotations

from clawloop.flows.cli import main
from clawloop.generators.candidates import candidate_row
from clawloop.synthesis.catalog import CAPABILITIES


def test_list_names_every_capability_and_domain(capsys):
    assert main(["generators", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in CAPABILITIES) and "apiculture" in out


def test_render_writes_a_standalone_generator_with_the_asked_knobs(tmp_path, capsys):
    out = tmp_path / "mine" / "hives.py"
    argv = ["generators", "render", "reconciliation", "--domain", "apiculture"]
    argv += ["--multihop", "2", "--dirtiness", "1", "--format", "csv", "--out", str(out)]
    assert main(argv) == 0
    row = candidate_row(out.read_text(), seed=1, where=str(out))
    assert (row["capability"], row["domain"], row["multihop"], row["dirtiness"]) == (
        "reconciliation",
        "apiculture",
        2,
        1,
    )
    assert row["output_format"] == "csv" and "clawloop forge" in capsys.readouterr().out


def test_render_of_an_unknown_capability_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["generators", "render", "nope", "--out", str(tmp_path / "x.py")]) == 2
    err = capsys.readouterr().err
    assert "unknown capability 'nope'" in err and err.count("\n") == 1
    assert not (tmp_path / "x.py").exists()
