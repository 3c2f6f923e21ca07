"""Harbor tasks not made by clawloop (issue 14 item 3): imported by `clawloop import harbor`, rolled
out by `clawloop rollout` with a scripted policy and graded by their own tests.

The foreign task is written here as Harbor's docs show one: task.toml ([task] name "org/name",
[metadata] category, timeouts), instruction.md, environment/Dockerfile, solution/solve.sh, and a
tests/test.sh that runs a pytest test file and writes 1 or 0 to /logs/verifier/reward.txt. The
sandbox base image (docker/sandbox/Dockerfile: a debootstrap minbase with python3) has no pytest,
so test.sh runs pytest when the image has it and otherwise a few-line runner that calls the same
test_ functions with python3 alone (what Harbor tasks do with `uvx pytest` needs the network).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.flows.cli import main
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.folder import TaskFolderError
from clawloop.harness.taskfolder.foreign import (
    ForeignTaskError,
    dockerfile_instructions,
    plan_environment,
    prepare_task,
)
from clawloop.harness.taskfolder.packing import pack_dir, unpack_tar

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
WORDS = "the quick brown fox jumps over the lazy dog\n"  # 9 words

TASK_TOML = """\
version = "1.0"

[task]
name = "acme/{name}"

[metadata]
author_name = "Acme Evals"
difficulty = "easy"
category = "file-operations"
tags = ["counting", "text"]

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 1024
"""

TEST_SH = """\
#!/bin/bash
# Harbor verifier: run the pytest tests, then 1 (all passed) or 0 in /logs/verifier/reward.txt.
mkdir -p /logs/verifier
if python3 -m pytest --version >/dev/null 2>&1; then
    python3 -m pytest /tests/test_outputs.py -rA
else
    python3 /tests/run_tests.py /tests/test_outputs.py
fi
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""

# reward.json instead: Harbor reads it first; numbers only.
TEST_SH_JSON = TEST_SH.replace(
    "echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt",
    """echo '{"reward": 1.0, "tests": 2}' > /logs/verifier/reward.json; """
    """else echo '{"reward": 0.0, "tests": 2}' > /logs/verifier/reward.json""",
)

# Runs pytest-style test_ functions with python3 alone (for an image without pytest).
RUN_TESTS_PY = """\
import importlib.util, sys, traceback
spec = importlib.util.spec_from_file_location("test_outputs", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
failed = 0
for name in sorted(n for n in dir(mod) if n.startswith("test_")):
    try:
        getattr(mod, name)()
        print("PASSED", name)
    except Exception:
        failed += 1
        print("FAILED", name)
        traceback.print_exc()
sys.exit(1 if failed else 0)
"""

TEST_OUTPUTS_PY = """\
from pathlib import Path

OUT = Path("{root}/count.txt")


def test_count_file_exists():
    assert OUT.exists(), f"{{OUT}} was not written"


def test_count_is_the_number_of_words():
    assert OUT.read_text().strip() == "9"
"""

# Its own base image, a working folder /app and a RUN: needs a docker build (offline works: the
# RUN uses nothing from the network).
DOCKERFILE_BUILD = """\
FROM clawloop-rootfs:bookworm
WORKDIR /app
COPY input.txt /app/input.txt
RUN chmod 0644 /app/input.txt && mkdir -p /app/notes
"""
# Only the sandbox base image and files copied into /workspace: runs on either backend.
DOCKERFILE_BASE = """\
FROM clawloop-base:latest
WORKDIR /workspace
COPY input.txt /workspace/
"""


def write_foreign_task(
    dest: Path,
    name: str = "word-count",
    *,
    dockerfile: str = DOCKERFILE_BASE,
    root: str = "/workspace",
    test_sh: str = TEST_SH,
) -> Path:
    """A Harbor task folder as a Harbor user writes one (no [metadata.clawloop])."""
    files = {
        "task.toml": TASK_TOML.format(name=name),
        "instruction.md": f"Count the words in `{root}/input.txt` and write the number alone "
        f"to `{root}/count.txt`.\n",
        "environment/Dockerfile": dockerfile,
        "environment/input.txt": WORDS,
        "solution/solve.sh": f"#!/bin/bash\nset -e\nwc -w < {root}/input.txt | tr -d ' ' "
        f"> {root}/count.txt\n",
        "tests/test.sh": test_sh,
        "tests/run_tests.py": RUN_TESTS_PY,
        "tests/test_outputs.py": TEST_OUTPUTS_PY.format(root=root),
    }
    for rel, text in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(".sh"):
            path.chmod(0o755)
    return dest


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def rollout(capsys, task: Path, mode: str, backend: str, out: Path, n: int = 2) -> dict:
    with FakeOpenAI(mode, task) as fake:
        code, stdout, err = run(
            capsys, "rollout", str(task), "--base-url", fake.base_url, "--model", "fake",
            "-n", str(n), "--concurrency", "2", "--backend", backend, "--out", str(out), "--json",
        )  # fmt: skip
    assert code == 0, err
    return json.loads(stdout)


