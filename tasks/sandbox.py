"""The sandbox a stage's items run in, checked once before any item starts: an engine that does
not answer or an image it lacks fails the stage with what to do, instead of N failed items."""

from __future__ import annotations

from clawloop.harness.sandbox.backend import check_backend
from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
from clawloop.tasks.stage import StageContext, StageError


def sandbox_for(ctx: StageContext) -> SandboxConfig:
    """The run's sandbox config, once its backend is known to work (else StageError: what to do)."""
    box = ctx.config.sandbox.to_sandbox_config()
    try:
        check_backend(box)
    except SandboxError as exc:
        raise StageError(
            f"{ctx.stage} cannot start sandboxes: {exc}; then resume: {ctx.resume}"
        ) from exc
    return box
