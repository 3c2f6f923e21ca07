"""The synthesize stage: sample candidate tasks (generator code + seed) for one iteration.

Candidates come from two pools: the built-in library (a generator rendered per capability, domain,
difficulty and output format; `synthesis/library.py`) and the user's own generator files or folders
(their `GENERATOR` metadata is read with `ast.literal_eval`: user code is never imported here, it
only ever runs inside a sandbox at forge time).

Held-out evaluation is split by *family*: whole (capability, domain) groups go to eval, chosen from
the run seed alone, so every iteration evaluates on the same unseen groups and no eval task is a
near-copy of a train task. With a single (capability, domain) group (one user generator, say) no
group can be held out while another trains, so *seeds* of the same generators are held out instead:
`eval_fraction` of that iteration's candidates (at least one eval and one train when there are two
or more), picked by hash in (run seed, iteration); eval and train seeds never coincide, so they are
different tasks. The summary's `split` says which hold-out was used. `fixed_eval` keeps iteration
1's eval candidates in every iteration (the measurement `benchmarks/learning.py` wants: the same
held-out tasks before and after each train stage), instead of fresh seeds at the guided difficulty.
Output formats rotate round-robin across the candidates of a run.
Guidance from the previous diagnose stage (capability weights, difficulty per capability) steers
the train sample; without it, capabilities are uniform and difficulty comes from the config.
Everything is deterministic in (run seed, iteration).

`llm.share` picks a deterministic fraction of the train candidates (`llm_picks`) whose generator
the synthesis LLM rewrites with the same spec (synthesis/llm_writer.py; the stage wiring is in
tasks/llm_source.py); `writer.endpoint` names its endpoint, by default the policy's own (no
teacher). The settings themselves, one section per source: synthesis/config.py.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from clawloop.generators.candidates import candidate_row, parse_meta_at
from clawloop.generators.meta import OUTPUT_FORMATS, ContractError, GeneratorMeta
from clawloop.storage.schemas import INFRA_END_REASONS
from clawloop.synthesis.config import MAX_LEVEL, SynthesizeConfig

log = logging.getLogger("clawloop.synthesize")


class SynthesisError(ValueError):
    """Nothing can be synthesized with this configuration."""


@dataclass(frozen=True)
class Family:
    """A generator family: one (capability, domain) group; user files carry fixed code."""

    capability: str
    domain: str
    origin: str  # builtin | user:<path>
    code: str = ""  # user generators: the file's source; builtin: rendered per candidate
    output_format: str = ""  # user generators: fixed by their metadata


def read_generator_meta(source: str, where: str) -> GeneratorMeta:
    """GENERATOR metadata and docstring title of generator source, without executing it."""
    return parse_meta_at(source, where).meta


def user_families(paths: list[str]) -> tuple[list[Family], list[str]]:
    """Families from user files/folders; returns (families, problems) — a bad file is skipped."""
    files: list[Path] = []
    problems: list[str] = []
    for p in paths:
        path = Path(p).expanduser()
        if path.is_dir():
            files.extend(sorted(f for f in path.rglob("*.py") if not f.name.startswith("_")))
        elif path.is_file():
            files.append(path)
        else:
            problems.append(f"{p}: no such file or folder (synthesize.generator_paths)")
    families = []
    for f in files:
        try:
            source = f.read_text()
            meta = read_generator_meta(source, str(f))
        except (OSError, UnicodeDecodeError, ContractError) as exc:
            problems.append(str(exc))
            continue
        families.append(
            Family(meta.capability, meta.domain, f"user:{f}", source, meta.output_format)
        )
    for msg in problems:
        log.warning("skipping user generator: %s", msg)
    return families, problems


def builtin_families(cfg: SynthesizeConfig) -> list[Family]:
    """Every (capability, domain) pair the built-in library can render, optionally restricted."""
    from clawloop.synthesis.library import (
        list_builtin,  # lazy: only when the built-in library is on
    )

    pairs = list_builtin()
    if cfg.capabilities:
        pairs = [p for p in pairs if p[0] in cfg.capabilities]
    if cfg.domains:
        pairs = [p for p in pairs if p[1] in cfg.domains]
    return [Family(cap, dom, "builtin") for cap, dom in pairs]


def _h(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big")


def split_groups(
    families: list[Family], run_seed: int, eval_fraction: float
) -> set[tuple[str, str]]:
    """The (capability, domain) groups held out for eval: fixed by the run seed, not the iteration."""
    groups = sorted(
        {(f.capability, f.domain) for f in families}, key=lambda g: (_h(run_seed, "split", *g), g)
    )
    if len(groups) < 2 or eval_fraction <= 0:
        return set()
    n_eval = min(len(groups) - 1, max(1, round(eval_fraction * len(groups))))
    return set(groups[:n_eval])


def split_seeds(
    rows: list[dict[str, Any]], run_seed: int, iteration: int, eval_fraction: float, n_train: int
) -> set[int]:
    """Indexes of the rows held out for eval when only one (capability, domain) group exists: the
    same share as split_groups uses (`eval_fraction`, at least one eval and one train row when there
    are two or more), picked by hash so it is deterministic in (run seed, iteration)."""
    if not rows or eval_fraction <= 0:
        return set()
    if len(rows) == 1:  # nothing to share: the lone row is eval only when no train was asked for
        return set() if n_train > 0 else {0}
    n_eval = min(len(rows) - 1, max(1, round(eval_fraction * len(rows))))
    ranked = sorted(
        range(len(rows)),
        key=lambda i: (_h(run_seed, "seed-split", iteration, rows[i]["task_id"]), i),
    )
    return set(ranked[:n_eval])


def _levels(
    capability: str, cfg: SynthesizeConfig, guidance: dict[str, Any], iteration: int
) -> tuple[int, int]:
    """(multihop, dirtiness) for a capability: the guidance's wish, floored at the configured start
    (difficulty never drops below it), at most one level per iteration above it, never above 3."""
    want = (guidance.get("difficulty") or {}).get(capability) or {}
    grown = max(0, iteration - 1)

    def level(wanted: Any, start: int) -> int:
        return max(start, min(int(wanted), start + grown, MAX_LEVEL))

    return (
        level(want.get("multihop", cfg.multihop), cfg.multihop),
        level(want.get("dirtiness", cfg.dirtiness), cfg.dirtiness),
    )


def _weights(capabilities: list[str], guidance: dict[str, Any]) -> list[float]:
    """Sampling weights from the guidance. A capability the guidance does not know (a user
    generator outside the catalog, say) gets the mean guided weight, so it keeps being sampled."""
    given = {c: max(0.0, float(w)) for c, w in (guidance.get("capability_weights") or {}).items()}
    unknown = sum(given.values()) / len(given) if given else 1.0
    ws = [given.get(c, unknown) for c in capabilities]
    return ws if sum(ws) > 0 else [1.0] * len(capabilities)


def _candidate(
    fam: Family, seed: int, split: str, fmt: str, levels: tuple[int, int]
) -> dict[str, Any]:
    if fam.origin == "builtin":
        from clawloop.synthesis.library import render_generator  # lazy, like list_builtin

        code = render_generator(fam.capability, fam.domain, levels[0], levels[1], fmt)
        where = f"builtin {fam.capability}/{fam.domain}"
    else:
        code, where = fam.code, fam.origin
    return candidate_row(code, seed, origin=fam.origin, split=split, where=where)


def _sample(
    families: list[Family],
    n: int,
    split: str,
    rng: random.Random,
    fmt_offset: int,
    cfg: SynthesizeConfig,
    guidance: dict[str, Any],
    iteration: int,
    problems: list[str],
    unique_seeds: bool = False,
) -> list[dict[str, Any]]:
    """Up to n candidate rows; `unique_seeds` also refuses a seed a family already used (the seed
    hold-out needs eval and train rows of one generator to differ in seed, not only in task id)."""
    by_cap: dict[str, list[Family]] = {}
    for f in families:
        by_cap.setdefault(f.capability, []).append(f)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    seeds: set[tuple[str, int]] = set()
    for _ in range(
        n * 4
    ):  # a few extra draws absorb duplicate ids and families that fail to render
        caps = sorted(c for c, fams in by_cap.items() if fams)
        if len(rows) == n or not caps:
            break
        weights = _weights(caps, guidance) if split == "train" else [1.0] * len(caps)
        cap = rng.choices(caps, weights=weights)[0]
        fam = rng.choice(sorted(by_cap[cap], key=lambda f: (f.domain, f.origin)))
        fmt = fam.output_format or OUTPUT_FORMATS[(fmt_offset + len(rows)) % len(OUTPUT_FORMATS)]
        try:
            row = _candidate(
                fam, rng.randrange(2**31), split, fmt, _levels(cap, cfg, guidance, iteration)
            )
        except (
            OSError,
            ValueError,
            KeyError,
        ) as exc:  # a library entry that cannot render: drop it
            problems.append(
                f"{fam.origin} {fam.capability}/{fam.domain}: {type(exc).__name__}: {exc}"
            )
            log.warning("dropping generator family: %s", problems[-1])
            by_cap[cap].remove(fam)
            continue
        if unique_seeds and (fam.origin, row["seed"]) in seeds:
            continue
        if row["task_id"] not in seen:
            seen.add(row["task_id"])
            seeds.add((fam.origin, row["seed"]))
            rows.append(row)
    return rows


def share_of(n: int, share: float) -> int:
    """How many of n rows a share asks for: ceil(share * n), none for a share of 0."""
    return min(n, math.ceil(share * n - 1e-9)) if share > 0 else 0


K = TypeVar("K")


def failure_rate_weights(
    uses: Mapping[str, Iterable[K]], trajectories: Iterable[Mapping[str, Any]]
) -> dict[K, float]:
    """What a task uses (a skill, a (domain, skill)) -> 1 + the failure rate of the episodes on
    the tasks that use it (so 1..2): how the synthesis sources draw more of what the policy
    fails. `uses` maps task ids to what each uses; infrastructure-ended episodes don't count."""
    runs: Counter[K] = Counter()
    fails: Counter[K] = Counter()
    for t in trajectories:
        if t["task_id"] not in uses or t["end_reason"] in INFRA_END_REASONS:
            continue
        for key in uses[t["task_id"]]:
            runs[key] += 1
            fails[key] += not t["passed"]
    return {key: round(1.0 + fails[key] / n, 6) for key, n in sorted(runs.items())}


