"""Reading a run's record (`<root>/<run_id>/run.json`) with one clear line when it is damaged.

A run.json that is not JSON, whose top level is not an object, or that has no `config` object is
a RunRecordError naming the file and what is wrong, and what to do; the config inside it is then
validated like any config (tasks/config.py, every bad field named).
"""

from __future__ import annotations

import json
from typing import Any

from clawloop.storage import fs

RUN_FILE = "run.json"


class RunRecordError(ValueError):
    """A run.json that cannot be read as a run record."""


def run_doc(root: str, run_id: str) -> dict[str, Any] | None:
    """The parsed run.json of `run_id` (None when there is none); RunRecordError if damaged."""
    url = fs.join(root, run_id, RUN_FILE)
    if not fs.exists(url):
        return None
    return parse_run_doc(fs.read_bytes(url), url)


def parse_run_doc(data: bytes, url: str) -> dict[str, Any]:
    fix = "restore it (e.g. from a backup) or move the run folder aside"
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as exc:
        raise RunRecordError(
            f"{url} is damaged: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {fix}"
        ) from None
    except UnicodeDecodeError:
        raise RunRecordError(f"{url} is damaged: its bytes are not UTF-8 text; {fix}") from None
    if not isinstance(doc, dict):
        raise RunRecordError(
            f"{url} is damaged: its top level is a {type(doc).__name__}, not an object; {fix}"
        )
    if not isinstance(doc.get("config"), dict):
        what = (
            "no 'config'" if "config" not in doc else f"a {type(doc['config']).__name__} 'config'"
        )
        raise RunRecordError(f"{url} is damaged: it has {what}, not an object; {fix}")
    saved = doc.get("saved_at", 0.0)
    if isinstance(saved, bool) or not isinstance(saved, int | float):
        raise RunRecordError(f"{url} is damaged: 'saved_at' is not a number; {fix}")
    return doc
