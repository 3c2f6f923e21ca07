"""Direct file access of the bubblewrap sandbox (write_files, read_file, reset_dirs): what verify
and forge use instead of tar uploads and downloads between execs."""

from __future__ import annotations

import shutil

import pytest

from clawloop.harness.sandbox.base import SandboxConfig, SandboxError
from clawloop.harness.sandbox.bwrap import BwrapSandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")


@pytest.fixture
def sb():
    box = BwrapSandbox(SandboxConfig(backend="bwrap"))
    box.start()
    yield box
    box.stop()


def test_written_files_are_seen_inside_with_their_modes(sb) -> None:
    sb.write_files(
        "/workspace",
        {"a/b.txt": (b"hello\n", False), "run.sh": (b"#!/bin/sh\necho ran\n", True), "e": None},
    )
    res = sb.exec(["sh", "-c", "cat a/b.txt; ./run.sh; test -d e && echo dir; stat -c %a a/b.txt"])
    assert res.ok, res.stderr
    assert res.stdout.split() == ["hello", "ran", "dir", "644"]


@pytest.mark.parametrize("rel", ["../escape.txt", "/etc/x", "a/../../x"])
def test_paths_outside_the_folder_are_refused(sb, rel: str) -> None:
    with pytest.raises(ValueError):
        sb.write_files("/workspace", {rel: (b"x", False)})


def test_a_planted_symlink_is_neither_followed_on_read_nor_written_through(sb) -> None:
    res = sb.exec(["sh", "-c", "ln -s /etc/passwd /workspace/out.txt; ln -s /etc /workspace/d"])
    assert res.ok, res.stderr
    assert sb.read_file("/workspace/out.txt", 1 << 20) is None
    with pytest.raises(OSError):
        sb.write_files("/workspace", {"out.txt": (b"x", False)})
    with pytest.raises(PermissionError):  # a folder that resolves outside the sandbox
        sb.write_files("/workspace", {"d/x": (b"x", False)})


def test_read_file_caps_and_misses(sb) -> None:
    assert sb.exec(["sh", "-c", "head -c 5000 /dev/zero > /tmp/big; echo hi > /tmp/small"]).ok
    assert sb.read_file("/tmp/small", 100) == b"hi\n"
    assert sb.read_file("/tmp/missing", 100) is None
    with pytest.raises(OverflowError):
        sb.read_file("/tmp/big", 1000)


def test_reset_empties_what_an_exec_planted_even_a_symlinked_folder(sb) -> None:
    planted = (
        "mkdir -p /tests/sub && echo x > /tests/sub/f && chmod 000 /tests/sub; "
        "echo '{\"reward\": 1.0}' > /logs/verifier/reward.json; mkdir -p /workspace/fake"
    )
    assert sb.exec(["sh", "-c", planted]).ok
    # Run as root, /logs is the host root's: no exec can swap /logs/verifier for a link; the
    # host's reset undoes such a link all the same (a sandbox run as our own uid can make one).
    swap = "rm -rf /logs/verifier && ln -s /workspace/fake /logs/verifier"
    assert sb.exec(["sh", "-c", swap]).ok == (sb.uid is None)
    if sb.uid is not None:
        (sb.fs / "logs/verifier/reward.json").unlink(missing_ok=True)
        (sb.fs / "logs/verifier").rmdir()
        (sb.fs / "logs/verifier").symlink_to("/workspace/fake")
    assert sb.reset_dirs(["/tests", "/logs/verifier"]) == ""
    res = sb.exec(["sh", "-c", "ls -A /tests /logs/verifier; test -L /logs/verifier || echo real"])
    assert res.ok, res.stderr
    assert res.stdout.split() == ["/logs/verifier:", "/tests:", "real"]
    assert sb.exec(["test", "-d", "/workspace/fake"]).ok  # the link's target was not touched


def test_direct_access_is_refused_while_an_exec_runs(sb) -> None:
    import threading
    import time

    t = threading.Thread(target=sb.exec, args=(["sleep", "1"],))
    t.start()
    try:
        deadline = time.monotonic() + 5
        while not sb._running and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(SandboxError):
            sb.write_files("/workspace", {"x": (b"x", False)})
        assert sb.reset_dirs(["/tests"]) != ""
    finally:
        t.join()


def test_read_tree_copies_plain_trees_and_nothing_else(sb) -> None:
    res = sb.exec(
        [
            "sh",
            "-c",
            "mkdir -p output/deep empty && printf 1 > output/a && printf 22 > output/deep/b",
        ]
    )
    assert res.ok, res.stderr
    tree = sb.read_tree("/workspace", 1 << 20, 100)
    assert tree == {
        "output": None,
        "empty": None,
        "output/deep": None,
        "output/a": (b"1", False),
        "output/deep/b": (b"22", False),
    }
    assert sb.read_tree("/workspace", 2, 100) is None  # over the bytes cap
    assert sb.read_tree("/workspace", 1 << 20, 4) is None  # over the entries cap
    for plant in ("ln -s /etc/passwd output/link", "mkfifo output/fifo"):
        res = sb.exec(["sh", "-c", f"rm -f output/link output/fifo; {plant}"])
        assert res.ok, res.stderr
        assert sb.read_tree("/workspace", 1 << 20, 100) is None, plant
