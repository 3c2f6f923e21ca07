"""Harbor task folders not made by clawloop: import them, and make them runnable in our sandboxes.

A foreign Harbor task is `task.toml` + `instruction.md` + `environment/Dockerfile` (or
`[environment] docker_image`) + `tests/test.sh` (often a pytest run) + optional `solution/solve.sh`;
its verifier writes `/logs/verifier/reward.json` (numbers) or `reward.txt` (one number). It has no
`[metadata.clawloop]` table. The folder is stored as it is (exporting it gives it back unchanged);
what running it needs is worked out when it runs (`prepare_task`):

- **base-only**: a Dockerfile `FROM` the sandbox base image (clawloop-base) that only copies files
  of its build context into /workspace (COPY/ADD of local files, WORKDIR /workspace, and
  instructions that do not change the filesystem: ARG, LABEL, CMD, ENTRYPOINT, EXPOSE, ...). No
  build: a run folder gets those files as environment/workspace/, which every backend uploads.
- **needs a build**: anything else (another base image, RUN, ENV, a WORKDIR such as /app, ...).
  Docker only: the Dockerfile is built offline (network "none", nothing is pulled: every FROM
  image must already be in the engine), then a thin layer on top replaces the task's working
  folder with a link to /workspace (the sandbox's writable, size-capped tmpfs: the rest of the
  system stays read-only) and clears ENTRYPOINT. The working folder's files in the image are
  copied out once and uploaded into /workspace at each sandbox start, so `/app/...` paths of the
  instruction and the tests still work. Bubblewrap refuses such a task, saying why.

Images are tagged `clawloop-task-<digest>:image` / `:sandbox` by the environment folder's content
and reused while it is unchanged. Not supported (refused with the reason): docker-compose
environments, Docker host pools for tasks that need a build, and WORKDIRs the sandbox mounts over
(/tmp, /tests, /solution, /logs).
"""

from __future__ import annotations

import glob
import hashlib
import io
import json
import posixpath
import shlex
import shutil
import tarfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clawloop.harness.sandbox.base import WORKSPACE, SandboxConfig, SandboxError
from clawloop.harness.taskfolder.folder import (
    TaskFolderError,
    _load_task_toml,
    read_harbor_task_info,
    read_instruction,
    strict_harbor_task_info,
)
from clawloop.harness.taskfolder.packing import check_folder_size, pack_dir
from clawloop.harness.taskfolder.rows import forged_row, import_folder

BASE_IMAGE_NAMES = ("clawloop-base", "clawloop-base:latest")
# Instructions that leave the filesystem and the process environment alone: a base-only
# Dockerfile may hold them (CMD/ENTRYPOINT are ignored: sandboxes run their own sleeper).
INERT = {"ARG", "LABEL", "CMD", "ENTRYPOINT", "EXPOSE", "MAINTAINER", "HEALTHCHECK", "STOPSIGNAL"}
HIDDEN_DIRS = ("/tmp", "/tests", "/solution", "/logs")  # sandbox mounts: image content unseen
MAX_SEED_BYTES = 512 * 1024 * 1024
LAYER_VERSION = "1"  # bump when SANDBOX_LAYER changes, so cached images are rebuilt
# The thin layer over a built task image. {workdir} is the task's working folder (shell-quoted).
SANDBOX_LAYER = """FROM {image}
USER root
RUN for tool in sh bash timeout sleep; do command -v "$tool" >/dev/null || \\
      {{ echo "clawloop: the image has no $tool, which sandboxes need" >&2; exit 1; }}; done \\
 && mkdir -p /workspace /tests /solution /logs/verifier {link}
ENTRYPOINT []
CMD ["sleep", "infinity"]
{user}"""
LINK_SH = "&& rm -rf {w} && mkdir -p {parent} && ln -s /workspace {w}"


class ForeignTaskError(TaskFolderError):
    """A foreign Harbor task that cannot run here (refused by the backend, an image missing, a
    failed offline build); the message says why and what to do."""


