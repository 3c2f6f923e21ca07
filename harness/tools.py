"""The agent's tools, run inside the task's sandbox: shell, read/write/edit a file, list, finish.

`TOOLS` is the OpenAI "tools" list offered to the model. `call_tool(sb, name, arguments)` runs one
call and returns a `ToolResult` whose `output` is what the model sees next. Every failure — unknown
tool, bad JSON arguments, a path outside the workspace, a command that times out — is an
observation with `error=True`, never an exception: the model should read the error and recover.

Paths are read with /workspace semantics: relative paths resolve against /workspace, absolute
paths must stay under /workspace or /tmp. (The sandbox isolates anyway; this keeps the agent where
the verifier looks.)
"""

from __future__ import annotations

import base64
import json
import posixpath
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawloop.harness.sandbox.base import WORKSPACE, Sandbox

MAX_OUTPUT_CHARS = 12_000  # what one observation may hold; more is cut in the middle
SHELL_TIMEOUT_S = 60.0  # default per shell command; the model may ask for up to MAX_SHELL_TIMEOUT_S
MAX_SHELL_TIMEOUT_S = 300.0
ALLOWED_ROOTS = (WORKSPACE, "/tmp")
# Files larger than this go through `upload` instead of a base64 argv (ARG_MAX is ~128 KiB/arg).
INLINE_WRITE_BYTES = 48_000


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOLS: list[dict[str, Any]] = [
    _fn(
        "run_shell",
        "Run a bash command in /workspace and return its exit code, stdout and stderr. "
        "Long output is truncated in the middle.",
        {
            "command": {"type": "string", "description": "bash command line"},
            "timeout": {"type": "number", "description": f"seconds (default {SHELL_TIMEOUT_S:g})"},
        },
        ["command"],
    ),
    _fn(
        "read_file",
        "Read a text file. Paths are relative to /workspace unless absolute.",
        {"path": {"type": "string"}},
        ["path"],
    ),
    _fn(
        "write_file",
        "Create or overwrite a file with the given content (parent folders are created).",
        {"path": {"type": "string"}, "content": {"type": "string"}},
        ["path", "content"],
    ),
    _fn(
        "edit_file",
        "Replace one occurrence of old_string with new_string in a file; old_string must occur "
        "exactly once.",
        {
            "path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
        },
        ["path", "old_string", "new_string"],
    ),
    _fn(
        "list_dir",
        "List a directory (default /workspace).",
        {"path": {"type": "string"}},
        [],
    ),
    _fn(
        "finish",
        "Call when the task is done (outputs written). Ends the episode.",
        {"summary": {"type": "string", "description": "one line on what was done"}},
        [],
    ),
]
TOOL_NAMES = frozenset(t["function"]["name"] for t in TOOLS)


@dataclass
class ToolResult:
    output: str  # the observation shown to the model
    error: bool = False
    finished: bool = False
    duration_s: float = 0.0


def truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Keep head and tail; the model sees a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters truncated ...]\n{text[-half:]}"


class ToolError(ValueError):
    """A tool call the agent got wrong (bad path, missing argument); becomes an observation."""


def resolve_path(path: str) -> str:
    """Resolve against /workspace; refuse anything outside the allowed roots."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
    full = posixpath.normpath(posixpath.join(WORKSPACE, path.strip()))
    if not any(full == r or full.startswith(r + "/") for r in ALLOWED_ROOTS):
        raise ToolError(f"path {path!r} is outside /workspace; use a path under /workspace")
    return full


def parse_arguments(raw: str | dict | None) -> dict[str, Any]:
    """Tool-call arguments arrive as a JSON string (OpenAI) or already a dict (text fallback)."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        # strict=False: models often put raw newlines inside JSON strings; accept them.
        value = json.loads(raw, strict=False)
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(value, dict):
        raise ToolError("arguments must be a JSON object")
    return value


def _require_str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"missing string argument {key!r}")
    return value


def _format_exec(exit_code: int, stdout: str, stderr: str, timed_out: bool, timeout: float) -> str:
    parts = [f"exit_code: {exit_code}"]
    if timed_out:
        parts.append(f"[command timed out after {timeout:g}s and was killed]")
    if stdout:
        parts.append(f"stdout:\n{stdout}")
    if stderr:
        parts.append(f"stderr:\n{stderr}")
    return truncate("\n".join(parts))


