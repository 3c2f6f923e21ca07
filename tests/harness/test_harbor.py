"""Harbor 0.25 itself runs what `clawloop export harbor` writes: oracle 1.0, nop 0.0, per format.

Forges one task per output format (json, csv, multi, report) from the rendered built-in
generators, plus a domain-grounded task (end-state predicates) and a SkillSynth task, exports them with the real CLI verb, checks the untouched export with Harbor's own
task model (`Task.is_valid_dir`, `TaskConfig`: [task] name "clawloop/<task_id>",
network_mode "no-network"), then runs `harbor run -p DATASET -a oracle` and `-a nop` on a local
Docker engine: every oracle trial must score 1.0 and every nop trial 0.0, with no exception
(Harbor fails a trial whose reward.json holds a non-numeric value). The details.json Harbor
brings back beside reward.json is read with clawloop's own parse_reward.

Offline: the copy Harbor runs has network_mode (and the legacy allow_internet) stripped from
task.toml. Harbor enforces "no-network" on Docker with an egress-control sidecar after probing
the engine's kernel with an `alpine` image; with no registry to pull from it refuses the task
("network_mode='no-network' is not supported by docker environment"). The exported folders
themselves keep network_mode = "no-network".

Needs `scripts/setup-harbor.sh` (harbor==0.25.0 in a Python 3.12 venv, the docker compose v2
plugin, the engine with clawloop-base:latest); `make test-harbor` runs both, and there a missing
piece fails the test instead of skipping it (CLAWLOOP_REQUIRE_HARBOR=1). Deselected by default
(marker `harbor`). About 20-30 s on 2 cores once set up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.harbor, pytest.mark.docker]

HARBOR_HOME = Path(
    os.environ.get("CLAWLOOP_HARBOR_HOME")
    or Path(os.environ.get("CLAWLOOP_CACHE", "/var/cache/clawloop"), "harbor")
)
HARBOR = HARBOR_HOME / "venv" / "bin" / "harbor"
HARBOR_PY = HARBOR_HOME / "venv" / "bin" / "python"
DOCKER_CONFIG = HARBOR_HOME / "docker-config"
FORMATS = ("json", "csv", "multi", "report")
KINDS = (*FORMATS, "domain", "skill_graph")  # + a domain-grounded and a SkillSynth task

# Harbor's own view of a task folder, printed as JSON (runs in Harbor's venv, Python 3.12).
INSPECT = r"""
import json, sys
from pathlib import Path
from harbor.models.task.config import TaskConfig
from harbor.models.task.task import Task
out = {}
for d in sys.argv[1:]:
    cfg = TaskConfig.model_validate_toml(Path(d, "task.toml").read_text())
    out[Path(d).name] = {
        "valid": Task.is_valid_dir(d),
        "name": Task(d).name,
        "network_mode": cfg.environment.network_mode.value,
    }
