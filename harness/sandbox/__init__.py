"""Sandboxes: `backend` picks and opens one (docker or bubblewrap), `base` is the interface.

from clawloop.harness.sandbox.backend import open_sandbox
from clawloop.harness.sandbox.base import SandboxConfig
with open_sandbox(SandboxConfig(backend="auto")) as sb:
    sb.exec("python3 -c 'print(1)'")
"""
