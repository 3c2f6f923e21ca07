"""How a command, its environment and its output look on every sandbox backend.

Both backends share these pure helpers so an agent sees the same shell, PATH and HOME whether it
runs under Docker or bubblewrap, and so a hostile command cannot flood the host with output.
"""

from __future__ import annotations

from .base import Limits

# Most bytes of stdout (and, separately, stderr) kept per exec; the rest is drained and dropped so
# a process printing forever cannot exhaust the host's memory.
OUTPUT_CAP = 1 << 20
TRUNCATED_MARK = "\n[clawloop: output truncated at {cap} bytes]\n"

# Exit code reported for a command killed at its wall-clock limit (what `timeout -s KILL` gives).
TIMEOUT_EXIT = 137

BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    # HOME under /tmp: writable on both backends (the bubblewrap rootfs is read-only).
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}


def argv_for(cmd: list[str] | str) -> list[str]:
    """An argv list is run as is; a string is a shell command line for `bash -lc`."""
    if isinstance(cmd, str):
        return ["bash", "-lc", cmd]
    if not cmd:
        raise ValueError("empty command: pass an argv list with a program, or a shell string")
    return [str(a) for a in cmd]


def env_for(env: dict[str, str] | None) -> dict[str, str]:
    """The sandbox environment: a fixed base, with the caller's variables on top."""
    merged = dict(BASE_ENV)
    if env:
        merged.update({str(k): str(v) for k, v in env.items()})
    return merged


def wall_timeout(timeout: float | None, limits: Limits) -> float:
    """The wall-clock limit of one exec: the caller's, else the sandbox default."""
    value = limits.wall_seconds if timeout is None else float(timeout)
    if value <= 0:
        raise ValueError(f"exec timeout must be positive, got {value}")
    return value


def decode_capped(data: bytes, dropped: int, cap: int = OUTPUT_CAP) -> str:
    """Decode captured bytes; say so when some were dropped at the cap."""
    text = data.decode("utf-8", errors="replace")
    if dropped:
        text += TRUNCATED_MARK.format(cap=cap)
    return text


class CappedBuffer:
    """Keeps the first `cap` bytes written to it and counts the rest."""

    def __init__(self, cap: int = OUTPUT_CAP) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def write(self, chunk: bytes) -> None:
        room = self.cap - self.kept
        if room > 0:
            head = chunk[:room]
            self.parts.append(head)
            self.kept += len(head)
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        return decode_capped(b"".join(self.parts), self.dropped, self.cap)
