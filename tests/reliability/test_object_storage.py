"""Targets in object storage (moto's S3 server): bad settings stop with one clear line, and the
target checks of the local disk hold there too.

Wrong credentials, a missing bucket and an unreachable endpoint are config mistakes: ``sharesync
sync`` exits 2 with one ``error:`` line naming the target and what to fix, before anything is
downloaded or written (a probe write finds them). A target prefix that holds other objects, an
object where the target's prefix should be, or someone else's Delta table fail the table
(exit 1) and stay untouched (but for empty ``directory/`` markers pyarrow leaves); the files of a first write that crashed before its commit do not
stop the next attempt. Credentials that are valid but may not write are "not writable".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.cli_runner import CliResult
from support.reliability import Site
from support.s3 import S3Store
from support.verify import assert_merge_target_matches, source_version

# A case returns the raw config (targets under ``prefix``) and the prefix that must stay empty.
Setup = Callable[[Site, S3Store, str], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    id: str
    setup: Setup
    code: int
    message: str  # a fragment of the one error line, after the target's URI


def _config(site: Site, store: S3Store, target: str, **storage: Any) -> dict[str, Any]:
    prefix = f"s3://{target.removeprefix('s3://').split('/')[0]}/"
    return site.raw_config(
        site.spec("t", target=target),
        staging_dir=f"{target}-staging",
        storage={prefix: store.settings(**storage)},
    )


def _wrong_secret(site: Site, store: S3Store, prefix: str) -> dict[str, Any]:
    return _config(site, store, f"{prefix}/t", secret_access_key="not-the-secret-4242")


def _unknown_key(site: Site, store: S3Store, prefix: str) -> dict[str, Any]:
    return _config(site, store, f"{prefix}/t", access_key_id="AKIAUNKNOWNUNKNOWN42")


def _missing_bucket(site: Site, store: S3Store, prefix: str) -> dict[str, Any]:
    return _config(site, store, f"s3://no-such-bucket/{prefix.rsplit('/', 1)[-1]}/t")


def _unreachable(site: Site, store: S3Store, prefix: str) -> dict[str, Any]:
    return _config(site, store, f"{prefix}/t", endpoint="http://127.0.0.1:1")


BAD_SETTINGS = [
    Case("wrong-secret", _wrong_secret, 2, "the store rejects the credentials; check the credentials in storage["),
    Case("unknown-access-key", _unknown_key, 2, "the store rejects the credentials"),
    Case("missing-bucket", _missing_bucket, 2, "the bucket or container 'no-such-bucket' does not exist"),
    Case("unreachable-endpoint", _unreachable, 2, "cannot reach the store"),
]


@pytest.mark.parametrize("case", BAD_SETTINGS, ids=lambda c: c.id)
def test_bad_storage_settings_stop_with_one_clear_line_and_write_nothing(
    site: Site, s3_server: S3Store, cli: Callable[..., CliResult], case: Case
) -> None:
    site.table("t", rows=10)
    prefix = s3_server.prefix()
    raw = case.setup(site, s3_server, prefix)
    target = raw["tables"][0]["target"]

    result = cli("--config", str(site.write_raw(raw)), "sync")

    assert result.code == case.code, (result.code, result.out, result.err)
    errors = [line for line in (result.out + result.err).splitlines() if line.startswith("error:")]
    assert len(errors) == 1, f"expected one error line, got:\n{result.out}{result.err}"
    assert f"target '{target}'" in errors[0] and case.message in errors[0], errors[0]
    assert "Traceback" not in result.out + result.err
    assert s3_server.keys(prefix) == []  # nothing written: no probe, no target, no staged file
    assert site.staged_files() == 0
    store = site.store()
    assert store.list_checkpoints() == []
    runs = store.runs_for(site.name("t"))
    assert [r.status.value for r in runs] == ["failed"] and case.message in (runs[0].error or ""), runs


def _objects(store: S3Store, prefix: str) -> list[str]:
    """The keys under ``prefix`` but the empty ``directory/`` markers pyarrow keeps for emptied
    parents (as a local disk keeps empty directories): the probe's and the staged batch's."""
    return [key for key in store.keys(prefix) if not key.endswith("/")]


def _put(store: S3Store, key: str, body: bytes) -> None:
    store.client("s3").put_object(Bucket=store.bucket, Key=key, Body=body)


def _key(uri: str) -> str:
    return uri.removeprefix("s3://lake/")


def _other_objects(store: S3Store, target: str) -> None:
    _put(store, f"{_key(target)}/report.csv", b"id,total\n1,2\n")


def _object_at_target(store: S3Store, target: str) -> None:
    _put(store, _key(target), b"a file where the target's prefix should be\n")


def _user_delta_table(store: S3Store, target: str) -> None:
    table = pa.table({"id": ["a", "b"], "note": ["mine", "keep me"]})
    write_deltalake(target, table, storage_options=store.options())


FOREIGN_TARGETS = [
    ("other-objects", _other_objects, "exists and is not a Delta table (no _delta_log)"),
    ("object-at-target", _object_at_target, "is an object (a file), not a directory"),
    ("someone-elses-delta-table", _user_delta_table, "was not written by sharesync"),
]


@pytest.mark.parametrize(("make", "message"), [c[1:] for c in FOREIGN_TARGETS], ids=[c[0] for c in FOREIGN_TARGETS])
def test_a_foreign_target_in_s3_fails_the_table_and_stays_untouched(
    site: Site, s3_server: S3Store, cli: Callable[..., CliResult], make: Callable[[S3Store, str], None], message: str
) -> None:
    site.table("t", rows=10)
    prefix = s3_server.prefix()
    target = f"{prefix}/t"
    make(s3_server, target)
    before = _objects(s3_server, prefix)

    result = cli("--config", str(site.write_raw(_config(site, s3_server, target))), "sync")

    assert result.code == 1, (result.code, result.out, result.err)
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.err
    assert _objects(s3_server, prefix) == before
    assert site.checkpoint("t") is None


def test_the_files_of_a_crashed_first_write_in_s3_do_not_stop_the_next_attempt(
    site: Site, s3_server: S3Store, cli: Callable[..., CliResult]
) -> None:
    site.table("t", rows=10)
    target = f"{s3_server.prefix()}/t"
    leftover = "part-00000-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b-c000.snappy.parquet"
    _put(s3_server, f"{_key(target)}/{leftover}", b"half a parquet file")

    result = cli("--config", str(site.write_raw(_config(site, s3_server, target))), "sync")

    assert result.code == 0, result.err
    t = site.path("t")
    assert_merge_target_matches(t, target, ["id"], source_version(t), storage_options=s3_server.options())
    assert DeltaTable(target, storage_options=s3_server.options()).version() == 0


def test_credentials_that_may_not_write_make_the_target_not_writable(
    site: Site, s3_server: S3Store, cli: Callable[..., CliResult]
) -> None:
    iam = s3_server.client("iam")
    name = f"reader-{s3_server.prefix().rsplit('-', 1)[-1]}"
    iam.create_user(UserName=name)
    read_only = {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"}
    iam.put_user_policy(
        UserName=name, PolicyName="read", PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [read_only]})
    )
    key = iam.create_access_key(UserName=name)["AccessKey"]
    site.table("t", rows=10)
    prefix = s3_server.prefix()
    raw = _config(
        site, s3_server, f"{prefix}/t", access_key_id=key["AccessKeyId"], secret_access_key=key["SecretAccessKey"]
    )

    result = cli("--config", str(site.write_raw(raw)), "sync")

    assert result.code == 1, (result.code, result.out, result.err)
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "is not writable" in errors[0], result.err
    assert s3_server.keys(prefix) == []
