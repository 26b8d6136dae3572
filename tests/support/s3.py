"""A real S3 API on loopback for the object-storage tests: moto's server, authentication on.

:func:`s3_store` starts moto's S3 server on 127.0.0.1 (a free port) in a process of its own
(:mod:`support.moto_process`: in the test process it would deadlock with ``deltalake``, which
holds the GIL while it waits for the server), creates the bucket ``lake`` and an IAM user with
an access key, then turns request authentication on, so wrong credentials are refused the way
AWS refuses them. The server records the commit requests (``PUT …/_delta_log/N.json`` and
whether they carried ``If-None-Match: *``) to show the writers commit with conditional puts.

One server serves the whole test session: the embedded engine's storage clients keep the
endpoint and credentials they first read, for the life of the process. Each test works under
its own prefix (:meth:`S3Store.prefix`).

:class:`S3Workspace` is the e2e :class:`~support.e2e.Workspace` with targets and staging in the
bucket and the ``storage:`` section that reaches it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx

from support.e2e import Workspace
from support.faults import SharingServer

BUCKET = "lake"
REGION = "us-east-1"
_SETUP_KEY = "moto-setup"  # any key works while authentication is off


@dataclass(frozen=True)
class S3Store:
    endpoint: str
    access_key_id: str
    secret_access_key: str
    requests_file: Path
    bucket: str = BUCKET
    region: str = REGION

    def settings(self, **changes: Any) -> dict[str, Any]:
        """The ``storage:`` entry of the bucket (``changes`` override, e.g. a wrong secret)."""
        return {
            "endpoint": self.endpoint,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "allow_http": True,
            **changes,
        }

    def storage(self, **changes: Any) -> dict[str, Any]:
        return {f"s3://{self.bucket}/": self.settings(**changes)}

    def options(self) -> dict[str, str]:
        """``deltalake`` storage options for reading what the tests wrote (independent of sharesync)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_ALLOW_HTTP": "true",
        }

    def prefix(self) -> str:
        """A fresh ``s3://lake/<random>`` for one test."""
        return f"s3://{self.bucket}/t-{uuid.uuid4().hex[:12]}"

    def requests(self, prefix: str) -> list[tuple[str, str, str | None]]:
        """``(method, path, If-None-Match)`` of every request under an ``s3://`` prefix, in order."""
        path = "/" + prefix.removeprefix("s3://") + "/"
        lines = self.requests_file.read_text(encoding="utf-8").splitlines() if self.requests_file.exists() else []
        return [(m, p, condition) for m, p, condition in map(json.loads, lines) if p.startswith(path)]

    def commits(self, prefix: str) -> list[tuple[str, str | None]]:
        """``(path, If-None-Match)`` of the Delta commit requests (``PUT …/_delta_log/N.json``)."""
        return [
            (p, condition)
            for m, p, condition in self.requests(prefix)
            if m == "PUT" and "/_delta_log/" in p and p.endswith(".json")
        ]

    def client(self, service: str) -> Any:
        """A boto3 client of this server with its root credentials (not sharesync's code)."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )

    def upload(self, directory: Path, prefix: str) -> None:
        """Copy a table directory a writer made on disk to ``prefix``, files not there yet only
        (Delta files are written once), through boto3 (not sharesync's code)."""
        client = self.client("s3")
        key_prefix = prefix.removeprefix(f"s3://{self.bucket}/").rstrip("/")
        present = set(self.keys(prefix))
        files = [p for p in directory.rglob("*") if p.is_file() and not p.name.endswith(".crc")]
        for path in sorted(files, key=lambda p: ("_delta_log" in p.parts, p)):  # data before the commit
            key = f"{key_prefix}/{path.relative_to(directory).as_posix()}"
            if key not in present:
                client.upload_file(str(path), self.bucket, key)

    def keys(self, prefix: str) -> list[str]:
        """The object keys under an ``s3://`` prefix, through boto3 (not sharesync's code)."""
        client = self.client("s3")
        key_prefix = prefix.removeprefix(f"s3://{self.bucket}/").rstrip("/") + "/"
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=key_prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


@contextmanager
def s3_store(*, authenticate: bool = True) -> Iterator[S3Store]:
    """A running moto S3 server with the bucket and a user whose key the tests use.

    ``authenticate=False`` leaves authentication off: moto 5's S3 cannot check a presigned
    (query-string) signature with it on (it answers 500, ``KeyError: 'HTTP_AUTHORIZATION'``), and
    directory-based access reads files through URLs presigned with the provider's credentials."""
    import boto3

    with TemporaryDirectory(prefix="moto-") as scratch:
        requests = Path(scratch) / "requests.jsonl"
        script = Path(__file__).with_name("moto_process.py")
        process = subprocess.Popen(
            [sys.executable, str(script), str(requests)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None and process.stdin is not None
        try:
            endpoint = f"http://127.0.0.1:{int(process.stdout.readline())}"
            setup = {"endpoint_url": endpoint, "region_name": REGION, "aws_access_key_id": _SETUP_KEY}
            boto3.client("s3", aws_secret_access_key=_SETUP_KEY, **setup).create_bucket(Bucket=BUCKET)
            iam = boto3.client("iam", aws_secret_access_key=_SETUP_KEY, **setup)
            iam.create_user(UserName="sharesync")
            policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
            iam.put_user_policy(UserName="sharesync", PolicyName="everything", PolicyDocument=json.dumps(policy))
            key = iam.create_access_key(UserName="sharesync")["AccessKey"]
            if authenticate:
                httpx.post(f"{endpoint}/moto-api/reset-auth", content=b"0").raise_for_status()  # authentication on
            yield S3Store(endpoint, key["AccessKeyId"], key["SecretAccessKey"], requests)
        finally:
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
            process.stdout.close()


class S3Workspace(Workspace):
    """A workspace whose targets and staging directory are in the moto bucket."""

    def __init__(self, root: Any, server: SharingServer, store: S3Store, spark: dict[str, Any] | None = None) -> None:
        super().__init__(root, server, spark)
        self.store = store
        self.base = store.prefix()

    def target(self, table: str) -> str:
        return f"{self.base}/warehouse/{table}"

    def spec(self, table: str, mode: str = "merge", **extra: Any) -> dict[str, Any]:
        return {**super().spec(table, mode), "target": self.target(table), **extra}

    def raw_config(self, *tables: dict[str, Any], **top: Any) -> dict[str, Any]:
        located = {"staging_dir": f"{self.base}/staging", "storage": self.store.storage()}
        return super().raw_config(*tables, **{**located, **top})
