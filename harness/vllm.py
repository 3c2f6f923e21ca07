"""A vLLM server that clawloop starts and owns (`llm.server: vllm` with `llm.base_url` unset).

    with ManagedVLLM(log_path=Path("runs/ID/vllm.log")) as server:
        url = server.serve(model_dir)                 # /v1 base URL; restarts on a new folder
        server.serve(base_dir, lora_rank=16)          # base with runtime LoRA switched on
        name = server.load_adapter("iter-1", adapter) # load_inplace: a re-load replaces it

What it does: finds a vLLM (`$CLAWLOOP_VLLM_VENV`, else this Python's own `vllm` on a GPU host,
else the CPU venv `scripts/setup-vllm.sh` builds at ~/.cache/clawloop/vllm-venv), starts it as
`python -m vllm.entrypoints.openai.api_server` (the `vllm` entry point of the CPU wheel dies on
missing package metadata) on a free loopback port, waits for /health, and writes its output to
the run's `vllm.log`. New weights: a full or merged checkpoint folder restarts the server on it
(what CPU wants: requests through a runtime adapter are ~6.5x slower there); an unmerged LoRA
adapter is loaded at runtime with `load_inplace` (vLLM's `--enable-lora`,
VLLM_ALLOW_RUNTIME_LORA_UPDATING), so a re-trained adapter of the same name replaces the old one.

No orphan engine: vLLM runs under a small guard process (`python -m clawloop.harness.vllm
--guard`) in a process group of its own; the guard polls its owner once a second and, when the
owner is gone (exit, SIGKILL, a dead thread: unlike PR_SET_PDEATHSIG it does not care which
thread started it), stops the whole group. The guard is recorded as an owned child
(`harness.owned`), so `clawloop sweep` (and every run's start) kills a group whose owner and guard
both died. `close()` (also at interpreter exit, and on Ctrl-C through the context manager) stops it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from clawloop.harness import owned
from clawloop.harness.serve import (
    ServeError,
    free_port,
    load_lora_adapter,
    served_models,
    wait_healthy,
)

log = logging.getLogger("clawloop.vllm")
VENV_ENV = "CLAWLOOP_VLLM_VENV"
DEFAULT_VENV = Path.home() / ".cache" / "clawloop" / "vllm-venv"
SERVED_NAME = "policy"
KV_CACHE_GB_CPU = "2"  # VLLM_CPU_KVCACHE_SPACE when the environment sets none (a shared CPU host)
# VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS on CPU when the environment sets none. vLLM's default, 300 s
# for one engine step, is a GPU's budget: on 2 busy cores one step that prefills 8 prompts of
# ~940 tokens of the 1.5B took longer, and the engine declared itself dead ("RPC call to
# execute_model timed out", every request in flight HTTP 500; make run, 2026-12-07, load ~10).
STEP_TIMEOUT_S_CPU = "3600"
GUARD_POLL_S = 1.0
EAGER_FLAG = "--enforce-eager"
Eager = Literal["auto", "on", "off"]
STOP_GRACE_S = 15.0


def has_gpu() -> bool:
    """An NVIDIA driver on this host (where vLLM serves on GPU and runtime LoRA is fast)."""
    return Path("/proc/driver/nvidia/gpus").is_dir()


def vllm_python() -> str:
    """The Python whose `vllm` serves: $CLAWLOOP_VLLM_VENV, else this interpreter's own vllm (a
    GPU host's install), else the default CPU venv (refused on a GPU host: it would serve on the
    CPU). ServeError says how to get one otherwise."""
    env = os.environ.get(VENV_ENV, "").strip()
    if env:
        python = Path(env).expanduser() / "bin" / "python"
        if not python.is_file():
            raise ServeError(
                f"${VENV_ENV}={env} has no bin/python: point it at a virtual environment with "
                "vLLM installed (make vllm builds one), or unset it"
            )
        return str(python)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    python = DEFAULT_VENV / "bin" / "python"
    if python.is_file() and has_gpu():
        raise ServeError(
            f"llm.server is 'vllm' and this host has an NVIDIA GPU, but the only vLLM found is "
            f"the CPU build at {DEFAULT_VENV} (make vllm): it would serve on the CPU. pip install "
            f"vllm into clawloop's venv, or set ${VENV_ENV} to a venv with a CUDA vLLM (or to "
            "that CPU venv, to use it anyway)"
        )
    if python.is_file():
        return str(python)
    raise ServeError(
        "llm.server is 'vllm' but no vLLM is installed: run `make vllm` (scripts/setup-vllm.sh "
        f"builds the CPU venv at {DEFAULT_VENV}), pip install vllm on a GPU host, or set "
        f"${VENV_ENV} to a venv that has it; or use llm.server: local"
    )


def model_len(model_dir: str | Path, context_len: int) -> int:
    """The context vLLM serves: `context_len`, capped by the model's own position limit (vLLM
    refuses a --max-model-len above it)."""
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return context_len
    limit = cfg.get("max_position_embeddings")
    return min(context_len, int(limit)) if isinstance(limit, int) and limit > 0 else context_len


def vllm_argv(
    python: str,
    model: str,
    port: int,
    *,
    name: str = SERVED_NAME,
    context_len: int = 4096,
    lora_rank: int | None = None,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The launch line: served as `name`, hermes tool calls, logprobs of the sampled distribution,
    the model's generation_config ignored (requests pin every sampling parameter anyway), LoRA on
    when `lora_rank` is given, loopback only."""
    argv = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--served-model-name",
        name,
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--logprobs-mode",
        "processed_logprobs",
        "--generation-config",
        "vllm",
        "--max-model-len",
        str(context_len),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if lora_rank is not None:
        argv += ["--enable-lora", "--max-lora-rank", str(lora_rank)]
    return argv + list(extra)


