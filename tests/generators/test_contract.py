"""The contract validator rejects every malformed build() result with a message naming the field."""

import pytest

from clawloop.generators.contract import ContractError, GeneratorMeta, check_relpath, validate_build


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
