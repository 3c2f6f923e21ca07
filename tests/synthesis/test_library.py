"""Built-in generator library: every capability renders a contract-valid, deterministic, solvable task
whose untouched workspace and trivial probes fail, and whose instruction/contract leak no answer."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clawloop.generators.contract import validate_build
from clawloop.generators.meta import OUTPUT_FORMATS
from clawloop.generators.verify import hidden_answer, undefined_decision_fields
from clawloop.harness.taskfolder.grader import grade
from clawloop.harness.taskfolder.probes import trivial_probes
from clawloop.synthesis import catalog
from clawloop.synthesis import vocabularies as domains
from clawloop.synthesis.library import RenderError, list_builtin, render_generator

DEFAULT_DOMAINS = ("apiculture", "amateur_radio", "textile_conservation")
COMBOS = ((0, 0), (1, 2), (2, 1), (3, 3))
SEEDS = (0, 1, 2)


def load(src: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "generator"}
    exec(compile(src, "generator.py", "exec"), ns)
    return ns


def write(ws: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def leaves(v: Any):
    if isinstance(v, dict):
        for x in v.values():
            yield from leaves(x)
    elif isinstance(v, list):
        for x in v:
            yield from leaves(x)
    else:
        yield v


def leaked(build: dict[str, Any]) -> list[str]:
    """Answer values (numbers beyond 0/1, strings of 3+ chars) found in instruction or contract text."""
    text = build["instruction"] + "\n" + json.dumps(build["contract"], ensure_ascii=False)
    numbers = {float(t) for t in re.findall(r"-?\d+(?:\.\d+)?", text)}
    out = []
    for v in leaves(hidden_answer(build["answer"], build["contract"])):
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int | float):
            if abs(v) > 1 and float(v) in numbers:
                out.append(repr(v))
        elif (
            isinstance(v, str)
            and len(v) >= 3
            and re.search(r"(?<![\w-])" + re.escape(v) + r"(?![\w-])", text)
        ):
            out.append(v)
    return out


def check_task(src: str, seed: int, tmp: Path) -> None:
    ns = load(src)
    b = ns["build"](seed)
    br = validate_build(b)
    assert b["instruction"].splitlines()[0]
    again = load(src)["build"](seed)
    assert json.dumps(again, sort_keys=True) == json.dumps(b, sort_keys=True), (
        "build is not deterministic"
    )
    assert br.digest() == validate_build(again).digest()
    assert not leaked(b), f"answer values leak into instruction/contract: {leaked(b)[:5]}"
    ws = tmp / f"ws{seed}"
    write(ws, b["files"])
    b = br.to_dict()  # graded as forge writes it: a report's criteria filled in
    assert grade(b["contract"], b["answer"], str(ws))["reward"] < 1.0, (
        "the untouched workspace passes"
    )
    ns["solve"](str(ws))
    g = grade(b["contract"], b["answer"], str(ws))
    assert g["passed"] and g["reward"] == 1.0, [c for c in g["checks"] if not c["passed"]][:3]
    for name, outputs in trivial_probes(b["contract"], b["files"]).items():
        pw = tmp / f"probe-{name}{seed}"  # the grader reads only outputs: inputs need not be copied
        write(pw, outputs)
        r = grade(b["contract"], b["answer"], str(pw))["reward"]
        assert r < 1.0, f"probe {name} passes the grader"


def test_catalog_and_domains_sizes() -> None:
    assert len(catalog.CAPABILITIES) >= 8
    assert len(domains.DOMAINS) >= 30
    for d in domains.DOMAINS.values():
        assert len(set(d.names)) >= 12 and len(d.groups) >= 4 and len(d.categories) >= 4, d.name
        assert d.low < d.high and d.alt_factor > 0 and d.alt_unit != d.unit, d.name
        assert d.excluded_status in d.statuses[1:], d.name
    assert len(list_builtin()) == len(catalog.CAPABILITIES) * len(domains.DOMAINS)


def test_render_rejects_bad_knobs() -> None:
    with pytest.raises(RenderError):
        render_generator("reconciliation", "apiculture", 4, 0, "csv")
    with pytest.raises(RenderError):
        render_generator("reconciliation", "apiculture", 0, 0, "xml")
    with pytest.raises(KeyError):
        render_generator("no_such_capability", "apiculture")
    with pytest.raises(KeyError):
        render_generator("reconciliation", "atlantis")


def test_rendered_source_is_standard_library_only() -> None:
    src = render_generator("unit_schema_normalisation", "river_gauging", 3, 3, "report")
    imports = set(re.findall(r"^\s*(?:from|import)\s+([\w.]+)", src, re.M))
    assert imports <= {"csv", "io", "json", "os", "random", "string", "decimal", "datetime"}, (
        imports
    )
    assert src.startswith('"""') and "GENERATOR = {" in src
    meta = load(src)["GENERATOR"]
    assert meta == {
        "capability": "unit_schema_normalisation",
        "domain": "river_gauging",
        "multihop": 3,
        "dirtiness": 3,
        "output_format": "report",
    }