print(json.dumps(out))
"""


def _need_harbor() -> None:
    from clawloop.harness.sandbox.backend import docker_available

    missing = pytest.fail if os.environ.get("CLAWLOOP_REQUIRE_HARBOR") else pytest.skip
    if not HARBOR.is_file():
        missing(f"no Harbor at {HARBOR}: run scripts/setup-harbor.sh (make test-harbor)")
    why = docker_available()
    if why is not None:
        missing(f"needs a Docker engine with the base image: {why}")


def _forge_one_per_format() -> list[dict]:
    """One FORGED row per output format, each from a different built-in capability where the
    library allows."""
    from clawloop.generators.candidates import candidate_row
    from clawloop.generators.forge import forge_candidate
    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.synthesis.library import capabilities, domains, render_generator

    caps, doms = capabilities(), domains()
    sandbox = SandboxConfig(backend="auto")
    rows, problems = [], []
    for i, fmt in enumerate(FORMATS):
        for j in range(len(caps)):
            cap = caps[(i + j) % len(caps)]
            try:
                code = render_generator(cap, doms[i % len(doms)], output_format=fmt)
            except Exception as exc:  # a capability that does not render this format
                problems.append(f"{cap}/{fmt}: {type(exc).__name__}: {exc}")
                continue
            row = forge_candidate(candidate_row(code, 100 + i, origin="builtin"), sandbox)
            if row["status"] == "ok":
                rows.append({**row, "output_format": fmt})
                break
            problems.append(f"{cap}/{fmt}: forge {row['error_kind']}: {row['error'][:200]}")
        else:
            pytest.fail(f"no built-in generator forges a {fmt} task: {problems}")
    return rows + _forge_synthesized(sandbox)


def _forge_synthesized(sandbox) -> list[dict]:  # noqa: ANN001 - SandboxConfig
    """One domain-grounded task (end-state predicates over a JSON state, skill CLIs in the
    workspace) and one SkillSynth task (the scripted Constructor's generator, as the skill_graph
    source makes them), forged like any other."""
    from doubles.skillsynth import generator

    from clawloop.generators.candidates import candidate_row
    from clawloop.generators.forge import forge_candidate
    from clawloop.synthesis.domain.load import builtin_domains
    from clawloop.synthesis.domain.synth import synthesize_domain

    (apiary,) = [r for r in builtin_domains() if r.name == "apiary_coop"]
    made = synthesize_domain(apiary, 1, 7, sandbox)
    assert made.candidates, [g["reason"] for g in made.graphs]
    cands = {
        "domain": made.candidates[0],
        "skill_graph": candidate_row(generator(asks=True), 5, origin="skill_graph"),
    }
    rows = []
    for kind, cand in cands.items():
        row = forge_candidate(cand, sandbox)
        assert row["status"] == "ok", (kind, row["error"])
        rows.append({**row, "output_format": kind})
    return rows


def _harbor_run(dataset: Path, agent: str, jobs: Path, overlay: Path) -> dict[str, dict]:
    """`harbor run -p dataset -a agent`; {task_id: {"reward", "exception", "verifier_dir"}}."""
    env = {
        **os.environ,
        "DOCKER_CONFIG": str(DOCKER_CONFIG),
        "HARBOR_TELEMETRY": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no model-price fetch (offline)
    }
    cmd = [
        str(HARBOR), "run", "-p", str(dataset), "-a", agent, "-n", "4", "-o", str(jobs),
        "--job-name", agent, "--extra-docker-compose", str(overlay), "-y", "-q",
    ]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=420)
    trials = sorted((jobs / agent).glob("*/result.json"))
    assert trials, (
        f"harbor run -a {agent} left no trial results (exit {p.returncode}):\n"
        + (p.stdout + p.stderr)[-3000:]
    )
    out = {}
    for path in trials:
        doc = json.loads(path.read_text())
        rewards = (doc.get("verifier_result") or {}).get("rewards") or {}
        exc = doc.get("exception_info") or {}
        task_id = str(doc["task_name"]).rpartition("/")[2]
        out[task_id] = {
            "name": doc["task_name"],
            "reward": rewards.get("reward"),
            "rewards": rewards,
            "exception": f"{exc.get('exception_type', '')}: {exc.get('exception_message', '')}"
            if exc
            else "",
            "verifier_dir": path.parent / "verifier",
        }
    return out


def test_harbor_runs_exported_tasks(tmp_path: Path) -> None:
    _need_harbor()
    from clawloop.flows.cli import main
    from clawloop.harness.taskenv import parse_reward
    from clawloop.storage.artifacts import parquet_bytes
    from clawloop.storage.schemas import FORGED

    t0 = time.perf_counter()
    rows = _forge_one_per_format()
    fmt_of = {r["task_id"]: r.pop("output_format") for r in rows}
    cap_of = {r["task_id"]: r["capability"] for r in rows}
    parquet = tmp_path / "tasks.parquet"
    parquet.write_bytes(parquet_bytes(rows, FORGED, where="test")[0])
    exported = tmp_path / "exported"
    assert main(["export", "harbor", "--tasks", str(parquet), "--out", str(exported)]) == 0
    folders = sorted(d for d in exported.iterdir() if d.is_dir())
    assert {d.name for d in folders} == set(fmt_of)
    t_forged = time.perf_counter()

    # Harbor's own task model accepts the export exactly as written.
    p = subprocess.run(
        [str(HARBOR_PY), "-c", INSPECT, *map(str, folders)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    seen = json.loads(p.stdout)
    for task_id in fmt_of:
        assert seen[task_id] == {
            "valid": True,
            "name": f"clawloop/{task_id}",
            "network_mode": "no-network",
        }, seen[task_id]

    # The copy Harbor runs offline: network_mode stripped (see the module docstring).
    dataset = tmp_path / "dataset"
    shutil.copytree(exported, dataset)
    for d in dataset.iterdir():
        toml = d / "task.toml"
        lines = toml.read_text().splitlines(keepends=True)
        toml.write_text(
            "".join(x for x in lines if not x.startswith(("network_mode", "allow_internet")))
        )
    overlay = tmp_path / "stop-grace.yaml"
    overlay.write_text("services:\n  main:\n    stop_grace_period: 1s\n")

    results = {a: _harbor_run(dataset, a, tmp_path / "jobs", overlay) for a in ("oracle", "nop")}
    took = time.perf_counter() - t0
    table = [f"{'task':<18} {'format':<7} {'capability':<24} {'oracle':>7} {'nop':>5}"]
    for task_id, fmt in sorted(fmt_of.items(), key=lambda kv: KINDS.index(kv[1])):
        o, n = results["oracle"].get(task_id, {}), results["nop"].get(task_id, {})
        table.append(
            f"{task_id:<18} {fmt:<7} {cap_of[task_id]:<24} {o.get('reward')!s:>7}"
            f" {n.get('reward')!s:>5}"
        )
    table.append(
        f"forge+export {t_forged - t0:.1f}s, total {took:.1f}s "
        f"(python {sys.version_info.major}.{sys.version_info.minor} here, harbor in its venv)"
    )
    report = "\n".join(table)
    print("\n" + report)

    for agent, want in (("oracle", 1.0), ("nop", 0.0)):
        got = results[agent]
        assert set(got) == set(fmt_of), (agent, sorted(got), report)
        for task_id, r in got.items():
            assert r["name"] == f"clawloop/{task_id}"
            assert not r["exception"], f"{agent} on {fmt_of[task_id]} task: {r['exception']}"
            # reward is the outcome (a nop earns nothing for the guards it does not break);
            # fraction, the share of checks passed, is a second named reward
            assert set(r["rewards"]) == {"reward", "fraction"}, r["rewards"]
            assert r["rewards"]["reward"] == want, (agent, fmt_of[task_id], r["rewards"], report)
            assert (r["rewards"]["fraction"] == 1.0) is (want == 1.0), r["rewards"]
            # Harbor brings details.json back beside reward.json; clawloop's reader agrees.
            vdir = r["verifier_dir"]
            grade = parse_reward(
                (vdir / "reward.json").read_text(), (vdir / "details.json").read_text()
            )
            assert grade.reward == r["rewards"]["fraction"] and grade.passed is (want == 1.0)
            assert grade.checks and all(c["passed"] for c in grade.checks) is (want == 1.0)
            assert (grade.reason == "") is (want == 1.0), grade.reason
