"""The contract validator rejects every malformed build() result with a message naming the field."""

import pytest

from clawloop.generators.contract import ContractError, check_relpath, validate_build
from clawloop.generators.meta import GeneratorMeta


def good() -> dict:
    return {
        "instruction": "Total the hive weights per apiary.",
        "files": {"data/hives.csv": "hive,kg\nH-1,30.5\n"},
        "answer": {"output/totals.csv": [{"apiary": "A", "kg": 30.5}]},
        "contract": {
            "outputs": [
                {
                    "path": "output/totals.csv",
                    "format": "csv",
                    "columns": ["apiary", "kg"],
                    "key": ["apiary"],
                }
            ],
            "tolerance": {"abs": 0.01, "rel": 0.0},
            "decisions": ["Round to 1 decimal"],
        },
    }


def test_good_build_validates_and_digest_is_stable():
    a, b = validate_build(good()), validate_build(good())
    assert a.contract.outputs[0].key == ["apiary"]
    assert a.digest() == b.digest()
    changed = good()
    changed["files"]["data/hives.csv"] += "H-2,1\n"
    assert validate_build(changed).digest() != a.digest()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("answer"), "missing key"),
        (lambda d: d.update(instruction=""), "instruction"),
        (lambda d: d["files"].update({"../etc/passwd": "x"}), "escapes"),
        (lambda d: d["files"].update({"/abs": "x"}), "relative"),
        (lambda d: d["files"].update({"data/x.bin": b"x"}), "must be a str"),
        (lambda d: d["contract"]["outputs"][0].update(format="xlsx"), "format"),
        (lambda d: d["contract"]["outputs"][0].update(key=["nope"]), "key columns"),
        (lambda d: d["contract"].update(tolerance={"abs": -1}), "tolerance"),
        (lambda d: d.update(answer={"output/other.csv": []}), "graded outputs"),
        (lambda d: d["files"].update({"output/totals.csv": ""}), "already exist"),
    ],
)
def test_bad_build_is_rejected_with_reason(mutate, message):
    d = good()
    mutate(d)
    with pytest.raises(ContractError, match=message):
        validate_build(d)


def test_non_dict_result():
    with pytest.raises(ContractError, match="must return a dict"):
        validate_build(["not", "a", "dict"])


def test_meta_bounds():
    assert GeneratorMeta.from_dict({"capability": "c", "domain": "d", "multihop": 3}).multihop == 3
    with pytest.raises(ContractError, match="0..3"):
        GeneratorMeta.from_dict({"capability": "c", "domain": "d", "dirtiness": 4})
    with pytest.raises(ContractError, match="output_format"):
        GeneratorMeta.from_dict({"capability": "c", "domain": "d", "output_format": "xml"})


def test_relpath():
    assert check_relpath("a/b.csv", "x") == "a/b.csv"
    for bad in ["", "a/../../b", "./a", "a//b", "a\\b"]:
        with pytest.raises(ContractError):
            check_relpath(bad, "x")


def _json_build(schema: dict, value: object) -> dict:
    d = good()
    d["answer"] = {"output/r.json": value}
    d["contract"]["outputs"] = [{"path": "output/r.json", "format": "json", "schema": schema}]
    return d


def test_a_list_of_records_needs_a_key_or_ordered():
    rows = {"rows": [{"id": "a", "n": 1}, {"id": "b", "n": 2}]}
    with pytest.raises(ContractError, match=r"rows is a list of records.*\"key\""):
        validate_build(_json_build({"properties": {"rows": {"type": "array"}}}, rows))
    keyed = {"properties": {"rows": {"type": "array", "key": ["id"]}}}
    assert validate_build(_json_build(keyed, rows)).contract.outputs[0].schema == keyed
    ordered = {"properties": {"rows": {"type": "array", "ordered": True}}}
    validate_build(_json_build(ordered, rows))
    with pytest.raises(ContractError, match="not in every row"):
        validate_build(_json_build({"properties": {"rows": {"key": ["name"]}}}, rows))
    # inside a keyed map too: each value's schema is additionalProperties
    nested = {"HV-1": [{"t": 1}], "HV-2": [{"t": 2}]}
    with pytest.raises(ContractError, match=r"HV-1 is a list of records"):
        validate_build(_json_build({"additionalProperties": {"type": "array"}}, nested))


def test_unknown_leniencies_are_refused():
    d = good()
    d["contract"]["outputs"][0]["lenient"] = ["column_order", "anything_goes"]
    with pytest.raises(ContractError, match="unknown \\['anything_goes'\\]"):
        validate_build(d)
    d["contract"]["outputs"][0]["lenient"] = ["column_order"]
    assert validate_build(d).contract.outputs[0].lenient == ["column_order"]


def _report_build(criteria: object = None, covers: object = None) -> dict:
    d = good()
    out = {"path": "output/r.md", "format": "report", "sidecar": "output/f.json", "schema": {}}
    if covers is not None:
        out["covers"] = covers
    d["contract"]["outputs"] = [out]
    d["answer"] = {"output/f.json": {"worst": "H-1", "total_kg": 30.5}}
    if criteria is not None:
        d["answer"]["output/r.md"] = criteria
    return d


def test_a_reports_criteria_come_from_its_sidecar_unless_given():
    derived = validate_build(_report_build())
    assert derived.answer["output/r.md"] == {
        "facts": [
            {"about": {}, "field": "worst", "value": "H-1"},
            {"about": {}, "field": "total_kg", "value": 30.5},
        ]
    }
    assert derived.contract.outputs[0].covers == [{"per": [], "fields": ["worst", "total_kg"]}]
    own = [{"about": {"hive": "H-1"}, "field": "kg", "value": 30.5}]
    no = [{"about": {"hive": "H-2"}, "field": "kg", "value": 99.5}]
    given = validate_build(_report_build({"facts": own, "forbidden": no}))
    assert given.answer["output/r.md"] == {"facts": own, "forbidden": no}
    assert given.contract.outputs[0].covers == [{"per": ["hive"], "fields": ["kg"]}]


@pytest.mark.parametrize(
    "criteria, covers, message",
    [
        (["not", "a", "dict"], None, "facts"),
        ({"facts": [], "hints": []}, None, "facts"),
        ({"facts": [{"about": {}, "field": "x", "value": [1]}]}, None, "a string, number"),
        ({"facts": [{"about": {}, "field": "", "value": 1}]}, None, "a string, number"),
        ({"facts": [{"about": {}, "field": "x", "value": 1, "where": "?"}]}, None, "where"),
        ({"facts": []}, None, "needs facts"),
        (None, [{"per": [], "fields": ["worst"]}], r"covers does not name .*total_kg"),
        (None, [{"per": "hive", "fields": ["worst"]}], "covers"),
    ],
)
def test_bad_report_criteria_are_refused(criteria, covers, message):
    with pytest.raises(ContractError, match=message):
        validate_build(_report_build(criteria, covers))
