"""Run a generator's build() or solve() inside a sandbox, never in the pipeline's own process.

The host only ever *parses* generator code (`ast`, for the GENERATOR metadata and title); it never
imports or executes it (it compiles it, once per text, so the sandbox's interpreters load a code
object instead of compiling it each). Execution happens in a sandbox through a small stdlib
driver that loads the generator file, calls `build(seed)` (N times in one exec: each build execs
a fresh interpreter for the next) and writes the JSON result to a file we read with a size cap
(in place on bubblewrap, downloaded elsewhere), or calls `solve(workspace)` and then, for
verify's determinism check, `build(seed)` again (solve_then_rebuild; solve_each does that for a
batch of built-in generators in one interpreter). Whatever goes wrong comes back as
`GeneratorError(kind, ...)` with kind in {"contract", "timeout", "crash", "sandbox"}; only
"sandbox" is worth retrying.

    meta = parse_meta(code)
    result = run_build(code, seed=7, sandbox=SandboxConfig(backend="bwrap"))
"""

from __future__ import annotations
import __future__

import dataclasses
import functools
import importlib.util
import json
import marshal
import math
import operator
import threading
import types
from pathlib import Path
from typing import Literal

from clawloop.generators import runner_driver
from clawloop.generators.candidates import ParsedGenerator, parse_meta, source_pieces
from clawloop.generators.contract import BuildResult, ContractError, validate_build
from clawloop.harness.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxError
from clawloop.harness.sandbox.scratch import scratch

ErrorKind = Literal["contract", "timeout", "crash", "sandbox"]

# Where the driver, the generator and the build output live inside the sandbox: /tmp persists
# between execs on every backend and keeps the build's /workspace empty.
STAGE = "/tmp/clawloop-forge"
GENERATOR_FILE = f"{STAGE}/generator.py"
MAX_RESULT_BYTES = (
    16 * 1024 * 1024
)  # a valid build is capped at 8 MiB of files; allow JSON overhead
TAIL_LINES = 12

# Runs inside the sandbox with `python3 -I -S` (generators/runner_driver.py, stdlib only); its
# source is read from the module imported here, so the cache keys follow edits to it.
DRIVER_SOURCE = Path(str(runner_driver.__file__)).read_text()