@dataclass(frozen=True)
class EnvPlan:
    """What a task's environment needs, read from task.toml and environment/Dockerfile."""

    base: str  # the image it starts from ("" when unknown)
    workdir: str  # the task's working folder when known from the files ("" otherwise)
    copies: tuple[tuple[str, str], ...] = ()  # base-only: (glob under environment/, dest path)
    needs_build: str = (
        ""  # "" when the base image suffices, else the first reason a build is needed
    )
    prebuilt: str = ""  # [environment] docker_image, when no Dockerfile is given
    froms: tuple[str, ...] = ()  # every FROM image (stage aliases left out)


@dataclass(frozen=True)
class Prepared:
    """A task folder ready for `harness.taskenv.open_task` and the sandbox config to open it with."""

    task_dir: Path
    sandbox: SandboxConfig
    image: str = ""  # the built sandbox image ("" when none was needed)
    note: str = ""


def is_clawloop_folder(task_dir: Path) -> bool:
    """Whether task.toml has a [metadata.clawloop] table (a folder clawloop wrote)."""
    try:
        doc = _load_task_toml(Path(task_dir, "task.toml"))
    except TaskFolderError:
        return False  # not ours; the import of a foreign folder says what is wrong
    meta = doc.get("metadata")
    return isinstance(meta, dict) and isinstance(meta.get("clawloop"), dict)


def _task_toml(task_dir: Path) -> dict[str, Any]:
    return _load_task_toml(Path(task_dir, "task.toml"))


def _environment_table(task_dir: Path) -> dict[str, Any]:
    env = _task_toml(task_dir).get("environment")
    return env if isinstance(env, dict) else {}


# ---- the Dockerfile ---------------------------------------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[int, str, str]]:
    """(line number, KEYWORD, arguments) per instruction: comments and blank lines dropped,
    backslash continuations joined (comment lines inside a continuation skipped, as Docker does)."""
    out: list[tuple[int, str, str]] = []
    pending: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = n
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        joined = " ".join(p for p in pending if p)
        pending = []
        keyword, _, rest = joined.partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
    if pending:
        joined = " ".join(p for p in pending if p)
        keyword, _, rest = joined.partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
    return out


def _substitute(value: str, args: dict[str, str]) -> str:
    for key, val in args.items():
        value = value.replace("${" + key + "}", val).replace("$" + key, val)
    return value


def _words(rest: str) -> list[str]:
    """COPY/ADD arguments: the JSON form or shell-like words."""
    if rest.startswith("["):
        try:
            doc = json.loads(rest)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, list) and all(isinstance(w, str) for w in doc):
            return doc
    try:
        return shlex.split(rest)
    except ValueError:
        return rest.split()


def _resolve(path: str, workdir: str) -> str:
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(workdir, path))


def _under_workspace(path: str) -> bool:
    return path == WORKSPACE or path.startswith(WORKSPACE + "/")


def plan_environment(task_dir: Path, base_images: tuple[str, ...] = BASE_IMAGE_NAMES) -> EnvPlan:
    """Read what the task's environment needs (TaskFolderError for what no backend can run)."""
    task_dir = Path(task_dir)
    env = _environment_table(task_dir)
    env_dir = task_dir / "environment"
    override = str(env.get("workdir") or "")
    for compose in ("docker-compose.yaml", "docker-compose.yml"):
        if (env_dir / compose).is_file():
            raise TaskFolderError(
                f"{task_dir}: environment/{compose} (a multi-container environment) is not "
                "supported; clawloop runs tasks from one environment/Dockerfile"
            )
    dockerfile = env_dir / "Dockerfile"
    if not dockerfile.is_file():
        image = str(env.get("docker_image") or "")
        if not image:
            raise TaskFolderError(
                f"{task_dir}: no environment/Dockerfile and no [environment] docker_image; "
                "not a Harbor task folder"
            )
        why = "" if image in base_images else f"[environment] docker_image {image} is its image"
        if override and not _under_workspace(override) and not why:
            why = f"[environment] workdir {override} is not under /workspace"
        return EnvPlan(image, override, needs_build=why, prebuilt=image, froms=(image,))
    return _plan_dockerfile(dockerfile.read_text(errors="replace"), override, base_images)