def runs_eager(setting: Eager, gpu: bool, extra: tuple[str, ...] = ()) -> bool:
    """Whether the managed vLLM runs eager (`--enforce-eager`: no torch.compile, no CUDA graphs).
    `auto` = eager on CPU, compiled on GPU. Why CPU is eager: vLLM-CPU 0.32 cannot load its own
    torch.compile cache (`'function' object has no attribute 'finalize_loading'`), so every start
    compiles again, and the restart path starts once an iteration: engine init 30-96 s compiled
    vs 2.6-3.2 s eager on the tiny model (start-to-ready 1.37-1.59x faster eager), 483 s vs 5.9 s
    on the 1.5B; decode showed no consistent difference on the tiny model (eager/compiled
    0.57-1.64x by wall time, 0.71-1.31x per CPU second over three runs on a loaded host:
    benchmarks/vllm_eager.py; README). The failure is the CPU platform's: it compiles in
    DYNAMO_TRACE_ONCE mode (vllm/platforms/cpu.py), whose saved artifact is a plain function, and
    the loader (vllm/compilation/decorators.py) calls `finalize_loading`, which only the
    VllmSerializableFunction of VLLM_COMPILE, the GPU's mode, has (compilation/caching.py). So on
    GPU the cache loads, and the compiled graphs and CUDA graphs are what make decode fast.
    `--enforce-eager` among the extra flags counts as `on`."""
    if EAGER_FLAG in extra:
        return True
    return setting == "on" or (setting == "auto" and not gpu)


CHUNKED_FLAGS = ("--enable-chunked-prefill", "--no-enable-chunked-prefill")
BATCH_TOKENS_FLAG = "--max-num-batched-tokens"


def whole_prefill_flags(
    gpu: bool, context_len: int, extra: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """On CPU, `--no-enable-chunked-prefill --max-num-batched-tokens N` (N >= the served context):
    every prompt is prefilled in one step. Why: rollouts send a per-request `seed`
    (`harness.agent.turn_seed`), and vllm-cpu 0.32.0 dies on a seeded request whose prefill is
    split over steps. The runner it shares with the GPU rewinds a partial prefill's generator,
    `gen.set_offset(gen.get_offset() - 4)` (`GPUModelRunner._bookkeeping_sync`), which only a
    CUDA (Philox) generator has: `RuntimeError: CPU Generator does not use offset`, then
    `EngineDeadError` and HTTP 500 for every request in flight. A split happens when a prompt is
    longer than the step's token budget (2048 by default; the tiny model's first prompt is
    ~2.2k tokens) or when prompts share one step. Nothing when `extra` (llm.vllm_args) already
    says either, or on a GPU (whose generators rewind)."""
    if gpu or any(a.split("=")[0] in (*CHUNKED_FLAGS, BATCH_TOKENS_FLAG) for a in extra):
        return ()
    return (CHUNKED_FLAGS[1], BATCH_TOKENS_FLAG, str(max(context_len, 2048)))


DTYPE_FLAG = "--dtype"
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo: bf16 matmuls in hardware


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX-BF16), read from
    /proc/cpuinfo's flags (`cpuinfo`: its text, for tests). False when it cannot be read."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = {f for line in cpuinfo.splitlines() if line.startswith("flags") for f in line.split()}
    return any(f in flags for f in BF16_CPU_FLAGS)


