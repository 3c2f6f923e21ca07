"""Oracle pass rate and no-op fail rate of every built-in generator, on every sandbox backend.

By default a sample: every built-in capability x one domain each (rotating through the domain
list) x SEEDS seeds x every output format x each backend is forged and verified; `--full` takes
the whole matrix (every domain x all 16 multihop x dirtiness pairs x every format). Both rates must be 100%: the reference
solution passes its own verifier, and the untouched workspace never does. Docker is skipped, with
the reason, when no engine answers.

    .venv/bin/python scripts/oracle_rates.py [--seeds 3] [--backends bwrap,docker] [--workers 2]
        [--formats report] [--full]
Exit status 0 only when both rates are 100% on every backend that ran.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from clawloop.generators.candidates import candidate_row  # noqa: E402
from clawloop.generators.forge import forge_candidate  # noqa: E402
from clawloop.generators.meta import OUTPUT_FORMATS  # noqa: E402
from clawloop.generators.verify import verify_tasks  # noqa: E402
from clawloop.harness.sandbox.backend import docker_available  # noqa: E402
from clawloop.harness.sandbox.base import SandboxConfig  # noqa: E402
from clawloop.synthesis.library import capabilities, domains, render_generator  # noqa: E402

BATCH = 8  # tasks verified together, as the verify stage's default verify.batch


def candidates(
    n_seeds: int, formats: tuple[str, ...] = OUTPUT_FORMATS
) -> tuple[list[dict], list[str]]:
    """One candidate per capability x format x seed (difficulty knobs rotate with the seed)."""
    doms = domains()
    rows, problems = [], []
    for i, cap in enumerate(capabilities()):
        domain = doms[(i * 7) % len(doms)]
        try:
            render_generator(cap, domain)
        except Exception as exc:  # a broken built-in is a finding to print, not a crash
            problems.append(f"{cap}/{domain}: cannot render: {type(exc).__name__}: {exc}")
            continue
        for fmt in formats:
            for seed in range(n_seeds):
                try:
                    code = render_generator(
                        cap, domain, multihop=seed % 4, dirtiness=(seed + 1) % 4, output_format=fmt
                    )
                    rows.append(candidate_row(code, 1000 + seed, origin="builtin"))
                except Exception as exc:
                    problems.append(
                        f"{cap}/{domain}/{fmt}: cannot render: {type(exc).__name__}: {exc}"
                    )
    return rows, problems


def full_matrix(formats: tuple[str, ...] = OUTPUT_FORMATS) -> tuple[list[dict], list[str]]:
    """Every capability x every domain x all 16 multihop x dirtiness pairs x every format, one
    seed each (16,896 tasks: about 18 minutes on 2 cores with --workers 3, in batches of 8)."""
    rows, problems = [], []
    knobs = list(itertools.product(range(4), range(4)))
    for cap, domain, (m, d), fmt in itertools.product(capabilities(), domains(), knobs, formats):
        try:
            code = render_generator(cap, domain, multihop=m, dirtiness=d, output_format=fmt)
            rows.append(candidate_row(code, 1000 + m * 4 + d, origin="builtin"))
        except Exception as exc:
            problems.append(
                f"{cap}/{domain}/{m}{d}/{fmt}: cannot render: {type(exc).__name__}: {exc}"
            )
    return rows, problems


def run_batch(
    cands: list[dict], sb: SandboxConfig
) -> list[tuple[dict, bool, bool, str, str, bool]]:
    """Forge each candidate, then verify the batch as the verify stage does (verify_tasks). Per
    candidate: (candidate, oracle passed, noop failed, first oracle/noop problem, verdict
    reason, ablation passed: every injected difficulty changes the answer)."""
    out: dict[str, tuple[dict, bool, bool, str, str, bool]] = {}
    forged = []
    for cand in cands:
        row = forge_candidate(cand, sb)
        if row["status"] != "ok":
            why = f"forge {row['error_kind']}: {row['error'].splitlines()[0]}"
            out[cand["task_id"]] = (cand, False, False, why, why, False)
        else:
            forged.append((cand, row))
    verified = verify_tasks([row for _, row in forged], sb)
    for (cand, _), (checks, verdict) in zip(forged, verified, strict=True):
        by = {c["check"]: c for c in checks}
        oracle = by.get("oracle", {}).get("passed", False)
        noop = by.get("noop", {}).get("passed", False)
        bad = [
            f"{c['check']}: {c['reason']}"
            for c in checks
            if c["check"] in ("oracle", "noop") and not c["passed"]
        ]
        ablation = by.get("ablation", {}).get("passed", False)
        out[cand["task_id"]] = (
            cand,
            oracle,
            noop,
            bad[0] if bad else "",
            verdict["reason"],
            ablation,
        )
    return [out[c["task_id"]] for c in cands]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds per capability x format")
    ap.add_argument(
        "--full",
        action="store_true",
        help="the whole matrix (every domain x 16 knob pairs x format) instead of the sample",
    )
    ap.add_argument("--backends", default="bwrap,docker", help="comma-separated: bwrap, docker")
    ap.add_argument(
        "--formats",
        default=",".join(OUTPUT_FORMATS),
        help="comma-separated output formats to take (e.g. report: the free-report matrix)",
    )
    ap.add_argument("--workers", type=int, default=2, help="batches forged+verified at once")
    args = ap.parse_args()

    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    unknown = sorted(set(formats) - set(OUTPUT_FORMATS))
    if unknown:
        ap.error(f"--formats: unknown {unknown}; known: {list(OUTPUT_FORMATS)}")
    cands, problems = full_matrix(formats) if args.full else candidates(args.seeds, formats)
    what = "every domain x 16 knob pairs" if args.full else f"{args.seeds} seeds"
    print(
        f"{len(capabilities())} capabilities x {len(formats)} formats x {what} "
        f"= {len(cands)} tasks per backend"
    )
    for p in problems:
        print(f"  RENDER FAILED {p}")
    all_ok = not problems
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        if backend == "docker":
            why = docker_available()
            if why is not None:
                print(f"[docker] skipped: {why}")
                continue
        sb = SandboxConfig(backend=backend)
        t0 = time.monotonic()
        groups = [cands[i : i + BATCH] for i in range(0, len(cands), BATCH)]
        with ThreadPoolExecutor(args.workers) as pool:
            results = [r for g in pool.map(run_batch, groups, itertools.repeat(sb)) for r in g]
        took = time.monotonic() - t0
        n = len(results)
        oracle = sum(r[1] for r in results)
        noop = sum(r[2] for r in results)
        print(
            f"[{backend}] oracle pass rate {oracle}/{n} = {100 * oracle / max(n, 1):.1f}%   "
            f"no-op fail rate {noop}/{n} = {100 * noop / max(n, 1):.1f}%   ({took:.1f}s)"
        )
        per_cap = Counter(r[0]["capability"] for r in results if r[1] and r[2])
        abl = Counter(r[0]["capability"] for r in results if r[5])
        kept_cap = Counter(r[0]["capability"] for r in results if r[4] == "all checks passed")
        print(
            f"    ablation kept-rate {sum(abl.values())}/{n} = {100 * sum(abl.values()) / max(n, 1):.1f}%"
            "   (every injected difficulty changes the answer)"
        )
        for cap in capabilities():
            total = sum(1 for r in results if r[0]["capability"] == cap)
            print(
                f"    {cap:<26} {per_cap[cap]}/{total} pass oracle and no-op, "
                f"ablation {abl[cap]}/{total}, kept {kept_cap[cap]}/{total}"
            )
        kept = Counter(r[4].split(":")[0] for r in results)
        print("    verdicts (all checks): " + ", ".join(f"{k}: {v}" for k, v in kept.most_common()))
        for cand, _o, _n, why, _v, _a in results:
            if why:
                print(
                    f"    FAIL {cand['capability']}/{cand['domain']}/{cand['output_format']} "
                    f"seed {cand['seed']}: {why[:300]}"
                )
        all_ok = all_ok and oracle == n and noop == n
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