def _plan_dockerfile(text: str, override: str, base_images: tuple[str, ...]) -> EnvPlan:
    args: dict[str, str] = {}
    froms: list[str] = []
    aliases: set[str] = set()
    base, workdir, why = "", "", ""
    copies: list[tuple[str, str]] = []

    def need(reason: str) -> None:
        nonlocal why
        why = why or reason

    for n, keyword, rest in dockerfile_instructions(text):
        if keyword == "ARG" and not froms:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip().strip('"')
            continue
        if keyword == "FROM":
            words = [w for w in _substitute(rest, args).split() if not w.startswith("--")]
            image = words[0] if words else ""
            if len(words) >= 3 and words[1].lower() == "as":
                aliases.add(words[2])
            if froms:
                need(f"line {n}: a second FROM (a multi-stage build)")
            if image not in aliases:
                froms.append(image)
            base = image
            workdir = WORKSPACE if image in base_images else ""
            if image not in base_images:
                need(f"line {n}: FROM {image} is not the sandbox base image ({base_images[-1]})")
            continue
        if keyword == "WORKDIR":
            workdir = _resolve(rest.strip().strip('"'), workdir or "/")
            if not _under_workspace(workdir):
                need(f"line {n}: WORKDIR {workdir} is not under /workspace")
            continue
        if keyword in ("COPY", "ADD"):
            words = _words(rest)
            flags = [w for w in words if w.startswith("--")]
            paths = [w for w in words if not w.startswith("--")]
            if any(f.startswith("--from") for f in flags):
                need(f"line {n}: {keyword} --from (a multi-stage build)")
            if len(paths) < 2:
                need(f"line {n}: {keyword} without a source and a destination")
                continue
            *srcs, dest = paths
            for src in srcs:
                if "://" not in src and posixpath.normpath(src.lstrip("/")).startswith(".."):
                    raise TaskFolderError(
                        f"environment/Dockerfile line {n}: {keyword} {src} reaches outside the "
                        "build context (environment/); copy only files under environment/"
                    )
            target = _resolve(dest, workdir or "/")
            if keyword == "ADD" and any(
                "://" in s or s.endswith((".tar", ".gz", ".tgz", ".xz", ".bz2")) for s in srcs
            ):
                need(f"line {n}: ADD of a URL or an archive")
            if not _under_workspace(target):
                need(f"line {n}: {keyword} into {target}, outside /workspace")
            dir_dest = dest.endswith("/") or len(srcs) > 1
            copies += [(s, target + ("/" if dir_dest else "")) for s in srcs]
            continue
        if keyword == "USER":
            if rest.strip() not in ("root", "0", "0:0", "root:root"):
                need(f"line {n}: USER {rest.strip()}")
            continue
        if keyword not in INERT:
            need(f"line {n}: {keyword} changes the image")
    if not froms:
        raise TaskFolderError("environment/Dockerfile has no FROM instruction")
    if override:
        workdir = override
        if not _under_workspace(override):
            need(f"[environment] workdir {override} is not under /workspace")
    return EnvPlan(base, workdir, tuple(copies), why, froms=tuple(froms))


# ---- import -------------------------------------------------------------------------------------


def check_folder(task_dir: Path) -> EnvPlan:
    """The environment plan of a foreign Harbor task folder, once the files Harbor needs are there
    (TaskFolderError naming what is missing or unsupported)."""
    task_dir = Path(task_dir)
    for need in ("task.toml", "instruction.md", "tests/test.sh"):
        if not (task_dir / need).is_file():
            raise TaskFolderError(f"{task_dir}: missing {need}; not a Harbor task folder")
    check_folder_size(task_dir)
    strict_harbor_task_info(task_dir)
    read_instruction(task_dir)
    name = _task_toml(task_dir).get("task", {})
    if isinstance(name, dict) and "name" in name and not str(name["name"]).strip("/ "):
        raise TaskFolderError(f"{task_dir}/task.toml: [task] name is empty")
    plan = plan_environment(task_dir)
    for bad in task_dir.rglob("*"):
        if bad.is_symlink():
            raise TaskFolderError(f"{bad}: symlinks are not allowed in a task folder")
    return plan


