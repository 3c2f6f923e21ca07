"""Finding or starting a local Prefect server, serving the deployments on it, and a process work
pool with its workers on this machine.

`clawloop serve` uses the server PREFECT_API_URL points at when it answers; otherwise it starts
`prefect server start` on 127.0.0.1 (its own process group, stopped on exit) and points this process
at it. It then serves three deployments from this process: `nightly` (cron, the loop on a fresh run
id), `rerun-stage` (run id, iteration, stage) and `loop` (trigger a run from the UI).

`scripts/work-pool.sh start|stop|status` (`python -m clawloop.flows.server ...`) is the long-lived
form: the same server lookup (a server it starts keeps running, detached, until `stop`), the
process work pool of `prefect.yaml`, `prefect deploy --all` from this checkout, then N
`prefect worker start` processes, each running the flow runs it picks up as subprocesses. What it
started is recorded (pid + kernel start time) in a state folder, so `stop` ends exactly those.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clawloop.harness.owned import proc_stat, start_time

DEFAULT_PORT = 4200
# The checkout this module runs from: where prefect.yaml is, and where a worker's flow runs work
# (relative paths of a config, e.g. `runs` or `my-cluster.yaml`, resolve against it).
CHECKOUT = Path(__file__).resolve().parents[1]


class ServerError(RuntimeError):
    """No Prefect server could be reached or started."""


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    """True when `<api_url>/health` answers 200."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_healthy(
    api_url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if healthy(api_url):
            return
        if proc is not None and proc.poll() is not None:
            raise ServerError(
                f"`prefect server start` exited with code {proc.returncode}; see its log for why"
            )
        time.sleep(0.5)
    raise ServerError(
        f"the Prefect server at {api_url} did not become healthy within {timeout_s:.0f}s"
    )


def _prefect() -> list[str]:
    """The `prefect` command of this interpreter's environment."""
    prefect_bin = Path(sys.executable).with_name("prefect")
    return [str(prefect_bin) if prefect_bin.exists() else "prefect"]


