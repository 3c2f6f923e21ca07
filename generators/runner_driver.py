"""Runner's sandbox driver (stdlib only): build or solve a generator in a sandbox; see the end."""
import json, sys  # noqa: E401, I001

def load(path):
    # A plain module object and exec(), not importlib.util (whose imports cost every start ~5 ms);
    # the code object is cached beside the source (marshal, after the bytecode magic number; the
    # host may have put it there) so only one interpreter, or none, compiles the source.
    import marshal
    mod = type(sys)("generator")
    mod.__file__ = path
    sys.modules["generator"] = mod
    magic = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER.ljust(16, b"\0")
    code = None
    try:
        with open(path + ".code", "rb") as f:
            if f.read(16) == magic:  # compiled by this interpreter's bytecode version
                code = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        code = None
    if code is None:
        with open(path, "rb") as f:
            code = (compile(f.read(), path, "exec", dont_inherit=True),)
        try:
            with open(path + ".code", "wb") as f:
                f.write(magic)
                marshal.dump(code, f)
        except OSError:
            pass
    for piece in code:  # the module's pieces, in order (runner.compiled)
        exec(piece, mod.__dict__)
    return mod

def fail(out, phase, exc):
    import traceback  # only on failure: importing it costs every successful build ~2 ms
    tb = traceback.format_exc().splitlines()[-12:]
    with open(out, "w") as f:
        json.dump({"ok": False, "phase": phase, "error": type(exc).__name__ + ": " + str(exc)[:2000],
                   "traceback": "\n".join(tb)}, f)

def alarm(seconds):
    # The builtin _signal: `signal` builds its enums (~2 ms). A handler of our own, since the
    # default action never ends a process that is its namespace's pid 1 (bubblewrap's
    # --as-pid-1): an alarm then ends the driver as the signal would have (128 + 14).
    try:
        import _signal as sig
    except ImportError:
        import signal as sig
    import os
    sig.signal(sig.SIGALRM, lambda *_: os._exit(128 + sig.SIGALRM))
    sig.alarm(seconds)

def built(gen, seed, out):
    phase = "load"
    try:
        mod = load(gen)
        phase = "build"
        result = mod.build(seed)
        phase = "encode"
        text = json.dumps({"ok": True, "result": result}, sort_keys=True, allow_nan=False)
    except BaseException as exc:
        fail(out, phase, exc)
        return False
    with open(out, "w") as f:
        f.write(text)
    return True

def build(gen, seed, out):
    if not built(gen, seed, out):
        sys.exit(3)

def solve_each(jobs):
    # solve-batch JOBS: for each job of the JSON file JOBS (a built-in task: this project's own
    # code, its workspace beside the others'), what `solve` does, under the job's own alarms; a
    # job past one ends the interpreter and leaves the jobs after it without reports.
    import os
    with open(jobs) as f:
        jobs = json.load(f)
    for job in jobs:
        alarm(job["alarm"])
        os.chdir(job["workspace"])
        try:
            load(job["gen"]).solve(job["workspace"])
        except BaseException as exc:
            fail(job["out"], "solve", exc)
            continue
        with open(job["out"], "w") as f:
            f.write('{"ok": true}')
        if job["seed"] is not None:
            alarm(job["build_alarm"])
            os.makedirs(job["empty"], exist_ok=True)
            os.chdir(job["empty"])
            built(job["gen"], job["seed"], job["build_out"])
    alarm(0)

def main():
    verb, gen = sys.argv[1], sys.argv[2]
    if verb == "solve-batch":
        solve_each(gen)
        return
    if verb == "build":
        # build GEN SEED OUT [ALARM NEXT_OUT...]: build once into OUT; with NEXT_OUTs, exec a
        # fresh interpreter (a new hash seed) for the next build, each under its own ALARM seconds.
        seed, out, rest = sys.argv[3], sys.argv[4], sys.argv[5:]
        if rest:
            alarm(int(rest[0]))
        build(gen, int(seed), out)
        if len(rest) > 1:
            alarm(0)
            sys.stdout.flush()
            sys.stderr.flush()
            import os
            os.execv(sys.executable, [sys.executable, "-I", "-S", sys.argv[0], "build", gen,
                                      seed, rest[1], rest[0], *rest[2:]])
        return
    # solve GEN WORKSPACE OUT ALARM [SEED BUILD_OUT ALARM]: what the canonical solution/solve.sh
    # does (solve(WORKSPACE) from WORKSPACE) under ALARM seconds, result in OUT; then, with SEED,
    # the generator loaded afresh builds SEED again into BUILD_OUT from an empty folder: this
    # interpreter's hash seed is not forge's, so the build is verify's determinism rebuild.
    workspace, out = sys.argv[3], sys.argv[4]
    alarm(int(sys.argv[5]))
    try:
        load(gen).solve(workspace)
    except BaseException as exc:
        fail(out, "solve", exc)
        sys.exit(3)
    with open(out, "w") as f:
        f.write('{"ok": true}')
    if len(sys.argv) > 6:
        import os
        alarm(int(sys.argv[8]))
        empty = os.path.join(os.path.dirname(out), "empty")
        os.makedirs(empty, exist_ok=True)
        os.chdir(empty)
        build(gen, int(sys.argv[6]), sys.argv[7])

if __name__ == "__main__":  # runner copies this text to the sandbox and runs it there
    main()

# Runs inside the sandbox as STAGE/driver.py with `python3 -I -S`: stdlib only. It reports what
# failed and where (load, build, encode) so the host can tell a generator bug from a contract
# violation:
#     driver.py build GEN SEED OUT [ALARM NEXT_OUT...]
#     driver.py solve GEN WORKSPACE OUT ALARM [SEED BUILD_OUT ALARM]
#     driver.py solve-batch JOBS
# Runner imports this module (and reads its source as data) so the stage cache keys, which
# follow imports, see edits to it; importing it runs nothing. Its lines keep the numbers they had
# as runner.DRIVER_SOURCE (and this file is left out of `ruff format`): a failed build's
# traceback names them, and forge writes that traceback into its rows.