def describe(plan: EnvPlan) -> str:
    if not plan.needs_build:
        return f"runs on the sandbox base image ({plan.base}): any backend"
    return f"needs a docker build ({plan.needs_build}): Docker backend only"


def import_foreign(task_dir: Path) -> dict[str, Any]:
    """A FORGED row for a foreign Harbor task folder: the folder's tar as it is, its id from
    [task] name (org stripped), capability from [metadata] category ("external" without one)."""
    task_dir = Path(task_dir)
    plan = check_folder(task_dir)
    header = read_harbor_task_info(task_dir)
    tar = pack_dir(task_dir)
    digest = hashlib.sha256(tar).hexdigest()
    return forged_row(
        {"task_id": header.task_id, "capability": header.capability or "external"},
        status="ok",
        build_log=f"imported foreign Harbor task from {task_dir}; {describe(plan)}",
        task_sha256=digest,
        rebuild_sha256=digest,
        task_tar=tar,
        domain="harbor",
        split=header.split,
    )


def import_task_folder(task_dir: Path) -> dict[str, Any]:
    """A FORGED row for any Harbor task folder: clawloop's own (folder.import_folder) or foreign."""
    if is_clawloop_folder(Path(task_dir)):
        return import_folder(Path(task_dir))
    return import_foreign(Path(task_dir))


def task_folders(path: Path) -> list[Path]:
    """The task folders a path names: itself when it holds task.toml, else its subfolders that do
    (a Harbor dataset folder), sorted; TaskFolderError when it holds neither."""
    path = Path(path)
    if (path / "task.toml").is_file():
        return [path]
    found = (
        sorted(p for p in path.iterdir() if p.is_dir() and (p / "task.toml").is_file())
        if path.is_dir()
        else []
    )
    if not found:
        raise TaskFolderError(
            f"{path}: missing task.toml; not a Harbor task folder (nor a dataset folder of them)"
        )
    return found


def folder_sha256(task_dir: Path) -> str:
    return hashlib.sha256(pack_dir(Path(task_dir))).hexdigest()


# ---- running ------------------------------------------------------------------------------------


def prepare_task(task_dir: Path, sandbox: SandboxConfig, work: Path) -> Prepared:
    """The folder and sandbox config an episode of `task_dir` runs with. A clawloop folder runs as
    it is; a foreign one gets a run folder under `work` (its workspace files laid out in
    environment/workspace/), and on Docker, when it needs a build, the image it runs in.
    ForeignTaskError when it cannot run on this backend (the message says why)."""
    task_dir = Path(task_dir)
    if is_clawloop_folder(task_dir):
        return Prepared(task_dir, sandbox)
    plan = check_folder(task_dir)
    name = read_harbor_task_info(task_dir).task_id
    run_dir = Path(work) / f"{name}-{folder_sha256(task_dir)[:12]}"
    if not plan.needs_build:
        _run_folder(task_dir, run_dir)
        _lay_out_copies(task_dir / "environment", plan.copies, run_dir / "environment/workspace")
        return Prepared(run_dir, sandbox, note=describe(plan))
    backend = _backend(sandbox)
    if backend != "docker":
        raise ForeignTaskError(
            f"task {name} ({task_dir}) cannot run on bubblewrap: its environment {describe(plan)}. "
            "Bubblewrap runs only tasks whose Dockerfile is FROM the sandbox base image "
            f"({BASE_IMAGE_NAMES[-1]}) and copies files into /workspace; use the Docker backend "
            "(--backend docker, sandbox.backend: docker)"
        )
    if sandbox.docker_hosts:
        raise ForeignTaskError(
            f"task {name}: its environment needs a docker build ({plan.needs_build}), and tasks "
            "built from their own Dockerfile run on the default engine only, not on a "
            "sandbox.docker_hosts pool; leave docker_hosts unset for this run"
        )
    image, workdir = build_task_image(task_dir, plan, name)
    _run_folder(task_dir, run_dir, linked=workdir if not _under_workspace(workdir) else "")
    seed = run_dir / "environment/workspace"
    if _under_workspace(workdir):
        seed = seed / posixpath.relpath(workdir, WORKSPACE)
    if workdir not in ("", "/"):
        copy_out(f"{image.rpartition(':')[0]}:image", workdir, seed)
    return Prepared(run_dir, replace(sandbox, backend="docker", image=image), image, describe(plan))