# -- reading a foreign environment (pure) ---------------------------------------------------------
def test_dockerfile_instructions_join_continuations_and_skip_comments():
    text = '# syntax\nFROM x\n\nRUN a \\\n  # inside\n  && b\nCOPY ["a b", "/w/"]\n'
    assert dockerfile_instructions(text) == [
        (2, "FROM", "x"),
        (4, "RUN", "a && b"),
        (7, "COPY", '["a b", "/w/"]'),
    ]


def test_a_base_image_dockerfile_needs_no_build_and_others_say_why(tmp_path):
    task = write_foreign_task(tmp_path / "base")
    plan = plan_environment(task)
    assert (plan.needs_build, plan.base, plan.workdir) == ("", "clawloop-base:latest", "/workspace")
    assert plan.copies == (("input.txt", "/workspace/"),)

    build = write_foreign_task(tmp_path / "build", dockerfile=DOCKERFILE_BUILD, root="/app")
    plan = plan_environment(build)
    assert plan.needs_build.startswith("line 1: FROM clawloop-rootfs:bookworm is not the sandbox")
    assert plan.froms == ("clawloop-rootfs:bookworm",)

    for line, why in [
        ("RUN echo hi > /workspace/x", "line 4: RUN changes the image"),
        ("ENV A=1", "line 4: ENV changes the image"),
        ("COPY input.txt /opt/", "line 4: COPY into /opt, outside /workspace"),
        ("WORKDIR /app", "line 4: WORKDIR /app is not under /workspace"),
    ]:
        (task / "environment/Dockerfile").write_text(DOCKERFILE_BASE + line + "\n")
        assert plan_environment(task).needs_build == why

    (task / "environment/docker-compose.yaml").write_text("services: {}\n")
    with pytest.raises(TaskFolderError, match="docker-compose.yaml .* not supported"):
        plan_environment(task)


def test_bubblewrap_refuses_a_task_that_needs_a_build_and_says_why(tmp_path):
    task = write_foreign_task(tmp_path / "t", dockerfile=DOCKERFILE_BUILD, root="/app")
    with pytest.raises(ForeignTaskError) as err:
        prepare_task(task, SandboxConfig(backend="bwrap"), tmp_path / "work")
    msg = str(err.value)
    assert "cannot run on bubblewrap" in msg
    assert "FROM clawloop-rootfs:bookworm is not the sandbox base image" in msg
    assert "use the Docker backend" in msg


# -- import ---------------------------------------------------------------------------------------
def test_import_harbor_takes_a_foreign_dataset_folder_as_it_is(tmp_path, capsys):
    dataset = tmp_path / "dataset"
    write_foreign_task(dataset / "word-count")
    write_foreign_task(dataset / "word-count-app", "word-count-app",
                       dockerfile=DOCKERFILE_BUILD, root="/app")  # fmt: skip
    parquet = tmp_path / "tasks.parquet"
    code, out, err = run(capsys, "import", "harbor", str(dataset), "--out", str(parquet))
    assert code == 0, err
    rows = pq.read_table(parquet).to_pylist()
    assert [(r["task_id"], r["capability"], r["status"]) for r in rows] == [
        ("word-count", "file-operations", "ok"),
        ("word-count-app", "file-operations", "ok"),
    ]
    assert "word-count: runs on the sandbox base image" in out
    assert "word-count-app: needs a docker build (line 1: FROM clawloop-rootfs:bookworm" in out
    # the stored folder is the foreign folder, byte for byte
    assert rows[0]["task_tar"] == pack_dir(dataset / "word-count")
    back = unpack_tar(rows[0]["task_tar"], tmp_path / "back")
    assert (back / "tests/test.sh").read_text() == TEST_SH
    # exported again, each folder is the one imported (its own org/name kept)
    code, _, err = run(capsys, "export", "harbor", "--tasks", str(parquet), "--out",
                       str(tmp_path / "out"))  # fmt: skip
    assert code == 0, err
    for name in ("word-count", "word-count-app"):
        assert pack_dir(tmp_path / "out" / name) == pack_dir(dataset / name)

    (dataset / "word-count/tests/test.sh").unlink()
    code, _, err = run(
        capsys, "import", "harbor", str(dataset / "word-count"), "--out", str(parquet)
    )
    assert code == 2 and "missing tests/test.sh; not a Harbor task folder" in err