def test_domains_change_the_files() -> None:
    a = load(render_generator("reconciliation", "apiculture", 1, 0, "csv"))["build"](5)
    b = load(render_generator("reconciliation", "vineyard_blocks", 1, 0, "csv"))["build"](5)
    assert any("hive_id" in t for t in a["files"].values())
    assert any("block_id" in t for t in b["files"].values()) and not any(
        "hive" in p for p in b["files"]
    )


def test_multihop_needs_the_joins() -> None:
    """At multihop 3 the group names live only in the register, reached through the alias map."""
    b = load(render_generator("time_window_aggregation", "trail_maintenance", 3, 0, "csv"))[
        "build"
    ](3)
    assert {
        "data/index.csv",
        "reference/district_register.csv",
        "reference/district_code_aliases.csv",
    } <= set(b["files"])
    groups = {r["district"] for r in b["answer"]["output/monthly_totals.csv"]}
    details = [t for p, t in b["files"].items() if p.startswith("data/segments/")]
    assert groups and not any(g in t for g in groups for t in details)


def test_dirtiness_adds_distractors_and_legacy_schema() -> None:
    clean = load(render_generator("reconciliation", "apiculture", 0, 0, "json"))["build"](1)
    dirty = load(render_generator("reconciliation", "apiculture", 0, 3, "json"))["build"](1)
    assert not any(p.startswith(("archive/", "reference/")) for p in clean["files"])
    assert any(p.startswith("archive/") for p in dirty["files"])
    legacy = dirty["files"]["data/inspection_ledger_legacy.csv"]
    assert legacy.splitlines()[0] == "uom,kind,HoneyYield,logged_on,hive_ref"
    main = dirty["files"]["data/inspection_ledger.csv"]
    assert ",test," in main + legacy and ",lb" in main  # test rows and pound readings
    assert "lb,kg,2.20462" in dirty["files"]["reference/unit_conversions.csv"]
    rules = json.dumps(dirty["contract"])
    assert (
        "2.20462" not in rules and "unit_conversions.csv" in rules
    )  # the factor is data, not a rule


@pytest.mark.parametrize("capability", list(catalog.CAPABILITIES))
def test_capability_matrix(capability: str, tmp_path: Path) -> None:
    for i, domain in enumerate(DEFAULT_DOMAINS):
        for j, fmt in enumerate(OUTPUT_FORMATS):
            for h, d in COMBOS[(i + j) % 2 :: 2]:
                src = render_generator(capability, domain, h, d, fmt)
                for seed in SEEDS:
                    check_task(src, seed, tmp_path / f"{domain}-{fmt}-{h}{d}")


@pytest.mark.slow
@pytest.mark.parametrize("capability", list(catalog.CAPABILITIES))
def test_capability_all_domains(capability: str, tmp_path: Path) -> None:
    for k, domain in enumerate(domains.DOMAINS):
        for j, fmt in enumerate(OUTPUT_FORMATS):
            h, d = COMBOS[(k + j) % len(COMBOS)]
            check_task(
                render_generator(capability, domain, h, d, fmt), k, tmp_path / f"{domain}-{fmt}"
            )