class GeneratorError(RuntimeError):
    """A generator failed to build or solve: kind says whose fault (only "sandbox" is transient)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message


def _tail(text: str, n: int = TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


_COMPILE_LOCK = threading.Lock()
_COMPILE_ERRORS = (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError)
_FUTURE_FLAGS = functools.reduce(
    operator.or_, (getattr(__future__, f).compiler_flag for f in __future__.all_feature_names)
)


@functools.lru_cache(maxsize=8192)
def _piece(text: bytes, flags: int) -> types.CodeType:
    return compile(text, GENERATOR_FILE, "exec", flags=flags, dont_inherit=True, optimize=0)


def _shifted(code: types.CodeType, lines: int) -> types.CodeType:
    """The code object as if its text started `lines` lines further down (CPython's line
    tables count from co_firstlineno), nested functions and classes too."""
    if not lines:
        return code
    consts = tuple(
        _shifted(c, lines) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    return code.replace(co_firstlineno=code.co_firstlineno + lines, co_consts=consts)


@functools.lru_cache(maxsize=256)
def compiled(source: bytes) -> tuple[types.CodeType, ...] | None:
    """Generator source compiled (never run) on the host, once per process and text: forge's
    build and verify's solve load it instead of compiling it in each sandbox (~10 ms each).
    Compiled piece by piece (the module's head, each top-level def and class), each piece once
    per process: built-in generators share all but their head, so a new one costs a fraction
    of a compile. Executing the pieces in order into one namespace is executing the module;
    their line numbers are the file's. None when it does not compile: the sandbox then
    compiles it and reports the error."""
    with _COMPILE_LOCK:  # as candidates.parse_meta: CPython <= 3.11.7's parser in threads
        try:
            pieces = source_pieces(source)
            head = _piece(pieces[0][1], 0)
            flags = head.co_flags & _FUTURE_FLAGS  # `from __future__` holds for the whole file
            return (head,) + tuple(_shifted(_piece(t, flags), n) for n, t in pieces[1:])
        except _COMPILE_ERRORS:
            pass
        try:
            return (compile(source, GENERATOR_FILE, "exec", dont_inherit=True, optimize=0),)
        except _COMPILE_ERRORS:
            return None


def run_pieces(pieces: tuple[types.CodeType, ...], namespace: dict) -> None:
    """Execute compiled()'s pieces, in order, into one module namespace."""
    for code in pieces:
        exec(code, namespace)


def _refile(code: types.CodeType, filename: str) -> types.CodeType:
    """The code object with `filename` as its file, nested functions and classes too."""
    consts = tuple(
        _refile(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


@functools.lru_cache(maxsize=16)  # verify puts the same grader in every task's sandbox
def code_blob(source: bytes, filename: str) -> bytes | None:
    """The driver's cache file for `source` at `filename`: this interpreter's bytecode magic
    number (16 bytes, so a sandbox interpreter of another version compiles instead) + marshal."""
    pieces = compiled(source)
    if pieces is None:
        return None
    if filename != GENERATOR_FILE:
        pieces = tuple(_refile(c, filename) for c in pieces)
    return importlib.util.MAGIC_NUMBER.ljust(16, b"\0") + marshal.dumps(pieces)


def stage_generator(sb: Sandbox, code: str) -> None:
    """Put the driver, the generator and its compiled code into the sandbox's staging directory
    (written straight into a bubblewrap sandbox's files; uploaded as a tar elsewhere)."""
    source = code.encode()
    files = {"driver.py": DRIVER_SOURCE.encode(), "generator.py": source}
    blob = code_blob(source, GENERATOR_FILE)
    if blob is not None:
        files["generator.py.code"] = blob
    write = getattr(sb, "write_files", None)
    if write is not None:
        write(STAGE, {rel: (data, False) for rel, data in files.items()})
        return
    with scratch("clawloop-stage-") as tmp:
        for rel, data in files.items():
            Path(tmp, rel).write_bytes(data)
        sb.upload(Path(tmp), STAGE)


def read_capped(sb: Sandbox, remote: str, cap: int) -> bytes | None:
    """One file out of the sandbox: None when it never appeared, OverflowError (its size) when it
    is over `cap`. A bubblewrap sandbox's file is read in place; elsewhere it is downloaded."""
    read = getattr(sb, "read_file", None)
    if read is not None:
        return read(remote, cap)
    with scratch("clawloop-out-") as tmp:
        local = Path(tmp, "out")
        try:
            sb.download(remote, local)
        except (SandboxError, FileNotFoundError, OSError):
            return None
        if not local.is_file():
            return None
        size = local.stat().st_size
        if size > cap:
            raise OverflowError(size)
        return local.read_bytes()


def _read_raw(sb: Sandbox, remote: str, label: str, where: str) -> bytes | None:
    """The driver's result file as bytes; None when it never appeared (process killed)."""
    try:
        return read_capped(sb, remote, MAX_RESULT_BYTES)
    except OverflowError as exc:
        raise GeneratorError(
            "contract",
            f"{label}, {where}: result is {exc.args[0]} bytes, over the {MAX_RESULT_BYTES} byte "
            "cap; make the task smaller",
        ) from exc


def _parse_report(raw: bytes | None, label: str, where: str) -> dict | None:
    if raw is None:
        return None
    try:
        return json.loads(raw.decode(errors="replace"))
    except json.JSONDecodeError as exc:
        raise GeneratorError(
            "crash", f"{label}, {where}: driver output is not JSON ({exc})"
        ) from exc


def _read_capped(sb: Sandbox, remote: str, label: str, where: str) -> dict | None:
    """The driver's result file, parsed; None when it never appeared (process killed)."""
    return _parse_report(_read_raw(sb, remote, label, where), label, where)


def _explain(
    res: ExecResult, report: dict | None, label: str, where: str, timeout: float
) -> GeneratorError:
    """Turn a failed driver run into a GeneratorError naming what went wrong."""
    if res.timed_out:
        return GeneratorError(
            "timeout", f"{label}, {where}: still running after {timeout:g}s; killed"
        )
    if report and not report.get("ok"):
        kind: ErrorKind = "contract" if report.get("phase") == "encode" else "crash"
        detail = report.get("error", "")
        if report.get("phase") == "encode":
            detail = f"build() returned a value that is not plain JSON ({detail})"
        tb = _tail(report.get("traceback", ""), 6)
        return GeneratorError(
            kind, f"{label}, {where}: {report.get('phase')} failed: {detail}\n{tb}".rstrip()
        )
    # No report at all: killed by a signal or a limit (file size, memory, processes) or os._exit.
    code = res.exit_code
    why = f"exit code {code}"
    if code < 0 or code > 128:
        sig = -code if code < 0 else code - 128
        why = f"killed by signal {sig}" + {
            9: " (memory or process limit?)",
            25: " (file size limit exceeded)",
            24: " (CPU time limit exceeded)",
        }.get(sig, "")
    stderr = _tail(res.stderr, 6)
    return GeneratorError("crash", f"{label}, {where}: {why}, no result written\n{stderr}".rstrip())


SIGALRM_EXIT = 128 + 14  # a build past its alarm (the driver arms one per build in a chain)


def build_chain(
    sb: Sandbox, gen: ParsedGenerator, seed: int, timeout: float, out_names: list[str]
) -> tuple[list[tuple[bytes, dict] | GeneratorError], str]:
    """Run build(seed) len(out_names) times in one exec of an already staged sandbox, each build
    in a fresh interpreter (the driver execs the next one: a new hash seed, no new sandbox
    process) under its own `timeout`. Returns, per build that ran, its raw result file and
    report, or the GeneratorError it failed with (the builds after a failed one never ran),
    and the exec's log tail."""
    outs = [f"{STAGE}/{name}" for name in out_names]
    where = f"seed {seed}"
    alarm = str(max(1, math.ceil(timeout)))
    argv = ["python3", "-I", "-S", f"{STAGE}/driver.py", "build", f"{STAGE}/generator.py"]
    argv += [str(seed), outs[0]]
    if len(outs) > 1:
        argv += [alarm, *outs[1:]]
    res = sb.exec(argv, timeout=timeout * len(outs), cwd="/workspace")
    results: list[tuple[bytes, dict] | GeneratorError] = []
    for out in outs:
        try:
            raw = _read_raw(sb, out, gen.label, where)
            report = _parse_report(raw, gen.label, where)
        except GeneratorError as exc:
            results.append(exc)
            break
        if raw is not None and report and report.get("ok"):
            results.append((raw, report))
            continue
        alarmed = report is None and res.exit_code == SIGALRM_EXIT
        died = dataclasses.replace(res, timed_out=res.timed_out or alarmed)
        results.append(_explain(died, report, gen.label, where, timeout))
        break
    return results, _tail(res.stdout + "\n" + res.stderr, 40)


SOLVE_OUT = f"{STAGE}/solve.json"
REBUILD_OUT = f"{STAGE}/rebuild.json"


@dataclasses.dataclass
class Solved:
    """What solve_then_rebuild found: the exec, the solve's failure (None: it finished), and
    the rebuild's result (a GeneratorError when it failed; None when none was asked for or the
    solve failed first)."""

    res: ExecResult
    error: str | None
    rebuild: BuildResult | GeneratorError | None = None


def solve_then_rebuild(
    sb: Sandbox,
    gen: ParsedGenerator,
    workspace: str,
    solve_timeout: float,
    seed: int | None = None,
    build_timeout: float = 30.0,
) -> Solved:
    """In one interpreter of an already staged sandbox: the reference solution (what the
    canonical solve.sh runs), then, with a seed, the generator loaded afresh building that seed
    again, after the solve so the solve never sees a build's state."""
    argv = ["python3", "-I", "-S", f"{STAGE}/driver.py", "solve", GENERATOR_FILE, workspace]
    argv += [SOLVE_OUT, str(max(1, math.ceil(solve_timeout)))]
    timeout = solve_timeout
    if seed is not None:
        argv += [str(seed), REBUILD_OUT, str(max(1, math.ceil(build_timeout)))]
        timeout += build_timeout
    # Each step's own alarm ends it first; the wall limit covers both, rounded up, and a hang.
    res = sb.exec(argv, timeout=timeout + 2, cwd=workspace)
    try:
        report = _read_capped(sb, SOLVE_OUT, gen.label, "solve")
    except GeneratorError as exc:
        return Solved(res, exc.message)
    if not report or not report.get("ok"):
        if report is None and (res.timed_out or res.exit_code == SIGALRM_EXIT):
            return Solved(res, f"timed out after {solve_timeout:g}s")
        if report:
            tb = _tail(report.get("traceback", ""), 4)
            return Solved(res, f"raised {report.get('error', '')}\n{tb}".strip())
        return Solved(res, _explain(res, None, gen.label, "solve", solve_timeout).message)
    if seed is None:
        return Solved(res, None)
    where = f"seed {seed}, rebuilt after the solve"
    try:
        raw = _read_raw(sb, REBUILD_OUT, gen.label, where)
        built = _parse_report(raw, gen.label, where)
        if raw is not None and built and built.get("ok"):
            return Solved(res, None, validated(built, gen, seed))
    except GeneratorError as exc:
        return Solved(res, None, exc)
    alarmed = built is None and res.exit_code == SIGALRM_EXIT
    died = dataclasses.replace(res, timed_out=res.timed_out or alarmed)
    return Solved(res, None, _explain(died, built, gen.label, where, build_timeout))


@dataclasses.dataclass
class SolveJob:
    """One built-in task for solve_each: its generator, where its starting workspace is, its
    solve's timeout, and the seed to build again afterwards (None: no rebuild)."""

    gen: ParsedGenerator
    code: str
    workspace: str
    solve_timeout: float
    seed: int | None = None
    build_timeout: float = 30.0


def solve_each(sb: Sandbox, jobs: list[SolveJob]) -> list[Solved | None]:
    """solve_then_rebuild for several built-in generators (this project's own code, never an
    LLM's: they need no sandbox from each other) in one exec and one interpreter of a started
    sandbox, each job under its own alarms, its workspace its own. Per job: its Solved when the
    solve finished and the rebuild, if asked for, wrote a result (a contract violation in it is
    its GeneratorError); None otherwise (a failure, or a job the interpreter never reached):
    run that one through solve_then_rebuild alone, whose messages say what went wrong."""
    files: dict[str, tuple[bytes, bool] | None] = {"driver.py": (DRIVER_SOURCE.encode(), False)}
    specs = []
    for i, job in enumerate(jobs):
        source = job.code.encode()
        files[f"{i}/generator.py"] = (source, False)
        blob = code_blob(source, GENERATOR_FILE)  # the one file name tracebacks give
        if blob is not None:
            files[f"{i}/generator.py.code"] = (blob, False)
        specs.append(
            {
                "gen": f"{STAGE}/{i}/generator.py",
                "workspace": job.workspace,
                "out": f"{STAGE}/{i}/solve.json",
                "alarm": max(1, math.ceil(job.solve_timeout)),
                "seed": job.seed,
                "build_out": f"{STAGE}/{i}/rebuild.json",
                "build_alarm": max(1, math.ceil(job.build_timeout)),
                "empty": f"{STAGE}/{i}/empty",
            }
        )
    files["jobs.json"] = (json.dumps(specs).encode(), False)
    sb.write_files(STAGE, files)  # type: ignore[attr-defined]
    wall = sum(j.solve_timeout + (j.build_timeout if j.seed is not None else 0) for j in jobs)
    argv = ["python3", "-I", "-S", f"{STAGE}/driver.py", "solve-batch", f"{STAGE}/jobs.json"]
    res = sb.exec(argv, timeout=wall + 2, cwd="/workspace")
    out: list[Solved | None] = []
    for job, spec in zip(jobs, specs, strict=True):
        try:
            report = _read_capped(sb, spec["out"], job.gen.label, "solve")
            if not report or not report.get("ok"):
                out.append(None)
                continue
            if job.seed is None:
                out.append(Solved(res, None))
                continue
            built = _read_capped(sb, spec["build_out"], job.gen.label, "rebuild")
        except GeneratorError:
            out.append(None)
            continue
        if not built or not built.get("ok"):
            out.append(None)
            continue
        try:
            out.append(Solved(res, None, validated(built, job.gen, job.seed)))
        except GeneratorError as exc:
            out.append(Solved(res, None, exc))
    return out


def validated(report: dict, gen: ParsedGenerator, seed: int) -> BuildResult:
    try:
        return validate_build(report.get("result"))
    except ContractError as exc:
        raise GeneratorError("contract", f"{gen.label}, seed {seed}: {exc}") from exc


def build_in(
    sb: Sandbox, gen: ParsedGenerator, seed: int, timeout: float, out_name: str
) -> tuple[BuildResult, str]:
    """Run build(seed) once in an already staged sandbox; return the validated result and its log."""
    (first, *_), log = build_chain(sb, gen, seed, timeout, [out_name])
    if isinstance(first, GeneratorError):
        raise first
    return validated(first[1], gen, seed), log


def run_builds(
    code: str, seed: int, sandbox: SandboxConfig, timeout: float = 30, times: int = 1
) -> tuple[list[BuildResult], str]:
    """Build `times` times with one seed, each in its own interpreter (fresh hash seed), in one
    sandbox. Raises GeneratorError on the first failed build; kind "sandbox" for infra faults."""
    from clawloop.harness.sandbox.backend import open_sandbox

    try:
        gen = parse_meta(code)
    except ContractError as exc:
        raise GeneratorError("contract", str(exc)) from exc
    results: list[BuildResult] = []
    logs: list[str] = []
    try:
        with open_sandbox(sandbox) as sb:
            stage_generator(sb, code)
            chain, log = build_chain(
                sb, gen, seed, timeout, [f"build-{i}.json" for i in range(times)]
            )
            logs.append(log)
            for built in chain:
                if isinstance(built, GeneratorError):
                    raise built
                results.append(validated(built[1], gen, seed))
    except SandboxError as exc:
        raise GeneratorError("sandbox", f"{gen.label}, seed {seed}: sandbox failed: {exc}") from exc
    return results, "\n".join(x for x in logs if x)


def run_build(code: str, seed: int, sandbox: SandboxConfig, timeout: float = 30) -> BuildResult:
    """Build one task from generator code inside a fresh sandbox; GeneratorError on any failure."""
    results, _ = run_builds(code, seed, sandbox, timeout, times=1)
    return results[0]