def _backend(sandbox: SandboxConfig) -> str:
    from clawloop.harness.sandbox.backend import resolve_backend

    if sandbox.docker_hosts:
        return "docker"
    try:
        return resolve_backend(sandbox.backend, sandbox.image)
    except (SandboxError, ValueError) as exc:
        raise ForeignTaskError(str(exc)) from exc


def _run_folder(task_dir: Path, run_dir: Path, linked: str = "") -> None:
    """task.toml, instruction.md, tests/ and solution/ of the task in `run_dir` (replaced), with
    an empty environment/workspace/; `linked`: the working folder that is /workspace there."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    for name in ("task.toml", "instruction.md"):
        shutil.copy2(task_dir / name, run_dir / name)
    for sub in ("tests", "solution"):
        if (task_dir / sub).is_dir():
            shutil.copytree(task_dir / sub, run_dir / sub)
    (run_dir / "environment/workspace").mkdir(parents=True)
    if linked:
        with (run_dir / "instruction.md").open("a") as f:
            f.write(
                f"\n\n(In this sandbox {linked} is /workspace: the same folder, your working "
                "directory.)\n"
            )


def _lay_out_copies(context: Path, copies: tuple[tuple[str, str], ...], workspace: Path) -> None:
    """What the Dockerfile's COPY/ADD lines put into /workspace, as files under `workspace`."""
    root = context.resolve()
    for pattern, dest in copies:
        matches = sorted(glob.glob(str(context / pattern.lstrip("/"))))
        if not matches:
            raise TaskFolderError(f"{context}: COPY source {pattern} matches no file")
        rel_dest = posixpath.relpath(dest.rstrip("/") or WORKSPACE, WORKSPACE)
        target = (workspace / rel_dest).resolve() if rel_dest != "." else workspace.resolve()
        if workspace.resolve() not in (target, *target.parents):
            raise TaskFolderError(f"COPY destination {dest} escapes /workspace")
        for match in map(Path, matches):
            src = match.resolve()
            if root not in (src, *src.parents):
                raise TaskFolderError(f"COPY source {pattern} is outside the build context")
            if src.is_dir():
                shutil.copytree(src, target, dirs_exist_ok=True)
            elif dest.endswith("/") or target.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / src.name)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)


# ---- Docker: build and copy out -----------------------------------------------------------------


@dataclass
class _BuildLog:
    lines: list[str] = field(default_factory=list)
    error: str = ""

    def tail(self, n: int = 15) -> str:
        return "".join(self.lines[-n:]).strip()


def _docker():
    from clawloop.harness.sandbox.docker_engine import client

    return client(timeout=600)


def _image_exists(cli: Any, ref: str) -> bool:
    import docker.errors

    try:
        cli.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def _build(cli: Any, log: _BuildLog, **kwargs: Any) -> None:
    from clawloop.harness.sandbox.docker_engine import engine_errors

    try:
        for chunk in cli.api.build(
            network_mode="none", rm=True, forcerm=True, pull=False, decode=True, **kwargs
        ):
            if "stream" in chunk:
                log.lines.append(str(chunk["stream"]))
            if "error" in chunk:
                log.error = str(chunk.get("errorDetail", {}).get("message") or chunk["error"])
    except engine_errors() as exc:
        log.error = log.error or f"{type(exc).__name__}: {exc}"