def cpu_dtype_flags(gpu: bool, bf16: bool, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """`--dtype float32` on a CPU without bf16 in hardware, else nothing (and nothing when
    `extra`, llm.vllm_args, says --dtype). vLLM's `--dtype auto` serves the checkpoint's bf16
    (or a float32 checkpoint in bf16), which a CPU with only AVX2 emulates. On a 2-core AMD EPYC
    (AVX2, no AVX-512) the 1.5B decoded 8 streams at 5.3 tok/s in float32 against 2.0 in bf16
    (2.64x; one stream 1.2 against 1.6: float32 reads twice the bytes a token), and `make run`
    in bf16 saw most episodes run out of their 600 s (`benchmarks/vllm_eager.py --modes
    bf16,fp32`). Rollouts keep 8 requests in flight, so float32."""
    if gpu or bf16 or any(a.split("=")[0] == DTYPE_FLAG for a in extra):
        return ()
    return (DTYPE_FLAG, "float32")


def vllm_env(lora: bool, gpu: bool) -> dict[str, str]:
    """The server's environment: offline, runtime LoRA updates allowed when LoRA is on, and on
    CPU a small KV cache and an hour for one engine step, unless the environment sets them."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if lora:
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    if not gpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GB_CPU)
        env.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", STEP_TIMEOUT_S_CPU)
    return env


@dataclass
class ManagedVLLM:
    """One vLLM server this process starts, restarts on new weights, and stops."""

    log_path: Path
    context_len: int = 4096
    startup_timeout_s: float = 900.0
    extra_args: tuple[str, ...] = ()
    eager: Eager = "auto"  # runs_eager: auto = eager on CPU, compiled on GPU
    name: str = SERVED_NAME
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _pidfile: Path | None = field(default=None, repr=False)
    _served: tuple[str, int | None] | None = field(default=None, repr=False)
    _base_url: str = ""
    _adapters: dict[str, str] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    starts: int = 0  # how many times a server was started (tests read it)

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def served_folder(self) -> str | None:
        return self._served[0] if self._served else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def serve(self, model_dir: str | Path, lora_rank: int | None = None) -> str:
        """Make the server serve `model_dir` (with runtime LoRA up to `lora_rank`); returns the /v1
        base URL. Reuses a live server already serving it; otherwise (re)starts one."""
        want = (str(Path(model_dir).resolve()), lora_rank)
        with self._lock:
            if self._served == want and self.alive():
                return self._base_url
            self._stop()
            self._start(want[0], lora_rank)
            self._served = want
            return self._base_url

    def load_adapter(self, lora_name: str, adapter_dir: str | Path) -> str:
        """Load (or replace, `load_inplace`) a LoRA adapter under `lora_name`; returns what happened."""
        if not self.alive() or self._served is None or self._served[1] is None:
            raise ServeError(
                f"cannot load adapter {lora_name}: the managed vLLM is not serving with LoRA on "
                "(serve(base, lora_rank=...) first)"
            )
        what = load_lora_adapter(self._base_url, lora_name, str(adapter_dir), replace=True)
        self._adapters[lora_name] = str(adapter_dir)
        return what

    def close(self) -> None:
        with self._lock:
            self._stop()
            self._served = None

    def __enter__(self) -> ManagedVLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- process ---------------------------------------------------------------------------
    def _start(self, model_dir: str, lora_rank: int | None) -> None:
        if not (Path(model_dir) / "config.json").is_file():
            raise ServeError(f"{model_dir} has no config.json: not a model folder vLLM can serve")
        python = vllm_python()
        gpu = has_gpu()
        port = free_port()
        extra = self.extra_args
        if runs_eager(self.eager, gpu, extra) and EAGER_FLAG not in extra:
            extra = (*extra, EAGER_FLAG)
        extra = (*extra, *whole_prefill_flags(gpu, self.context_len, extra))
        extra = (*extra, *cpu_dtype_flags(gpu, cpu_has_bf16(), extra))
        argv = vllm_argv(
            python,
            model_dir,
            port,
            name=self.name,
            context_len=self.context_len,
            lora_rank=lora_rank,
            extra=extra,
        )
        me = os.getpid()
        guard = [
            sys.executable,
            "-m",
            "clawloop.harness.vllm",
            "--guard",
            str(me),
            str(owned.start_time(me)),
            "--",
            *argv,
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out: IO[bytes] = open(self.log_path, "ab")  # noqa: SIM115 - the child writes it; closed below
        out.write(f"\n== clawloop starts vLLM: {' '.join(argv)}\n".encode())
        out.flush()
        log.info("starting vLLM on %s (port %d, log %s)", model_dir, port, self.log_path)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                guard,
                env=vllm_env(lora_rank is not None, gpu),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # guard and vLLM share a process group of their own
            )
        finally:
            out.close()
        self._proc, self._pidfile = proc, owned.record_child(proc)
        _LIVE.add(self)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(base, proc, self.startup_timeout_s)
        except ServeError as exc:
            self._stop()
            raise ServeError(
                f"vLLM did not come up on {model_dir}: {exc}; its log {self.log_path} ends:\n"
                f"{_tail(self.log_path)}"
            ) from exc
        self._base_url = base + "/v1"
        self._adapters.clear()
        self.starts += 1
        log.info("vLLM up on %s in %.0fs", model_dir, time.monotonic() - started)

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc)
            with contextlib.suppress(OSError), open(self.log_path, "ab") as out:
                out.write(f"\n== clawloop stopped vLLM (guard pid {proc.pid})\n".encode())
        if self._pidfile is not None:
            self._pidfile.unlink(missing_ok=True)
            self._pidfile = None
        self._base_url = ""
        _LIVE.discard(self)

    def models(self) -> list[dict[str, Any]]:
        return served_models(self._base_url) if self._base_url else []

    def __hash__(self) -> int:
        return id(self)


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = owned.proc_stat(int(entry.name))
        if stat is not None and stat.state != "Z" and stat.pgrp == pgid:
            found.append(int(entry.name))
    return found


def stop_group(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the process group `proc` leads (the guard and vLLM's processes), SIGKILL what is
    left after `grace_s`, and return only once none of the group lives: the guard exits before
    vLLM's engine processes have finished dying, and a GPU's memory is theirs until they have
    (a train stage started at once would find it still taken)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    deadline = time.monotonic() + grace_s
    while (left := group_members(proc.pid)) and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.2)
    if left:
        log.warning(
            "vLLM process(es) %s of group %d outlived SIGKILL for %.0fs", left, proc.pid, grace_s
        )


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_bytes()[-limit:].decode(errors="replace")
    except OSError:
        return "(no log)"


_LIVE: set[ManagedVLLM] = set()


@atexit.register
def _close_all() -> None:
    for server in list(_LIVE):
        server.close()


# -- the process-wide server of a run ------------------------------------------------------------
_SHARED: dict[str, ManagedVLLM] = {}
_SHARED_LOCK = threading.Lock()


def shared_server(log_path: Path, **settings: Any) -> ManagedVLLM:
    """The one managed server of this process for the run logging to `log_path`: stages of a run
    share it (it restarts only when the weights change). A server of another run is stopped."""
    key = str(Path(log_path).resolve())
    with _SHARED_LOCK:
        for other in [k for k in _SHARED if k != key]:
            _SHARED.pop(other).close()  # one engine at a time on this host
        server = _SHARED.get(key)
        if server is None or any(getattr(server, k) != v for k, v in settings.items()):
            if server is not None:
                server.close()
            server = ManagedVLLM(Path(log_path), **settings)
            _SHARED[key] = server
        return server


def close_shared() -> None:
    with _SHARED_LOCK:
        for key in list(_SHARED):
            _SHARED.pop(key).close()


# -- the guard ------------------------------------------------------------------------------------
def guard(owner_pid: int, owner_start: str, argv: list[str]) -> int:
    """Run `argv` (vLLM) and stop this process group when the owner process is gone or vLLM exits;
    SIGTERM/SIGINT to the guard stop vLLM first, then the group."""
    child = subprocess.Popen(argv)  # same process group: a killpg of the guard reaches it
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stopping.is_set() and child.poll() is None:
        if owned.start_time(owner_pid) != owner_start:
            print(f"clawloop guard: owner {owner_pid} is gone, stopping vLLM", flush=True)
            break
        stopping.wait(GUARD_POLL_S)
    if child.poll() is None:
        child.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=STOP_GRACE_S)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(0, signal.SIGKILL)  # vLLM's engine processes, then this guard
    return child.returncode or 0


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--guard" or argv[3] != "--":
        print("usage: python -m clawloop.harness.vllm --guard OWNER_PID OWNER_START -- ARGV...")
        return 2
    return guard(int(argv[1]), argv[2], argv[4:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
