"""Publish what a stage wrote as Prefect artifacts: a table (files, rows, sha256) and a markdown note.

Keys are stable per (run, iteration, stage), so the UI's Artifacts page shows each stage's latest
result with its history. The content is rendered by flows/report.py (plain, testable).
"""

from __future__ import annotations

import re
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE


def artifact_key(run_id: str, iteration: int, stage: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    raw = f"{run_id}-iter-{iteration}-{stage}".lower()
    return re.sub(r"[^a-z0-9-]+", "-", raw).strip("-")


@task(name="publish-stage-artifact", cache_policy=NO_CACHE, persist_result=False)
def publish_stage(
    key: str, stage: str, iteration: int, table: list[dict[str, Any]], markdown: str
) -> str:
    """Create the table + markdown artifacts of one stage; returns the table's key."""
    create_table_artifact(
        key=key, table=table, description=f"{stage}, iteration {iteration}: files written"
    )
    create_markdown_artifact(
        key=f"{key}-summary",
        markdown=markdown,
        description=f"{stage}, iteration {iteration}: summary",
    )
    return key
