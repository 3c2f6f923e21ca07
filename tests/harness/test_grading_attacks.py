"""A grade the agent cannot touch (issue 34): agent-side tricks against a ClawGym, a Harbor and one
of our own tasks, each through the real rollout path (`clawloop rollout DIR`, a scripted policy
over HTTP), must score 0 with a reason; a right solution by another route still scores 1.0; a
grader script that fails is a failed grade, never a score.

The tricks are in tests/doubles/grading_attacks.py (benchmarks/grading_attacks.py prints the
same matrix as a table, before and after). Bubblewrap by default; the Docker matrix is slow.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from doubles.grading_attacks import CAUGHT, SOUND, TASKS, TRICKS, attack, clawgym_tiny

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def _docker_or_skip() -> None:
    from clawloop.harness.sandbox.backend import docker_available

    why = docker_available()
    if why is not None:
        pytest.skip(f"docker not usable: {why}")


def _check_caught(trick: str, kind: str, got: dict) -> None:
    assert got["end_reason"] == "finished", got
    assert got["reward"] == 0.0 and not got["passed"], (trick, kind, got["reason"], got["log"])
    assert got["reason"], (trick, kind, got)  # a grade of 0 always says why
    want = CAUGHT.get((trick, kind))
    if want:
        assert want in got["reason"], (trick, kind, got["reason"])


def _sound_task(kind: str, tmp: Path) -> Path:
    return clawgym_tiny(tmp) if kind == "clawgym" else TASKS[kind]


# Each trick against the task kind it beat before this change (the default run); every trick
# against every kind is the slow matrix below.
AIMED = [
    ("shadow_module", "clawgym"), ("shadow_module", "harbor"), ("usercustomize", "clawgym"),
    ("usercustomize", "harbor"), ("readonly_reward_dir", "clawgym"),
    ("planted_tmp_script", "clawgym"), ("background_writer", "harbor"),
    ("sitecustomize_env_files", "clawgym"), ("pth_file", "harbor"),
    ("fake_python_on_path", "harbor"), ("pytest_conftest_plugin", "harbor"),
    ("symlink_to_grading_files", "ours"), ("rewrite_tests_while_graded", "harbor"),
    ("swap_grading_kit", "harbor"), ("patch_runner_memory", "harbor"),
    ("kill_the_supervisor", "harbor"), ("system_shims_and_hooks", "harbor"),
    ("system_shims_and_hooks", "clawgym"),
]  # fmt: skip
MATRIX = [(t, k) for t in sorted(TRICKS) for k in sorted(TASKS)]


@needs_bwrap
@pytest.mark.parametrize("trick, kind", AIMED)
def test_trick_scores_zero_in_bwrap(trick: str, kind: str, tmp_path: Path) -> None:
    _check_caught(trick, kind, attack(TASKS[kind], TRICKS[trick], "bwrap", tmp_path / "out"))


@pytest.mark.docker
@pytest.mark.parametrize(
    "trick", ["rewrite_tests_while_graded", "swap_grading_kit", "patch_runner_memory"]
)
def test_tricks_on_the_running_verifier_score_zero_in_docker(trick: str, tmp_path: Path) -> None:
    """The tricks of the agent's program run by a Harbor verifier: rewriting /tests (sealed:
    owned by another uid, read-only), swapping the grading kit (sealed, in /logs/grading) and
    patching the test runner's memory (seccomp and Landlock) all fail on Docker too."""
    _docker_or_skip()
    got = attack(TASKS["harbor"], TRICKS[trick], "docker", tmp_path / "out")
    _check_caught(trick, "harbor", got)
    assert "partly confined" not in got["log"], got["log"][:300]


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("trick, kind", [c for c in MATRIX if c not in AIMED])
def test_every_trick_on_every_kind_in_bwrap(trick: str, kind: str, tmp_path: Path) -> None:
    _check_caught(trick, kind, attack(TASKS[kind], TRICKS[trick], "bwrap", tmp_path / "out"))


@needs_bwrap
@pytest.mark.parametrize("kind", sorted(TASKS))
def test_sound_solution_by_another_route_scores_one_in_bwrap(kind: str, tmp_path: Path) -> None:
    got = attack(_sound_task(kind, tmp_path), SOUND[kind], "bwrap", tmp_path / "out")
    assert got["reward"] == 1.0 and got["passed"], (got["reason"], got["log"], got["outputs"])


@needs_bwrap
def test_all_tricks_at_once_still_leave_a_sound_solution_at_one(tmp_path: Path) -> None:
    """The tricks' leftovers (hooks, links, env files) do not spoil a right answer's grade."""
    tricks = [c for name in ("usercustomize", "sitecustomize_env_files", "pth_file",
                             "fake_python_on_path", "planted_tmp_script") for c in TRICKS[name]]  # fmt: skip
    got = attack(clawgym_tiny(tmp_path), tricks + SOUND["clawgym"], "bwrap", tmp_path / "out")
    assert got["reward"] == 1.0 and got["passed"], (got["reason"], got["log"])


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("trick, kind", MATRIX)
def test_trick_scores_zero_in_docker(trick: str, kind: str, tmp_path: Path) -> None:
    _docker_or_skip()
    _check_caught(trick, kind, attack(TASKS[kind], TRICKS[trick], "docker", tmp_path / "out"))