def _run_shell(
    sb: Sandbox, args: dict[str, Any], max_timeout: float = MAX_SHELL_TIMEOUT_S
) -> ToolResult:
    command = _require_str(args, "command")
    timeout = args.get("timeout", SHELL_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ToolError("timeout must be a positive number of seconds")
    timeout = max(1.0, min(float(timeout), MAX_SHELL_TIMEOUT_S, max_timeout))
    res = sb.exec(command, timeout=timeout)
    out = _format_exec(res.exit_code, res.stdout, res.stderr, res.timed_out, timeout)
    return ToolResult(out, error=not res.ok)


def _read(sb: Sandbox, path: str) -> str:
    res = sb.exec(["cat", "--", path], timeout=30)
    if not res.ok:
        raise ToolError(f"cannot read {path}: {res.stderr.strip() or 'exit ' + str(res.exit_code)}")
    return res.stdout


def _write(sb: Sandbox, path: str, content: str) -> None:
    data = content.encode()
    parent = posixpath.dirname(path)
    if len(data) <= INLINE_WRITE_BYTES:
        b64 = base64.b64encode(data).decode()
        script = (
            f"mkdir -p {shlex.quote(parent)} && printf %s {b64} | base64 -d > {shlex.quote(path)}"
        )
        res = sb.exec(["bash", "-c", script], timeout=30)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "content"
            local.write_bytes(data)
            staged = f"/tmp/.clawloop-write-{posixpath.basename(path)}"
            sb.upload(local, staged)
            script = (
                f"mkdir -p {shlex.quote(parent)} && mv -f {shlex.quote(staged)} {shlex.quote(path)}"
            )
            res = sb.exec(["bash", "-c", script], timeout=30)
    if not res.ok:
        raise ToolError(
            f"cannot write {path}: {res.stderr.strip() or 'exit ' + str(res.exit_code)}"
        )


def _read_file(sb: Sandbox, args: dict[str, Any]) -> ToolResult:
    path = resolve_path(_require_str(args, "path"))
    return ToolResult(truncate(_read(sb, path)))


def _write_file(sb: Sandbox, args: dict[str, Any]) -> ToolResult:
    path = resolve_path(_require_str(args, "path"))
    content = _require_str(args, "content")
    _write(sb, path, content)
    return ToolResult(f"wrote {len(content.encode())} bytes to {path}")


def _edit_file(sb: Sandbox, args: dict[str, Any]) -> ToolResult:
    path = resolve_path(_require_str(args, "path"))
    old, new = _require_str(args, "old_string"), _require_str(args, "new_string")
    if not old:
        raise ToolError("old_string must not be empty")
    text = _read(sb, path)
    count = text.count(old)
    if count != 1:
        raise ToolError(f"old_string occurs {count} times in {path}; it must occur exactly once")
    _write(sb, path, text.replace(old, new, 1))
    return ToolResult(f"edited {path}")


def _list_dir(sb: Sandbox, args: dict[str, Any]) -> ToolResult:
    path = resolve_path(args.get("path") or WORKSPACE)
    res = sb.exec(["ls", "-la", "--", path], timeout=30)
    if not res.ok:
        raise ToolError(f"cannot list {path}: {res.stderr.strip()}")
    return ToolResult(truncate(res.stdout))


def _finish(sb: Sandbox, args: dict[str, Any]) -> ToolResult:
    summary = args.get("summary") or ""
    return ToolResult(f"finished: {summary}".strip(), finished=True)


_HANDLERS = {
    "run_shell": _run_shell,
    "read_file": _read_file,
    "write_file": _write_file,
    "edit_file": _edit_file,
    "list_dir": _list_dir,
    "finish": _finish,
}


def call_tool(
    sb: Sandbox, name: str, arguments: str | dict | None, max_timeout: float | None = None
) -> ToolResult:
    """Run one tool call in `sb`; any mistake of the agent comes back as an error observation.

    `max_timeout` caps a shell command's timeout (the episode's remaining wall time)."""
    start = time.monotonic()
    handler = _HANDLERS.get(name)
    try:
        if handler is None:
            raise ToolError(f"unknown tool {name!r}; available: {', '.join(sorted(TOOL_NAMES))}")
        args = parse_arguments(arguments)
        if name == "run_shell" and max_timeout is not None:
            result = _run_shell(sb, args, max_timeout)
        else:
            result = handler(sb, args)
    except ToolError as exc:
        result = ToolResult(f"error: {exc}", error=True)
    result.duration_s = time.monotonic() - start
    return result
