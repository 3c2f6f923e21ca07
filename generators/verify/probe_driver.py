"""Verify's grading driver: runs inside a sandbox, after the reference solution, for each job of
STAGE/jobs.json. STANDARD LIBRARY ONLY: verify copies this file's text into the sandbox as
STAGE/driver.py and runs

    python3 -I -S STAGE/driver.py STAGE

One job is one task's grading; the jobs of a batch are several tasks' solved workspaces and
answer keys side by side. This interpreter loads the grader once, then forks one child per job,
so no job's grading can leave state (a module's, the C libraries': sqlite's heap limit) or spent
CPU time to the next. The child does first (with "oracle") what the canonical tests/test.sh does
(the grader grading the job's workspace into its reward.json and details.json, its output in
test.log), then the no-op (the task's pristine starting workspace) and each probe (its files
written over the pristine workspace, graded, then put back) with the same grader module, the
job's results written last (so a job with results is complete), under the job's alarm (its
default action: a child is not the namespace's pid 1, so it dies of it even inside C code). The
host grades a job left without results again, alone. The grader's code object comes precompiled
from the host when the interpreter versions match (STAGE/grader.code), else it is compiled here.

Verify imports this module (and reads its source as data) so the stage cache keys, which follow
imports, see edits to it; importing it runs nothing.
"""

import json
import marshal
import os
import sys


def load(stage, name, path):
    mod = type(sys)(name)
    mod.__file__ = path
    sys.modules[name] = mod
    code = None
    try:
        with open(os.path.join(stage, name + ".code"), "rb") as f:
            tag = f.read(16)
            magic = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
            if tag == magic.ljust(16, b"\0"):
                code = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError, KeyError, AttributeError):
        code = None
    if code is None:
        with open(path, "rb") as f:
            code = (compile(f.read(), path, "exec", dont_inherit=True),)
    for piece in code:  # the module's pieces, in order (runner.compiled)
        exec(piece, mod.__dict__)
    return mod


def alarm(seconds):
    # The builtin _signal (`signal` builds its enums, ~2 ms), its default action.
    try:
        import _signal as sig
    except ImportError:
        import signal as sig
    sig.signal(sig.SIGALRM, sig.SIG_DFL)
    sig.alarm(seconds)


def oracle(grader, job):
    logs = job["logs"]
    reward, details = logs + "/reward.json", logs + "/details.json"
    os.makedirs(logs, exist_ok=True)
    for name in os.listdir(logs):
        if name.startswith("reward.") or name == "details.json":
            os.unlink(os.path.join(logs, name))
    saved = sys.stdout
    with open(logs + "/test.log", "w") as log:
        sys.stdout = log
        try:
            grader.main(
                [
                    "--tests-dir",
                    job["tests"],
                    "--workspace",
                    job["workspace"],
                    "--out",
                    reward,
                    "--details",
                    details,
                ]
            )
        except BaseException as exc:
            print(f"grader failed: {type(exc).__name__}: {exc}")
        finally:
            sys.stdout = saved
    if not os.path.isfile(reward) or not os.path.getsize(reward):
        with open(details, "w") as f:
            json.dump(
                {
                    "reward": 0.0,
                    "passed": False,
                    "checks": [],
                    "reason": "grader exited without writing a reward",
                },
                f,
            )
        with open(reward, "w") as f:
            f.write('{"reward": 0.0}\n')


def overlay(ws, files):
    # Write a probe's files over the pristine workspace, as an agent would (a starting file
    # where the probe needs a folder is removed first); return how to put it back.
    top = os.path.realpath(ws) + os.sep
    saved, made, moved = [], [], []
    try:
        for rel, text in files.items():
            path = os.path.join(ws, rel)
            if not os.path.realpath(path).startswith(top):
                raise ValueError(f"probe path {rel!r} is outside the workspace")
            try:
                missing, d = [], os.path.dirname(path)
                while not os.path.isdir(d):
                    missing.append(d)
                    d = os.path.dirname(d)
                for d in reversed(missing):
                    if os.path.lexists(d):
                        with open(d, "rb") as f:
                            moved.append((d, f.read(), os.stat(d).st_mode & 0o777))
                        os.unlink(d)
                    os.mkdir(d)
                    made.append(d)
                try:
                    with open(path, "rb") as f:
                        before = f.read()
                except FileNotFoundError:
                    before = None
                saved.append((path, before))
                with open(path, "w") as f:
                    f.write(text)
            except OSError as exc:  # named by the path in the workspace, not where it is
                raise OSError(exc.errno, f"probe file {rel!r}: {exc.strerror}") from None
    except BaseException:
        restore(saved, made, moved)
        raise
    return saved, made, moved


def restore(saved, made, moved):
    # Raises if the pristine workspace cannot be put back: then no results at all (an error).
    for path, before in reversed(saved):
        if before is None:
            os.unlink(path)
        else:
            with open(path, "wb") as f:
                f.write(before)
    for d in reversed(made):
        os.rmdir(d)
    for path, data, mode in reversed(moved):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)


def probes(grader, job):
    with open(job["tests"] + "/contract.json") as f:
        contract = json.load(f)
    with open(job["tests"] + "/answer.json") as f:
        answer = json.load(f)
    with open(job["probes"]) as f:
        probes = json.load(f)
    ws = job["pristine"]
    results = {}
    for name, files in [("noop", {})] + sorted(probes.items()):
        key = name if name == "noop" else "trivial:" + name
        try:
            undo = overlay(ws, files)
        except Exception as exc:
            results[key] = {"reward": 0.0, "error": f"{type(exc).__name__}: {exc}"}
            continue
        try:
            g = grader.grade(contract, answer, ws)
            results[key] = {"reward": float(g.get("reward", 0.0)), "passed": bool(g.get("passed"))}
        except Exception as exc:
            results[key] = {"reward": 0.0, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            restore(*undo)
    with open(job["results"], "w") as f:
        json.dump(results, f)


def main(stage):
    with open(os.path.join(stage, "jobs.json")) as f:
        spec = json.load(f)
    grader = load(stage, "grader", spec["grader"])
    # What every job's child would otherwise import again: grader.main's argparse and what it
    # imports when it first makes a parser (shutil, for the terminal's width; locale). Then the
    # objects so far are frozen, so the children's collections leave their pages shared.
    import argparse  # noqa: F401
    import gc
    import locale  # noqa: F401
    import shutil  # noqa: F401

    gc.freeze()
    for job in spec["jobs"]:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                alarm(job["alarm"])
                if job["oracle"]:
                    oracle(grader, job)
                probes(grader, job)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if status:  # how the child ended, for the host to say why the job has no results
            os.makedirs(job["logs"], exist_ok=True)
            with open(job["logs"] + "/grading.status", "w") as f:
                f.write(str(status))


if __name__ == "__main__":
    main(sys.argv[1])
