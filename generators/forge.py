"""Forge: a candidate (generator code + seed) -> a Harbor task folder, kept as a FORGED row.

The generator is built once with its seed in a sandbox and the task's digest is recorded; verify's
determinism check builds the seed again in an interpreter of its own (another hash seed, so
hash-order bugs show up) and compares. Transient sandbox faults are retried up to `retries` times
(1 + retries attempts); a generator bug (exception, timeout, wrong shape) is a failed row carrying
its error, never retried.

    row = forge_candidate(candidate_row, SandboxConfig(backend="auto"))
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clawloop.generators.candidates import candidate_row, code_sha256, parse_meta, task_id_for
from clawloop.generators.contract import ContractError
from clawloop.generators.runner import GeneratorError, build_chain, stage_generator, validated
from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
from clawloop.harness.taskfolder.folder import TaskFolderError, TaskInfo, task_files
from clawloop.harness.taskfolder.packing import pack_files, unpack_tar
from clawloop.harness.taskfolder.rows import forged_row

RETRY_BACKOFF_S = 0.5
RETRIES = 3  # the mission's rule: a failed sandbox build is retried up to three times


class ForgeConfig(BaseModel):
    """Settings of the forge stage; also the run YAML's `forge:` section, field for field."""

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(
        2, ge=1, le=256, description="tasks forged concurrently (threads; each uses one sandbox)"
    )
    retries: int = Field(
        RETRIES, ge=0, le=10, description="retries of a transient sandbox failure per task"
    )


def _forge_once(cand: dict[str, Any], sandbox: SandboxConfig, timeout: float) -> dict[str, Any]:
    """One attempt: the build in a sandbox, then the task folder on the host.
    Raises SandboxError (retryable) or GeneratorError (not)."""
    from clawloop.harness.sandbox.backend import open_sandbox

    code, seed = cand["generator_code"], int(cand["seed"])
    try:
        gen = parse_meta(code)
    except ContractError as exc:
        raise GeneratorError("contract", str(exc)) from exc
    with open_sandbox(sandbox) as sb:
        stage_generator(sb, code)
        (built, *_), log = build_chain(sb, gen, seed, timeout, ["build.json"])
    if isinstance(built, GeneratorError):
        raise built
    first = validated(built[1], gen, seed)
    digest = first.digest()
    info = TaskInfo(
        task_id=str(cand["task_id"]),
        capability=gen.meta.capability,
        domain=gen.meta.domain,
        seed=seed,
        multihop=gen.meta.multihop,
        dirtiness=gen.meta.dirtiness,
        output_format=gen.meta.output_format,
        generator_sha256=gen.sha256,
        origin=str(cand.get("origin", "")),
        title=gen.title,
        split=str(cand.get("split", "train")),
        task_sha256=digest,
    )
    # Packed straight from memory: the same bytes as writing the folder and packing it.
    blob = pack_files(task_files(first, code, info))
    return {
        "status": "ok",
        "build_log": log.strip(),
        "task_sha256": digest,
        "rebuild_sha256": "",  # verify builds the seed again, in another interpreter
        "task_tar": blob,
        "capability": gen.meta.capability,
        "domain": gen.meta.domain,
    }


def forge_candidate(
    row: dict[str, Any], sandbox: SandboxConfig, retries: int = RETRIES, timeout: float = 30.0
) -> dict[str, Any]:
    """A CANDIDATES row -> a FORGED row (status ok, or failed with error and error_kind).
    A sandbox fault is retried up to `retries` times: at most 1 + retries attempts."""
    cand = dict(row)
    if not cand.get("task_id") and cand.get("generator_code") is not None:
        cand["task_id"] = task_id_for(code_sha256(cand["generator_code"]), int(cand.get("seed", 0)))
    max_attempts = 1 + max(0, retries)
    label = (
        f"generator sha256 {str(cand.get('generator_sha256', ''))[:12]}, seed {cand.get('seed')}"
    )

    def failed(error: str, kind: str) -> dict[str, Any]:
        return forged_row(cand, error=error, error_kind=kind, attempts=attempts)

    attempts = 0
    last = ""
    while attempts < max_attempts:
        attempts += 1
        try:
            values = _forge_once(cand, sandbox, timeout)
        except SandboxError as exc:
            last = f"sandbox failed on attempt {attempts}/{max_attempts}: {exc}"
            if attempts < max_attempts:
                time.sleep(RETRY_BACKOFF_S * attempts)
            continue
        except GeneratorError as exc:
            return failed(exc.message, exc.kind)
        except TaskFolderError as exc:
            return failed(str(exc), "contract")
        except Exception as exc:  # one odd candidate must not stop a stage of thousands
            return failed(
                f"{label}: internal error while forging: {type(exc).__name__}: {exc}", "crash"
            )
        return forged_row(cand, attempts=attempts, **values)
    return failed(f"{label}: {last}", "sandbox")


def forge_to_folder(
    code: str, seed: int, out: Path, sandbox: SandboxConfig, origin: str = "user"
) -> dict[str, Any]:
    """Forge one generator + seed and write the task folder to `out` (CLI `clawloop forge`).
    Returns the FORGED row; the folder is written only when status is ok."""
    try:
        cand = candidate_row(code, seed, origin=origin)
    except ContractError as exc:
        return forged_row({"task_id": ""}, error=str(exc), error_kind="contract")
    row = forge_candidate(cand, sandbox)
    if row["status"] == "ok":
        unpack_tar(row["task_tar"], Path(out))
    return row