@pytest.mark.docker
@pytest.mark.parametrize("kind", sorted(TASKS))
def test_sound_solution_scores_one_in_docker(kind: str, tmp_path: Path) -> None:
    _docker_or_skip()
    got = attack(_sound_task(kind, tmp_path), SOUND[kind], "docker", tmp_path / "out")
    assert got["reward"] == 1.0 and got["passed"], (got["reason"], got["log"], got["outputs"])


# -- the grader's side: a script that fails is never a score --------------------------------


def _grade(task_dir: Path, files: dict[str, str], backend: str = "bwrap"):
    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.harness.taskenv import open_task, run_tests

    with open_task(task_dir, SandboxConfig(backend=backend)) as sb:
        for rel, text in files.items():
            sb.exec(["sh", "-c", f"mkdir -p $(dirname {rel}) && cat > {rel}"], cwd="/workspace")
            sb.exec(["python3", "-c", f"open({rel!r}, 'w').write({text!r})"], cwd="/workspace")
        return run_tests(sb, task_dir)


@needs_bwrap
def test_a_reward_sh_that_exits_non_zero_is_no_score(tmp_path: Path) -> None:
    """Issue 34 trick 6: `echo 1.0; exit 3` is a failed grade with reward.sh's exit."""
    from clawloop.harness.taskfolder.clawgym import read_task, write_harbor_folder

    task = clawgym_tiny(tmp_path)
    (task / "reward/reward.sh").write_text("#!/bin/bash\necho 1.0\nexit 3\n")
    harbor = write_harbor_folder(read_task(task), tmp_path / "h")
    grade = _grade(harbor, {})
    assert grade.reward == 0.0 and not grade.passed
    assert "reward.sh exited 3" in grade.reason, grade.reason


@needs_bwrap
@pytest.mark.parametrize(
    "test_sh, why",
    [
        ("echo 1 > /logs/verifier/reward.txt\nexit 4\n", "exited 4"),
        ("echo 1 > /logs/verifier/reward.txt\n(sleep 30 &)\n", "left 1 process"),
        ("echo 1 > /logs/verifier/reward.txt\nsetsid sleep 30 >/dev/null 2>&1 &\n", "left 1"),
    ],
    ids=["non-zero exit", "orphan", "new session"],
)
def test_a_harbor_verifier_that_fails_or_leaves_processes_is_no_score(
    tmp_path: Path, test_sh: str, why: str
) -> None:
    task = tmp_path / "t"
    shutil.copytree(TASKS["harbor"], task)
    (task / "tests/test.sh").write_text("#!/bin/bash\n" + test_sh)
    grade = _grade(task, {})
    assert grade.reward == 0.0 and not grade.passed
    assert why in grade.reason, grade.reason


@needs_bwrap
def test_the_grader_sees_a_fresh_home_tmp_and_isolated_python(tmp_path: Path) -> None:
    """What the verifier's environment looks like: HOME and TMPDIR fresh and empty, the
    episode's /tmp gone, no cwd on sys.path, no user site, the script's own folder kept."""
    task = tmp_path / "t"
    shutil.copytree(TASKS["harbor"], task)
    (task / "tests/helper.py").write_text("VALUE = 7\n")
    (task / "tests/probe.py").write_text(
        "import json, os, sys, site, helper\n"
        "print(json.dumps({'home': os.environ['HOME'], 'tmpdir': os.environ['TMPDIR'],\n"
        "  'home_files': os.listdir(os.environ['HOME']), 'tmp': sorted(os.listdir('/tmp')),\n"
        "  'path0': sys.path[0], 'cwd_on_path': '' in sys.path or os.getcwd() in sys.path,\n"
        "  'user_site': site.ENABLE_USER_SITE, 'helper': helper.VALUE}))\n"
    )
    (task / "tests/test.sh").write_text(
        "#!/bin/bash\ncd /workspace\npython3 /tests/probe.py > /logs/verifier/probe.json\n"
        "python3 -c 'import sys, os; print(int(os.getcwd() in sys.path or \"\" in sys.path))' "
        "> /logs/verifier/dash_c.txt\necho 1 > /logs/verifier/reward.txt\n"
    )
    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.harness.taskenv import open_task, read_remote_text, run_tests

    with open_task(task, SandboxConfig(backend="bwrap")) as sb:
        sb.exec(["sh", "-c", "echo x > /tmp/episode-file; mkdir -p /tmp/.local"])
        grade = run_tests(sb, task)
        probe = json.loads(read_remote_text(sb, "/logs/verifier/probe.json") or "{}")
        dash_c = (read_remote_text(sb, "/logs/verifier/dash_c.txt") or "").strip()
    assert grade.passed, grade.reason
    assert probe["home"].startswith("/tmp/clawloop-grading-") and probe["home_files"] == []
    assert probe["tmpdir"].startswith(probe["home"].rsplit("/", 1)[0])
    assert probe["tmp"] == [probe["home"].split("/")[2]]  # only the fresh kit: episode's gone
    assert probe["path0"] == "/tests" and not probe["cwd_on_path"] and not probe["user_site"]
    assert probe["helper"] == 7 and dash_c == "0"
