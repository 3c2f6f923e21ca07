"""The grading supervisor: runs a task's verifier in a context the graded episode never wrote,
and reports how it ended on its own stdout, which no process it starts holds.

    python3 -I supervise.py -- bash /tests/test.sh

Run by harness/taskenv.py (uploaded fresh for each grading, stdlib only, under `python3 -I`, so
nothing in the workspace, HOME or PYTHON* variables reaches it). It:

1. removes every symlink under /workspace that resolves to /, /tests, /logs, /solution, /tmp or
   /proc, or to a folder above them (a link to the answer key or the reward file);
2. becomes a child subreaper and undumpable (no process may open its /proc/<pid>/fd), then runs
   the verifier with stdout and stderr both on its own stderr;
3. when the verifier exits, stops and kills everything it left running (orphans come back to a
   subreaper, setsid or not) before the verdict is written: nothing started during grading can
   rewrite the result after it is read;
4. prints one JSON line last: {"exit": N, "left": [...], "unkillable": bool, "unlinked": [...]}.

SITECUSTOMIZE is the text of the kit's site/sitecustomize.py (the grading environment's
PYTHONPATH, see taskenv.grading_env).
"""

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
WORKSPACE = "/workspace"
GUARDED = ("/tests", "/logs", "/solution", "/tmp", "/proc")
KILL_ROUNDS = 200
SITECUSTOMIZE = '''"""Put back the folder of a script run by path, which PYTHONSAFEPATH=1 leaves off sys.path.

The grading environment (harness/taskenv.py) sets PYTHONSAFEPATH=1 so that `python3 -c`,
`python3 -m` and `python3 -` never import from the current folder (the agent's workspace): a
`json.py` or `pytest.py` planted there would run inside the grader. That setting also drops the
script's own folder, which a verifier's `python3 /tests/check.py` may need for its helpers; this
file, first on PYTHONPATH, adds it back.
"""

import os
import sys

_argv0 = sys.argv[0] if sys.argv else ""
if _argv0 and _argv0 not in ("-c", "-m", "-") and os.path.isfile(_argv0):
    sys.path.insert(0, os.path.dirname(os.path.realpath(_argv0)))
'''


def guarded(target: str) -> bool:
    """Whether a resolved symlink target is a grading folder, inside one, or above one."""
    if target == "/":
        return True
    for top in GUARDED:
        if target == top or target.startswith(top + "/") or top.startswith(target + "/"):
            return True
    return False


def unlink_guarded(root: str) -> list[str]:
    gone = []
    for top, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = os.path.join(top, name)
            if os.path.islink(path) and guarded(os.path.realpath(path)):
                os.unlink(path)
                gone.append(path)
    return gone


def _stat(pid: str) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0] + " " + comm  # (ppid, state and name)


def descendants(me: int) -> dict[int, str]:
    """Every live process below `me` (zombies left out), by pid."""
    children: dict[int, list[int]] = {}
    info: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(entry)
            if st is not None:
                children.setdefault(st[0], []).append(int(entry))
                info[int(entry)] = st[1]
    out: dict[int, str] = {}
    todo = list(children.get(me, []))
    while todo:
        pid = todo.pop()
        if not info.get(pid, "Z").startswith("Z"):
            out[pid] = info[pid].split(" ", 1)[1]
        todo += children.get(pid, [])
    return out


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_all(me: int) -> tuple[list[str], bool]:
    """Kill every process below `me`: stopped first, so none forks between the scan and the
    kill. Returns (what was left running, whether some could not be killed)."""
    left: dict[int, str] = {}
    for _ in range(KILL_ROUNDS):
        found = descendants(me)
        if not found:
            return [f"{pid} {name}" for pid, name in sorted(left.items())], False
        left.update(found)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        time.sleep(0.005)
        reap()
    return [f"{pid} {name}" for pid, name in sorted(left.items())], True


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: supervise.py -- COMMAND...", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    verdict = os.fdopen(os.dup(1), "w")  # close-on-exec: the verifier never holds it
    unlinked = unlink_guarded(WORKSPACE) if os.path.isdir(WORKSPACE) else []
    try:
        child = subprocess.Popen(argv[1:], stdin=subprocess.DEVNULL, stdout=2, stderr=2)
        code = child.wait()
    except OSError as exc:
        print(f"could not start the verifier: {exc}", file=sys.stderr)
        code = 127
    left, unkillable = kill_all(os.getpid())
    sys.stderr.flush()
    doc = {"exit": code, "left": left, "unkillable": unkillable, "unlinked": unlinked}
    verdict.write("\n" + json.dumps(doc) + "\n")
    verdict.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
