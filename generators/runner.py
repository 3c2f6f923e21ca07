"""Run a generator's build() or solve() inside a sandbox, never in the pipeline's own process.

The host only ever *parses* generator code (`ast`, for the GENERATOR metadata and title); it never
imports or executes it. Execution happens in a sandbox through a small stdlib driver that loads
the generator file, calls `build(seed)` and writes the JSON result to a file we download with a
size cap, or calls `solve(workspace)`. Whatever goes wrong comes back as `GeneratorError(kind, ...)`
with kind in {"contract", "timeout", "crash", "sandbox"}; only "sandbox" is worth retrying.

    meta = parse_meta(code)
    result = run_build(code, seed=7, sandbox=SandboxConfig(backend="bwrap"))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from clawloop.generators.candidates import ParsedGenerator, parse_meta
from clawloop.generators.contract import BuildResult, ContractError, validate_build
from clawloop.harness.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxError
from clawloop.harness.sandbox.scratch import scratch

ErrorKind = Literal["contract", "timeout", "crash", "sandbox"]

# Where the driver, the generator and the build output live inside the sandbox: /tmp persists
# between execs on every backend and keeps the build's /workspace empty.
STAGE = "/tmp/clawloop-forge"
MAX_RESULT_BYTES = (
    16 * 1024 * 1024
)  # a valid build is capped at 8 MiB of files; allow JSON overhead
TAIL_LINES = 12

# Runs inside the sandbox with `python3 -I`: stdlib only. It reports what failed and where
# (load, build, encode) so the host can tell a generator bug from a contract violation.
DRIVER_SOURCE = r"""
import importlib.util, json, sys

def load(path):
    spec = importlib.util.spec_from_file_location("generator", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["generator"] = mod
    spec.loader.exec_module(mod)
    return mod

def fail(out, phase, exc):
    import traceback  # only on failure: importing it costs every successful build ~2 ms
    tb = traceback.format_exc().splitlines()[-12:]
    with open(out, "w") as f:
        json.dump({"ok": False, "phase": phase, "error": type(exc).__name__ + ": " + str(exc)[:2000],
                   "traceback": "\n".join(tb)}, f)

def main():
    verb, gen = sys.argv[1], sys.argv[2]
    out = sys.argv[-1]
    phase = "load"
    try:
        mod = load(gen)
        if verb == "build":
            phase = "build"
            result = mod.build(int(sys.argv[3]))
            phase = "encode"
            text = json.dumps({"ok": True, "result": result}, sort_keys=True, allow_nan=False)
        else:
            phase = "solve"
            mod.solve(sys.argv[3])
            text = json.dumps({"ok": True})
    except BaseException as exc:
        fail(out, phase, exc)
        sys.exit(3)
    with open(out, "w") as f:
        f.write(text)

main()
"""


class GeneratorError(RuntimeError):
    """A generator failed to build or solve: kind says whose fault (only "sandbox" is transient)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message


def _tail(text: str, n: int = TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def stage_generator(sb: Sandbox, code: str) -> None:
    """Upload the driver and the generator into the sandbox's staging directory."""
    with scratch("clawloop-stage-") as tmp:
        Path(tmp, "driver.py").write_text(DRIVER_SOURCE)
        Path(tmp, "generator.py").write_text(code)
        sb.upload(Path(tmp), STAGE)


def _read_capped(sb: Sandbox, remote: str, label: str, where: str) -> dict | None:
    """Download the driver's result file; None when it never appeared (process killed)."""
    with scratch("clawloop-out-") as tmp:
        local = Path(tmp, "out.json")
        try:
            sb.download(remote, local)
        except (SandboxError, FileNotFoundError, OSError):
            return None
        if not local.is_file():
            return None
        size = local.stat().st_size
        if size > MAX_RESULT_BYTES:
            raise GeneratorError(
                "contract",
                f"{label}, {where}: result is {size} bytes, over the {MAX_RESULT_BYTES} byte cap; "
                "make the task smaller",
            )
        try:
            return json.loads(local.read_text(errors="replace"))
        except json.JSONDecodeError as exc:
            raise GeneratorError(
                "crash", f"{label}, {where}: driver output is not JSON ({exc})"
            ) from exc


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


def build_in(
    sb: Sandbox, gen: ParsedGenerator, seed: int, timeout: float, out_name: str
) -> tuple[BuildResult, str]:
    """Run build(seed) once in an already staged sandbox; return the validated result and its log."""
    out = f"{STAGE}/{out_name}"
    where = f"seed {seed}"
    res = sb.exec(
        [
            "python3",
            "-I",
            "-S",
            f"{STAGE}/driver.py",
            "build",
            f"{STAGE}/generator.py",
            str(seed),
            out,
        ],
        timeout=timeout,
        cwd="/workspace",
    )
    report = None if res.timed_out else _read_capped(sb, out, gen.label, where)
    if res.timed_out or not report or not report.get("ok"):
        raise _explain(res, report, gen.label, where, timeout)
    log = _tail(res.stdout + "\n" + res.stderr, 40)
    try:
        return validate_build(report.get("result")), log
    except ContractError as exc:
        raise GeneratorError("contract", f"{gen.label}, {where}: {exc}") from exc


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
            for i in range(times):
                result, log = build_in(sb, gen, seed, timeout, f"build-{i}.json")
                results.append(result)
                logs.append(log)
    except SandboxError as exc:
        raise GeneratorError("sandbox", f"{gen.label}, seed {seed}: sandbox failed: {exc}") from exc
    return results, "\n".join(x for x in logs if x)


def run_build(code: str, seed: int, sandbox: SandboxConfig, timeout: float = 30) -> BuildResult:
    """Build one task from generator code inside a fresh sandbox; GeneratorError on any failure."""
    results, _ = run_builds(code, seed, sandbox, timeout, times=1)
    return results[0]
