"""The run lease on an object store: conditional PUTs (If-None-Match: *, If-Match: ETag) against a
real S3 API (moto), so of two writers exactly one takes or refreshes the lease."""

from __future__ import annotations

import json
import os

import pytest

from clawloop.flows import lease
from clawloop.storage import fs


def test_compare_and_swap_on_s3(s3):
    url = f"{s3.root}/r/cell.json"
    v1 = fs.create_exclusive(url, b"one")
    assert v1 is not None and fs.create_exclusive(url, b"two") is None  # If-None-Match: *
    v2 = fs.replace_if(url, b"three", v1)
    assert v2 is not None and fs.replace_if(url, b"four", v1) is None  # If-Match: a stale ETag
    assert fs.read_versioned(url) == (b"three", v2)
    assert s3.get("runs/r/cell.json") == b"three"


def test_a_second_lease_on_s3_is_refused_until_released(s3):
    first = lease.Lease(s3.root, "r", "clawloop run")
    first.acquire()
    try:
        with pytest.raises(lease.LeaseHeld, match=f"pid {os.getpid()}"):
            lease.Lease(s3.root, "r").acquire()
        first.heartbeat()
        assert first.lost is None
    finally:
        first.release()
    assert json.loads(s3.get("runs/r/lease.json"))["released"] is True
    taker = lease.Lease(s3.root, "r")
    taker.acquire()  # released: free again, taken without a warning
    taker.release()
