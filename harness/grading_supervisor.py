"""The grading supervisor: runs a task's verifier in a context the graded episode never wrote,
and reports how it ended on its own stdout, which no process it starts holds.

    python3 -I supervise.py -- bash /tests/test.sh

Run by harness/taskenv.py (uploaded fresh for each grading, stdlib only, under `python3 -I`, so
nothing in the workspace, HOME or PYTHON* variables reaches it). It:

1. removes every symlink under /workspace that resolves to /, /tests, /logs, /solution, /tmp or
   /proc, or to a folder above them (a link to the answer key or the reward file);
2. becomes a child subreaper and undumpable (no process may open its /proc/<pid>/fd), confines
   itself and so the whole verifier (`confine`: no process of it may write another's memory:
   ptrace and process_vm_writev refused by a seccomp filter, /proc and /sys not writable by a
   Landlock ruleset; code the verifier runs, the agent's program, could otherwise patch the
   running test runner), then runs the verifier with stdout and stderr both on its own stderr;
3. when the verifier exits, stops and kills everything it left running (orphans come back to a
   subreaper, setsid or not) before the verdict is written: nothing started during grading can
   rewrite the result after it is read;
4. prints one JSON line last: {"exit": N, "left": [...], "unkillable": bool, "unlinked": [...],
   "unconfined": "" or why a confinement could not be applied (a kernel without Landlock)}.

SITECUSTOMIZE is the text of the kit's site/sitecustomize.py (the grading environment's
PYTHONPATH, see taskenv.grading_env).
"""

import contextlib
import ctypes
import json
import os
import signal
import struct
import subprocess
import sys
import time

PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_EPERM = 0x00050000 | 1
X32_BIT = 0x40000000
# The system calls that write (or take from) another process: ptrace, process_vm_writev,
# pidfd_getfd, by audit arch (x86-64, its i386 ABI, aarch64). x32 calls on x86-64 are refused.
DENIED_CALLS = {
    0xC000003E: (101, 311, 438),
    0x40000003: (26, 348, 438),
    0xC00000B7: (117, 271, 438),
}
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_ACCESS_FS_WRITE_FILE = 1 << 1
LANDLOCK_RULE_PATH_BENEATH = 1
UNWRITABLE = ("proc", "sys")  # the top folders no process of the verifier may write a file in
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


def seccomp_program(denied: dict[int, tuple[int, ...]]) -> bytes:
    """A classic BPF program for seccomp: EPERM for the `denied` calls of each audit arch (and,
    on x86-64, every x32 call), everything else allowed. Each arch's block: load the arch, skip
    the block unless it matches, load the call number, compare."""
    ld_arch, ld_nr = (0x20, 0, 0, 4), (0x20, 0, 0, 0)  # BPF_LD|BPF_W|BPF_ABS of seccomp_data
    blocks: list[list[tuple[int, int, int, int | str]]] = []
    for arch, calls in denied.items():
        body: list[tuple[int, int, int, int | str]] = [ld_nr]
        if arch == 0xC000003E:
            body.append((0x35, "deny", 0, X32_BIT))  # BPF_JMP|BPF_JGE|BPF_K
        body += [(0x15, "deny", 0, nr) for nr in calls]  # BPF_JMP|BPF_JEQ|BPF_K
        body.append((0x06, 0, 0, SECCOMP_RET_ALLOW))  # BPF_RET|BPF_K
        blocks.append([ld_arch, (0x15, 0, len(body), arch), *body])
    prog = [ins for block in blocks for ins in block]
    prog += [(0x06, 0, 0, SECCOMP_RET_ALLOW), (0x06, 0, 0, SECCOMP_RET_EPERM)]
    deny = len(prog) - 1
    out = b""
    for i, (code, jt, jf, k) in enumerate(prog):
        jt = deny - i - 1 if jt == "deny" else jt
        out += struct.pack("=HBBI", code, jt, jf, k)
    return out


def confine(libc: ctypes.CDLL) -> str:
    """Keep every process of the verifier from writing another's memory: a seccomp filter
    refusing DENIED_CALLS, and a Landlock ruleset under which no file below /proc or /sys opens
    for writing (/proc/<pid>/mem). Both are inherited by every child and cannot be lifted.
    Returns "" when both hold, else what is missing and why (the filter is required: without
    it this raises OSError)."""
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    code = seccomp_program(DENIED_CALLS)
    buf = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("HxxxxxxP", len(code) // 8, ctypes.addressof(buf))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
    return _landlock(libc)


def _landlock(libc: ctypes.CDLL) -> str:
    libc.syscall.restype = ctypes.c_long
    attr = struct.pack("=Q", LANDLOCK_ACCESS_FS_WRITE_FILE)
    ruleset = libc.syscall(LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), 0)
    if ruleset < 0:
        return f"no Landlock ({os.strerror(ctypes.get_errno())}): /proc/<pid>/mem stays writable"
    try:
        for name in sorted(os.listdir("/")):
            if name in UNWRITABLE or not os.path.isdir("/" + name):
                continue
            fd = os.open("/" + name, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", LANDLOCK_ACCESS_FS_WRITE_FILE, fd)
                if libc.syscall(LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0):
                    return f"Landlock rule for /{name} refused ({os.strerror(ctypes.get_errno())})"
            finally:
                os.close(fd)
        if libc.syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return f"Landlock not applied ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return ""


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
        unconfined = confine(libc)
    except OSError as exc:
        print(f"could not confine the verifier: {exc}", file=sys.stderr)
        code, unconfined = 126, f"no seccomp filter ({exc})"
    else:
        try:
            child = subprocess.Popen(argv[1:], stdin=subprocess.DEVNULL, stdout=2, stderr=2)
            code = child.wait()
        except OSError as exc:
            print(f"could not start the verifier: {exc}", file=sys.stderr)
            code = 127
    left, unkillable = kill_all(os.getpid())
    sys.stderr.flush()
    doc = {
        "exit": code,
        "left": left,
        "unkillable": unkillable,
        "unlinked": unlinked,
        "unconfined": unconfined,
    }
    verdict.write("\n" + json.dumps(doc) + "\n")
    verdict.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
