"""The generator-writing endpoint the LLM-written and SkillSynth synthesis sources share:
`synthesize.writer.endpoint`, else the policy endpoint as it serves this iteration's policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clawloop.harness.llm import LLMEndpoint
from clawloop.tasks.policy import endpoint_policy
from clawloop.tasks.stage import StageContext

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig


def writer_slice(cfg: RunConfig) -> dict[str, Any]:
    """What a written generator depends on of who writes it (a source's config slice)."""
    w = cfg.synthesize.writer.endpoint
    return w.model_dump(mode="json") if w else cfg.llm.model_dump(mode="json")


def writer_endpoint(ctx: StageContext) -> tuple[LLMEndpoint | None, str]:
    """(endpoint, where): `synthesize.writer.endpoint`, else the policy endpoint as it serves this iteration's
    policy (`llm.reload` applies), else None (the built-in library)."""
    cfg = ctx.config
    w = cfg.synthesize.writer.endpoint
    if w is not None:
        endpoint = LLMEndpoint(w.base_url, w.model, w.api_key_env, request_timeout_s=600.0)
        return endpoint, f"synthesize.writer.endpoint {w.model} at {w.base_url}"
    if not cfg.llm.base_url:
        return (
            None,
            "no generator-writer endpoint: llm.base_url is null and synthesize.writer.endpoint unset",
        )
    policy, note = endpoint_policy(ctx, ctx.iteration - 1)
    ep = policy.endpoint()
    endpoint = LLMEndpoint(ep.base_url, ep.model, ep.api_key_env, request_timeout_s=600.0)
    return endpoint, f"the policy ({note})"