# -- rollout, graded by the task's own tests --------------------------------------------------------
@needs_bwrap
@pytest.mark.parametrize("test_sh", [TEST_SH, TEST_SH_JSON], ids=["reward.txt", "reward.json"])
def test_foreign_base_image_task_rolls_out_on_bubblewrap_and_is_graded_by_its_tests(
    tmp_path, capsys, test_sh
):
    task = write_foreign_task(tmp_path / "word-count", test_sh=test_sh)
    good = rollout(capsys, task, "oracle", "bwrap", tmp_path / "good")
    assert (good["passes"], good["rewards"], good["errors"]) == (2, [1.0, 1.0], ["", ""])
    bad = rollout(capsys, task, "wrong", "bwrap", tmp_path / "bad")
    # graded, not broken: the verifier's only reason is the reward itself
    assert (bad["passes"], bad["rewards"]) == (0, [0.0, 0.0])
    assert bad["errors"] == ["verifier: reward below 1.0"] * 2
    rows = pq.read_table(bad["trajectories"]).to_pylist()
    assert {(r["task_id"], r["capability"]) for r in rows} == {("word-count", "file-operations")}
    log = json.loads(rows[0]["checks_json"])["log"]  # the task's own test output
    assert re.search(r"FAILED \S*test_count_is_the_number_of_words", log), log
    assert re.search(r"PASSED \S*test_count_file_exists", log), log


def _docker_or_skip() -> None:
    from clawloop.harness.sandbox.backend import docker_available

    why = docker_available() or docker_available("clawloop-rootfs:bookworm")
    if why:
        pytest.skip(f"docker not usable: {why}")


@pytest.mark.docker
def test_foreign_task_with_its_own_image_is_built_on_docker_and_graded(tmp_path, capsys):
    _docker_or_skip()
    task = write_foreign_task(tmp_path / "word-count-app", "word-count-app",
                              dockerfile=DOCKERFILE_BUILD, root="/app")  # fmt: skip
    good = rollout(capsys, task, "oracle", "docker", tmp_path / "good")
    assert (good["passes"], good["rewards"]) == (2, [1.0, 1.0]), good["errors"]
    bad = rollout(capsys, task, "wrong", "docker", tmp_path / "bad")
    assert (bad["passes"], bad["rewards"]) == (0, [0.0, 0.0]), bad["errors"]
    # the same task is refused on bubblewrap, before any policy call
    with FakeOpenAI("oracle", task) as fake:
        code, _, err = run(capsys, "rollout", str(task), "--base-url", fake.base_url,
                           "--model", "fake", "-n", "1", "--backend", "bwrap")  # fmt: skip
        assert not fake.requests
    assert code == 2 and "cannot run on bubblewrap" in err


@pytest.mark.docker
@pytest.mark.parametrize(
    "dockerfile,why",
    [
        ("FROM clawloop-no-such-base:1\nWORKDIR /app\n", "needs image clawloop-no-such-base:1"),
        (
            'FROM clawloop-rootfs:bookworm\nRUN python3 -c "import urllib.request as u; '
            "u.urlopen('http://deb.debian.org', timeout=5)\"\n",
            "Builds run offline, without network",
        ),
    ],
    ids=["missing-base-image", "run-needs-network"],
)
def test_a_docker_build_that_cannot_work_offline_fails_clearly(tmp_path, dockerfile, why):
    _docker_or_skip()
    task = write_foreign_task(tmp_path / "t", dockerfile=dockerfile, root="/app")
    with pytest.raises(ForeignTaskError, match=why) as err:
        prepare_task(task, SandboxConfig(backend="docker"), tmp_path / "work")
    assert "task word-count" in str(err.value)