def build_task_image(task_dir: Path, plan: EnvPlan, name: str) -> tuple[str, str]:
    """Build the task's image offline and the sandbox layer over it (both reused while the
    environment folder is unchanged); returns (sandbox image, the task's working folder)."""
    from clawloop.harness.sandbox.pool import default_host

    cli = _docker()
    host = default_host()
    try:
        for image in plan.froms:
            if image != "scratch" and not _image_exists(cli, image):
                raise ForeignTaskError(
                    f"task {name}: its environment needs image {image}, which the Docker engine at "
                    f"{host} does not have. Builds here are offline (nothing is pulled): load the "
                    "image into the engine (docker pull/load on a machine with network, then "
                    f"docker save | docker load), or base the Dockerfile on an image it has, e.g. "
                    f"{BASE_IMAGE_NAMES[-1]}"
                )
        env_dir = Path(task_dir, "environment")
        digest = hashlib.sha256(
            pack_dir(env_dir) + json.dumps([plan.prebuilt, plan.workdir, LAYER_VERSION]).encode()
        ).hexdigest()[:16]
        repo = f"clawloop-task-{digest}"
        labels = {"clawloop.task": name}
        if not _image_exists(cli, f"{repo}:image"):
            if plan.prebuilt:
                cli.images.get(plan.prebuilt).tag(repo, "image")
            else:
                log = _BuildLog()
                _build(cli, log, path=str(env_dir), dockerfile="Dockerfile", tag=f"{repo}:image",
                       labels=labels)  # fmt: skip
                if log.error:
                    raise ForeignTaskError(
                        f"task {name}: docker build of environment/Dockerfile failed on {host}: "
                        f"{log.error}. Builds run offline, without network: a RUN that downloads "
                        "(apt-get, pip install, curl, ...) cannot work here; put what it fetches "
                        f"into the base image or the build context.\n{log.tail()}"
                    )
        config = cli.images.get(f"{repo}:image").attrs.get("Config") or {}
        workdir = posixpath.normpath(plan.workdir or config.get("WorkingDir") or "/")
        if any(workdir == d or workdir.startswith(d + "/") for d in HIDDEN_DIRS):
            raise ForeignTaskError(
                f"task {name}: its working folder {workdir} is where the sandbox mounts its own "
                f"empty folders ({', '.join(HIDDEN_DIRS)}); use another WORKDIR, e.g. /app"
            )
        if not _image_exists(cli, f"{repo}:sandbox"):
            link = ""
            if workdir != "/" and not _under_workspace(workdir):
                q = shlex.quote(workdir)
                link = LINK_SH.format(w=q, parent=shlex.quote(posixpath.dirname(workdir)))
            user = str(config.get("User") or "")
            layer = SANDBOX_LAYER.format(
                image=f"{repo}:image", link=link, user=f"USER {user}\n" if user else ""
            )
            log = _BuildLog()
            _build(cli, log, fileobj=io.BytesIO(layer.encode()), tag=f"{repo}:sandbox",
                   labels=labels)  # fmt: skip
            if log.error:
                raise ForeignTaskError(
                    f"task {name}: the sandbox layer over its image failed to build on {host}: "
                    f"{log.error}\n{log.tail()}"
                )
        return f"{repo}:sandbox", workdir
    finally:
        cli.close()


def copy_out(image: str, path: str, dest: Path) -> int:
    """Copy `path` of `image` (a folder) into `dest`, through a container that is created but never
    started; returns the bytes copied (0 when the image has no such folder)."""
    import docker.errors

    from clawloop.harness.sandbox.docker_engine import LABEL, owner_labels

    cli = _docker()
    container = cli.containers.create(
        image, command=["true"], entrypoint=[], network_disabled=True,
        labels={LABEL: "1", **owner_labels()},
    )  # fmt: skip
    try:
        try:
            chunks, _ = container.get_archive(path)
        except docker.errors.NotFound:
            dest.mkdir(parents=True, exist_ok=True)
            return 0
        buf = io.BytesIO()
        for chunk in chunks:
            buf.write(chunk)
            if buf.tell() > MAX_SEED_BYTES:
                raise ForeignTaskError(
                    f"{image}: {path} holds over {MAX_SEED_BYTES >> 20} MiB; too big to upload into "
                    "each sandbox"
                )
    finally:
        container.remove(force=True)
        cli.close()
    buf.seek(0)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=buf) as tar:
        members = []
        for m in tar.getmembers():
            rel = m.name.partition("/")[2]  # the archive's top member is the folder itself
            if not rel:
                continue
            m.name = rel
            members.append(m)
        tar.extractall(dest, members=members, filter="tar")
    return buf.getbuffer().nbytes