def test_rendered_file_runs_standalone_in_a_bare_interpreter(tmp_path: Path) -> None:
    """What the sandboxed runner does: a lone file, `python3 -I`, no clawloop on the path."""
    import subprocess
    import sys

    gen = tmp_path / "generator.py"
    gen.write_text(render_generator("multi_document_merge", "seed_library", 2, 3, "multi"))
    script = (
        "import json, runpy, sys; ns = runpy.run_path(sys.argv[1]); b = ns['build'](9); "
        "json.dump({'n': len(b['files']), 'answer': sorted(b['answer'])}, sys.stdout)"
    )
    p = subprocess.run(
        [sys.executable, "-I", "-c", script, str(gen)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["answer"] == ["output/merged.csv", "output/summary.json"] and out["n"] > 5


def _solved(capability: str, fmt: str, h: int, d: int, seed: int, ws: Path) -> dict[str, Any]:
    ns = load(render_generator(capability, "apiculture", h, d, fmt))
    task = validate_build(ns["build"](seed)).to_dict()
    write(ws, task["files"])
    ns["solve"](str(ws))
    return task


@pytest.mark.parametrize("capability", list(catalog.CAPABILITIES))
def test_a_report_is_graded_on_its_text(capability: str, tmp_path: Path) -> None:
    """The sidecar right and the report garbage, empty or off by one number: the task fails."""
    task = _solved(capability, "report", 1, 2, 5, tmp_path)
    report = tmp_path / "output" / "report.md"
    honest = report.read_text()
    assert grade(task["contract"], task["answer"], str(tmp_path))["passed"]
    facts = task["answer"]["output/report.md"]["facts"]
    row = next(f for f in facts if f["about"] and isinstance(f["value"], float))
    line = next(x for x in honest.splitlines() if f"| {next(iter(row['about'].values()))} |" in x)
    wrong = line.replace(f"| {row['value']} |", f"| {row['value'] + 1.5} |")
    assert wrong != line
    for text in ("x", "", honest.replace(line, wrong)):
        report.write_text(text)
        g = grade(task["contract"], task["answer"], str(tmp_path))
        assert not g["passed"], text[:40]
        assert all(c["passed"] for c in g["checks"] if "report_facts.json" in c["name"])


@pytest.mark.parametrize("capability", list(catalog.CAPABILITIES))
def test_every_field_the_decisions_define_is_in_some_output(capability: str) -> None:
    """csv tasks hold no summary: their rules and instruction say nothing of one."""
    for fmt in OUTPUT_FORMATS:
        for h, d in COMBOS:
            task = validate_build(
                load(render_generator(capability, "amateur_radio", h, d, fmt))["build"](h + d)
            ).to_dict()
            c = task["contract"]
            assert undefined_decision_fields(c, task["answer"], task["files"]) == [], (fmt, h, d)
            if fmt == "csv":
                assert "summary" not in task["instruction"]


def test_entity_resolution_leaves_blank_rows_out_of_every_count(tmp_path: Path) -> None:
    """Dirtiness 2 blanks some measures: the rule says such a row is left out entirely (not
    only out of the sums), and the key agrees: records and matched skip it too."""
    ns = load(render_generator("entity_resolution", "apiculture", 0, 2, "json"))
    m = ns["V"]["measure"]
    for seed in range(8):
        task = ns["build"](seed)
        rules = " ".join(task["contract"]["decisions"])
        assert "leave it out entirely" in rules and "counts in no records" in rules
        assert "out of every sum, mean, count" not in rules  # the old, ambiguous wording
        ws = tmp_path / str(seed)
        write(ws, task["files"])
        reg = ns["load_registry"](str(ws))
        intake = ns["read_table"](str(ws), ns["_path"](), ns["_columns"](), [m])
        usable = [r for r in intake if r[m] is not None]
        if len(usable) == len(intake):
            continue
        doc = task["answer"]["output/resolved.json"]
        # the key is computed as if the file did not hold the blank rows
        resolved = sorted(doc[ns["V"]["entities"]], key=lambda r: r[ns["id_col"]()])
        assert (resolved, doc["summary"]) == ns["_compute"](reg, usable)
        return
    raise AssertionError("no seed blanked a measure")