def llm_picks(rows: list[dict[str, Any]], share: float, run_seed: int, iteration: int) -> list[int]:
    """Indexes of the train rows the LLM writes: ceil(share * train rows), chosen by hash so the
    pick is deterministic in (run seed, iteration) and spread over capabilities."""
    train = [i for i, r in enumerate(rows) if r["split"] == "train"]
    n = share_of(len(train), share)
    ranked = sorted(train, key=lambda i: (_h(run_seed, "llm", iteration, rows[i]["task_id"]), i))
    return sorted(ranked[:n])


def with_fixed_eval(
    rows: list[dict[str, Any]], first: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """This iteration's train rows + iteration 1's eval rows (`first`: iteration 1's candidates).
    A train row that is one of those eval tasks (same task id, or same generator and seed) is
    dropped, so no eval task is ever trained on."""
    evals = [r for r in first if r["split"] == "eval"]
    ids = {r["task_id"] for r in evals}
    seeds = {(r["origin"], r["seed"]) for r in evals}
    train = [
        r
        for r in rows
        if r["split"] == "train"
        and r["task_id"] not in ids
        and (r["origin"], r["seed"]) not in seeds
    ]
    return train + evals


def synthesize(
    cfg: SynthesizeConfig,
    run_seed: int,
    iteration: int,
    guidance: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Candidate rows (storage.schemas.CANDIDATES) for one iteration, and a summary for humans."""
    families: list[Family] = []
    problems: list[str] = []
    if cfg.builtin:
        families += builtin_families(cfg)
    if cfg.generator_paths:
        user, problems = user_families(cfg.generator_paths)
        families += user
    if not families:
        hint = "turn synthesize.builtin on, or list generator files/folders in synthesize.generator_paths"
        extra = f" ({'; '.join(problems)})" if problems else ""
        raise SynthesisError(f"no generators to sample from{extra}: {hint}")
    guidance = guidance or {}
    groups = {(f.capability, f.domain) for f in families}
    rng = random.Random(_h(run_seed, "iteration", iteration))
    # Formats continue their rotation across iterations instead of restarting at json each time.
    offset = (iteration - 1) * (cfg.n_train + cfg.n_eval)
    render_problems: list[str] = []
    held_out: set[tuple[str, str]] = set()
    if len(groups) >= 2:
        held_out = split_groups(families, run_seed, cfg.eval_fraction)
        train = [f for f in families if (f.capability, f.domain) not in held_out]
        evals = [f for f in families if (f.capability, f.domain) in held_out]
        rows = _sample(
            train, cfg.n_train, "train", rng, offset, cfg, guidance, iteration, render_problems
        )
        rows += _sample(
            evals,
            cfg.n_eval,
            "eval",
            rng,
            offset + cfg.n_train,
            cfg,
            guidance,
            iteration,
            render_problems,
        )
        split = (
            "whole (capability, domain) groups held out"
            if held_out
            else "nothing held out: synthesize.eval_fraction is 0"
        )
    elif cfg.eval_fraction <= 0 or cfg.n_eval == 0:
        # One group and no hold-out asked for: n_train train rows, as before.
        rows = _sample(
            families, cfg.n_train, "train", rng, offset, cfg, guidance, iteration, render_problems
        )
        why = "eval_fraction" if cfg.eval_fraction <= 0 else "n_eval"
        split = f"nothing held out: only 1 (capability, domain) group and synthesize.{why} is 0"
    else:
        # One group: no whole group can be held out while another trains, so hold out seeds of the
        # same generators. One pool of n_train + n_eval rows with distinct seeds per generator; a
        # hashed eval_fraction share of it becomes eval.
        pool = _sample(
            families,
            cfg.n_train + cfg.n_eval,
            "train",
            rng,
            offset,
            cfg,
            guidance,
            iteration,
            render_problems,
            unique_seeds=True,
        )
        picked = split_seeds(pool, run_seed, iteration, cfg.eval_fraction, cfg.n_train)
        for i in picked:
            pool[i]["split"] = "eval"
        rows = [r for r in pool if r["split"] == "train"] + [
            r for r in pool if r["split"] == "eval"
        ]
        split = "seeds of the same generators held out: only 1 (capability, domain) group"
    if cfg.fixed_eval and iteration > 1:
        rows = with_fixed_eval(rows, synthesize(cfg, run_seed, 1)[0])
        split += "; the eval candidates are iteration 1's (synthesize.fixed_eval)"
    summary = {
        "families": len(families),
        "eval_groups": len(held_out),
        "train": sum(r["split"] == "train" for r in rows),
        "eval": sum(r["split"] == "eval" for r in rows),
        "guided": bool(guidance),
        "skipped_user_files": len(problems),
        "render_failures": len(render_problems),
        "split": split,
    }
    return rows, summary
