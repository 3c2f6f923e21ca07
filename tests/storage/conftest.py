"""A real S3 API server for storage tests: moto in server mode on a free local port.

`moto_endpoint` (session) starts `ThreadedMotoServer` once and stops it at the end. `s3` (per test)
gives a fresh bucket, dummy AWS credentials in this test's environment only (nothing from
~/.aws is read), `storage.options` pointing clawloop's storage at the server, and a boto3 client
to look at the bucket behind clawloop's back. Everything is undone after the test.
"""

from __future__ import annotations

import logging
import socket
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from clawloop.storage import fs

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "clawloop-test",
    "AWS_SECRET_ACCESS_KEY": "clawloop-test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
}
UNSET_ENV = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def clear_s3fs_instances() -> None:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@dataclass
class S3:
    endpoint: str
    bucket: str
    client: Any  # boto3 S3 client on the same server

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/runs"

    @property
    def options(self) -> dict[str, str]:
        return {"endpoint_url": self.endpoint}

    def objects(self, prefix: str = "") -> list[str]:
        """Every object key in the bucket under `prefix`, read with boto3 (not through fsspec)."""
        out: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def set_auth(self, free_requests: float) -> None:
        """moto's IAM check: after `free_requests` requests every request needs credentials that
        moto issued (inf: off, moto's default)."""
        req = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=str(free_requests).encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(req, timeout=10).read()


def dummy_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in DUMMY_ENV.items():
        monkeypatch.setenv(name, value)
    for name in UNSET_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[S3]:
    import boto3

    dummy_aws_env(monkeypatch)
    monkeypatch.setenv("CLAWLOOP_CACHE", str(tmp_path / "cache"))
    clear_s3fs_instances()
    bucket = f"clawloop-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    fs.configure("s3://", {"endpoint_url": moto_endpoint})
    try:
        yield S3(moto_endpoint, bucket, client)
    finally:
        fs.configure("s3://", None)
        clear_s3fs_instances()
