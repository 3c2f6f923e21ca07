"""Measure (not a test): the reward of each sabotaged end state of test_end_state_complete.py.

Run from a checkout's root, e.g. `python benchmarks/domain_sabotage.py`;
copied beside an older checkout's tests, it measures that code (the "before" figures).
"""

import sys
import tempfile
from pathlib import Path

sys.path[:0] = ["tests/synthesis/domain", "tests"]

import test_end_state_complete as T  # noqa: E402
from _sabotage import end_state, make, reward  # noqa: E402

from clawloop.synthesis.domain.ground import Step  # noqa: E402


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    n = iter(range(10_000))

    def ws() -> Path:
        return tmp / f"w{next(n)}"

    ap = make("apiary_coop", T.APIARY_STEPS, T._apiary_reference, tmp / "a")
    rt = make("retail", T.RETAIL_STEPS, T._retail_reference, tmp / "r")
    training = [Step("record_training", {"member_no": "M-0004", "date": "2025-03-01"})]
    lib = make("seed_library", training, T.LIBRARY_REFERENCE, tmp / "l")
    rows = [("apiary", "reference end state", reward(ap, end_state(ap), ws())[0])]
    rows += [("apiary", k, reward(ap, T._sabotaged(ap, f), ws())[0])
             for k, f in sorted(T.APIARY_SABOTAGE.items())]  # fmt: skip
    junk = {"state/zz_junk.json": '{"x": {"note": "left"}}'}
    rows.append(("apiary", "extra table", reward(ap, end_state(ap), ws(), extra=junk)[0]))
    rows.append(("retail", "reference end state", reward(rt, end_state(rt), ws())[0]))
    rows += [("retail", k, reward(rt, T._sabotaged(rt, f), ws())[0])
             for k, f in sorted(T.RETAIL_SABOTAGE.items())]  # fmt: skip
    rows.append(("retail", "extra table", reward(rt, end_state(rt), ws(), extra=junk)[0]))
    rows.append(("seed_library", "reference end state", reward(lib, end_state(lib), ws())[0]))
    rows += [("seed_library", k, reward(lib, end_state(lib, sql=sql), ws())[0])
             for k, sql in sorted(T.LIBRARY_SABOTAGE.items())]  # fmt: skip
    stripped = {lib.snapshot: T._strip_checks(lib.final_sql)}
    rows.append(("seed_library", "CHECK constraints stripped", reward(lib, stripped, ws())[0]))
    for d, k, r in rows:
        print(f"{d}\t{k}\t{r:.3f}")


if __name__ == "__main__":
    main()