def _start_server(port: int, log: Any) -> subprocess.Popen[bytes]:
    """`prefect server start` on 127.0.0.1:port in its own session (a group we can stop)."""
    api_url = f"http://127.0.0.1:{port}/api"
    cmd = [*_prefect(), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_UI_API_URL": api_url}
    env.pop("PREFECT_API_URL", None)
    return subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


@contextmanager
def local_server(
    port: int = DEFAULT_PORT, log_path: Path | None = None, timeout_s: float = 90.0
) -> Iterator[str]:
    """Yield a healthy API URL: PREFECT_API_URL's server if it answers, else one we start and stop."""
    configured = os.environ.get("PREFECT_API_URL")
    if configured and healthy(configured):
        yield configured
        return
    if configured:
        raise ServerError(
            f"PREFECT_API_URL={configured} does not answer: start that server, or unset the variable to use a local one"
        )
    api_url = f"http://127.0.0.1:{port}/api"
    if healthy(api_url):
        yield api_url
        return
    log = open(log_path or os.devnull, "ab")  # noqa: SIM115 - closed in finally
    proc = _start_server(port, log)
    try:
        wait_healthy(api_url, timeout_s, proc)
        yield api_url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def serve_deployments(cron: str, config_path: str | None, root: str) -> None:
    """Serve nightly + rerun-stage + loop from this process until interrupted (blocks)."""
    from prefect import serve

    from clawloop.flows.pipeline import loop_flow, nightly_flow, rerun_stage_flow
    from clawloop.flows.runs import resolve_config

    cfg = resolve_config(config_path, None, root=root)
    serve(
        nightly_flow.to_deployment(
            name="nightly", cron=cron, parameters={"config_path": config_path}, tags=["clawloop"]
        ),
        rerun_stage_flow.to_deployment(
            name="rerun-stage", parameters={"root": cfg.storage.root}, tags=["clawloop"]
        ),
        loop_flow.to_deployment(
            name="loop", parameters={"config": cfg.model_dump(mode="json")}, tags=["clawloop"]
        ),
    )


# ---------------------------------------------------------------------------------------------
# A process work pool on this machine: `scripts/work-pool.sh start|stop|status`.

STATE_FILE = "state.json"
PREFECT_FILE = CHECKOUT / "prefect.yaml"


def checkout_directory(directory: str = "") -> dict[str, str]:
    """Pull step of prefect.yaml's deployments, run by the worker's flow-run process before it
    imports the flow: the folder the run works in. `directory` is the worker's $CLAWLOOP_HOME
    (templated by Prefect at run time, "" when unset); empty means this checkout, the one the
    `clawloop` package is imported from. Prefect changes into the returned `directory`."""
    path = Path(directory).expanduser() if directory else CHECKOUT
    if not path.is_dir():
        raise FileNotFoundError(
            f"CLAWLOOP_HOME={directory!r} (the worker's environment) is not a folder: set it to "
            f"the clawloop checkout the worker runs, or unset it to use {CHECKOUT}"
        )
    return {"directory": str(path.resolve())}


def default_state_dir() -> Path:
    cache = os.environ.get("CLAWLOOP_CACHE")
    return (Path(cache) if cache else Path.home() / ".cache" / "clawloop") / "work-pool"


def pool_name(prefect_file: Path = PREFECT_FILE) -> str:
    """The one work pool prefect.yaml's deployments name."""
    import yaml

    doc = yaml.safe_load(prefect_file.read_text())
    names = {(d.get("work_pool") or {}).get("name") for d in doc.get("deployments") or []}
    if len(names) != 1 or None in names:
        raise ServerError(f"{prefect_file}: every deployment must name the same work_pool.name")
    return str(names.pop())


def _alive(entry: dict[str, Any]) -> bool:
    """True while the process we recorded (same pid, same kernel start time) runs (not a zombie)."""
    stat = proc_stat(int(entry["pid"]))
    return stat is not None and stat.state != "Z" and str(stat.start_ticks) == entry["start"]


def _record(pid: int, **extra: Any) -> dict[str, Any]:
    return {"pid": pid, "start": start_time(pid) or "", **extra}


def _descendants(pid: int) -> list[dict[str, Any]]:
    """Every live process below `pid` (flow-run processes start their own sessions)."""
    parents: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (stat := proc_stat(int(d.name))) is not None:
            parents.setdefault(stat.ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(_record(child))
            todo.append(child)
    return out


def _signal(entry: dict[str, Any], sig: int) -> None:
    pid = int(entry["pid"])
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _terminate(entries: list[dict[str, Any]], grace_s: float = 20.0) -> list[int]:
    """SIGTERM the live ones (their process group when they lead one), SIGKILL what is left
    after `grace_s`. Returns the pids that were running."""
    live = [e for e in entries if _alive(e)]
    for e in live:
        _signal(e, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(e) for e in live):
        time.sleep(0.2)
    for e in live:
        if _alive(e):
            _signal(e, signal.SIGKILL)
    return [int(e["pid"]) for e in live]


def read_state(state_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((state_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}


def _write_state(state_dir: Path, state: dict[str, Any]) -> None:
    tmp = state_dir / f"{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(state_dir / STATE_FILE)


def _api(api_url: str, method: str, path: str, body: Any = None) -> Any:
    import httpx

    r = httpx.request(method, f"{api_url.rstrip('/')}{path}", json=body, timeout=30)
    if r.status_code == 404:
        return None
    r.raise_for_status()
    return r.json() if r.content else {}


def _tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _run_prefect(args: list[str], env: dict[str, str], what: str) -> None:
    done = subprocess.run(
        [*_prefect(), *args],
        cwd=CHECKOUT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        output = (done.stdout + done.stderr)[-3000:]
        raise ServerError(f"{what} failed (`prefect {' '.join(args)}`):\n{output}")


def _find_api(port: int, state_dir: Path, state: dict[str, Any]) -> str:
    """PREFECT_API_URL's server, else 127.0.0.1:port's, else a server started here (detached,
    recorded in the state so `stop` ends it)."""
    configured = os.environ.get("PREFECT_API_URL")
    if configured:
        if not healthy(configured):
            raise ServerError(
                f"PREFECT_API_URL={configured} does not answer: start that server, or unset the "
                "variable to use (or start) a local one"
            )
        return configured
    api_url = f"http://127.0.0.1:{port}/api"
    if healthy(api_url):
        return api_url
    log_path = state_dir / "server.log"
    with open(log_path, "ab") as log:
        proc = _start_server(port, log)
    state["server"] = _record(proc.pid, log=str(log_path), port=port)
    _write_state(state_dir, state)
    try:
        wait_healthy(api_url, 180, proc)
    except ServerError as exc:
        raise ServerError(f"{exc}\n{_tail(log_path)}") from exc
    return api_url


def _config_parameters(config_path: str | None) -> dict[str, dict[str, Any]]:
    """Deployment parameters for a run config: the nightly reads the file on each run, reruns look
    runs up under its storage root, the loop starts from it. None: prefect.yaml's own."""
    if config_path is None:
        return {}
    from clawloop.flows.runs import resolve_config
    from clawloop.tasks.config import config_file

    path = str(config_file(config_path).resolve())  # a file, or a shipped profile's name
    cfg = resolve_config(path, None)  # a bad config stops here, with the field and the fix
    return {
        "nightly": {"config_path": path},
        "rerun-stage": {"root": cfg.storage.root},
        "loop": {"config": cfg.model_dump(mode="json")},
    }


class AlreadyRunning(ServerError):
    """`start` on a state folder whose pool is still up: refused, and that pool left running."""


def refuse_if_running(state_dir: Path) -> None:
    old = read_state(state_dir)
    running = [w for w in old.get("workers", []) if _alive(w)]
    if running or (old.get("server") and _alive(old["server"])):
        raise AlreadyRunning(
            f"a work pool started from {state_dir} is still running (workers "
            f"{[w['pid'] for w in running]}): `scripts/work-pool.sh status` shows it; stop it "
            "first (scripts/work-pool.sh stop), or use another --state folder"
        )


def start_pool(
    workers: int = 2,
    config_path: str | None = None,
    port: int = DEFAULT_PORT,
    state_dir: Path | None = None,
    timeout_s: float = 180.0,
) -> dict[str, Any]:
    """Server (found or started), pool, deployments, `workers` process workers; returns the state."""
    if workers < 1:
        raise ServerError("--workers must be at least 1")
    state_dir = (state_dir or default_state_dir()).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    refuse_if_running(state_dir)
    home = os.environ.get("CLAWLOOP_HOME") or str(CHECKOUT)
    checkout_directory(home)  # a wrong CLAWLOOP_HOME fails here, not in every flow run
    parameters = _config_parameters(config_path)
    pool = pool_name()
    t0 = time.monotonic()
    state: dict[str, Any] = {"pool": pool, "server": None, "workers": [], "timings_s": {}}
    _write_state(state_dir, state)
    api_url = _find_api(port, state_dir, state)
    state["api_url"] = api_url
    state["timings_s"]["server"] = round(time.monotonic() - t0, 1)
    # prefect.yaml's pull step names $CLAWLOOP_HOME: set when deploying, its value is stored in
    # the deployment; unset, each worker's own is read at run time. Workers get it explicitly.
    env = {
        **os.environ,
        "PREFECT_API_URL": api_url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PYTHONUNBUFFERED": "1",
    }
    worker_env = {**env, "CLAWLOOP_HOME": home}

    t = time.monotonic()
    found = _api(api_url, "GET", f"/work_pools/{pool}")
    if found is None:
        _run_prefect(["work-pool", "create", pool, "--type", "process"], env, "creating the pool")
    elif found["type"] != "process":
        raise ServerError(f"work pool {pool} exists with type {found['type']}, not process")
    state["timings_s"]["pool"] = round(time.monotonic() - t, 1)

    t = time.monotonic()
    _run_prefect(
        ["--no-prompt", "deploy", "--all", "--prefect-file", str(PREFECT_FILE)], env, "deploying"
    )
    deployments = _api(api_url, "POST", "/deployments/filter", {}) or []
    ours = {d["name"]: d for d in deployments if d.get("work_pool_name") == pool}
    for name, params in parameters.items():
        if name not in ours:
            raise ServerError(f"`prefect deploy --all` registered no deployment {name!r}")
        merged = {**(ours[name].get("parameters") or {}), **params}
        _api(api_url, "PATCH", f"/deployments/{ours[name]['id']}", {"parameters": merged})
    flows = {f["id"]: f["name"] for f in _api(api_url, "POST", "/flows/filter", {}) or []}
    state["deployments"] = sorted(f"{flows.get(d['flow_id'])}/{d['name']}" for d in ours.values())
    state["config_path"] = parameters.get("nightly", {}).get("config_path")
    state["timings_s"]["deploy"] = round(time.monotonic() - t, 1)

    t = time.monotonic()
    for i in range(1, workers + 1):
        name = f"clawloop-worker-{i}"
        log_path = state_dir / f"{name}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [*_prefect(), "worker", "start", "--pool", pool, "--name", name],
                cwd=home,
                env=worker_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        state["workers"].append(_record(proc.pid, name=name, log=str(log_path)))
        _write_state(state_dir, state)
    wanted = {w["name"]: w for w in state["workers"]}
    deadline = time.monotonic() + timeout_s
    online: set[str] = set()
    while online != set(wanted):
        for w in wanted.values():
            if not _alive(w):
                raise ServerError(f"worker {w['name']} exited:\n{_tail(Path(w['log']))}")
        if time.monotonic() > deadline:
            raise ServerError(
                f"workers {sorted(set(wanted) - online)} did not come online in pool {pool} "
                f"within {timeout_s:.0f}s; see {state_dir}"
            )
        time.sleep(1)
        listed = _api(api_url, "POST", f"/work_pools/{pool}/workers/filter", {}) or []
        online = {w["name"] for w in listed if w["name"] in wanted and w["status"] == "ONLINE"}
    state["timings_s"]["workers"] = round(time.monotonic() - t, 1)
    _write_state(state_dir, state)
    return state


def stop_pool(state_dir: Path | None = None) -> list[str]:
    """End the workers (and the flow runs they started) and a server `start` started; returns
    what was running."""
    state_dir = (state_dir or default_state_dir()).resolve()
    state = read_state(state_dir)
    stopped = []
    for w in state.get("workers", []):
        below = _descendants(int(w["pid"])) if _alive(w) else []
        if _terminate([w]):
            stopped.append(f"worker {w['name']} (pid {w['pid']})")
        # The flow runs a worker started lead their own sessions: end any that outlived it.
        stopped += [f"flow-run process {pid}" for pid in _terminate(below)]
    if state.get("server") and _terminate([state["server"]]):
        stopped.append(f"Prefect server (pid {state['server']['pid']})")
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    return stopped


def pool_status(state_dir: Path | None = None) -> list[str]:
    state_dir = (state_dir or default_state_dir()).resolve()
    state = read_state(state_dir)
    if not state:
        return [f"no work pool started from {state_dir}"]
    api_url = state.get("api_url", "")
    up = bool(api_url) and healthy(api_url)
    lines = [f"server {api_url}: {'answers' if up else 'does not answer'}"]
    listed = {}
    if up:
        found = _api(api_url, "POST", f"/work_pools/{state['pool']}/workers/filter", {}) or []
        listed = {w["name"]: w["status"] for w in found}
    for w in state.get("workers", []):
        alive = "running" if _alive(w) else "gone"
        lines.append(
            f"{w['name']} pid {w['pid']}: {alive}, {listed.get(w['name'], '?')} in pool "
            f"{state['pool']} (log {w['log']})"
        )
    return lines


def _print_started(state: dict[str, Any], state_dir: Path) -> None:
    api = state["api_url"]
    ui = api[: -len("/api")] if api.endswith("/api") else api
    t = state["timings_s"]
    print(f"Prefect server   {api}  (UI {ui}){'' if state['server'] else '  (already running)'}")
    print(f"work pool        {state['pool']} (process)")
    print(f"deployments      {', '.join(state['deployments'])}")
    print(
        f"config           {state.get('config_path') or 'prefect.yaml parameters (embedded defaults)'}"
    )
    for w in state["workers"]:
        print(f"worker           {w['name']} pid {w['pid']}  log {w['log']}")
    print(
        f"ready in         server {t['server']}s, pool {t['pool']}s, deploy {t['deploy']}s, "
        f"workers {t['workers']}s"
    )
    print(
        f"\nexport PREFECT_API_URL={api}\n"
        "prefect deployment run rerun-stage/rerun-stage -p run_id=RUN -p iteration=1 -p stage=verify\n"
        f"scripts/work-pool.sh stop{'' if state_dir == default_state_dir() else f' --state {state_dir}'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/work-pool.sh",
        description="A Prefect process work pool on this machine for prefect.yaml's deployments.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("start", "find or start a server, create the pool, deploy, start the workers"),
        ("stop", "stop the workers and the server `start` started"),
        ("status", "what `start` started, and whether it is online"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--state", type=Path, help=f"state folder (default {default_state_dir()})")
        if name == "start":
            p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
            p.add_argument(
                "--config",
                help="run config for the deployments (nightly reads it, reruns use its storage.root)",
            )
            p.add_argument(
                "--port", type=int, default=DEFAULT_PORT, help="port of a local server started here"
            )
    args = parser.parse_args(argv)
    state_dir = (args.state or default_state_dir()).resolve()
    try:
        if args.command == "start":
            try:
                state = start_pool(args.workers, args.config, args.port, state_dir)
            except AlreadyRunning:
                raise
            except BaseException:
                stop_pool(state_dir)  # nothing half-started stays behind
                raise
            _print_started(state, state_dir)
        elif args.command == "stop":
            stopped = stop_pool(state_dir)
            print("\n".join(f"stopped {s}" for s in stopped) or "nothing was running")
        else:
            print("\n".join(pool_status(state_dir)))
    except Exception as exc:
        from clawloop.tasks.config import ConfigError

        if not isinstance(exc, ServerError | ConfigError | OSError):
            raise
        print(f"work-pool: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
