"""Table roots of each cloud, and the URL each file of a directory-read table is downloaded from."""

from __future__ import annotations

import re

import pytest
from pydantic import SecretStr

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.storage import StoreKind, StoreSettings
from sharesync.sync.core.store_urls import bearer_for, object_url, table_root


@pytest.mark.parametrize(
    ("location", "kind", "container", "prefix", "account", "canonical"),
    [
        ("s3://b/p/t", StoreKind.S3, "b", "p/t", None, "s3://b/p/t"),
        ("abfss://c@acct.dfs.core.windows.net/p/t", StoreKind.AZURE, "c", "p/t", "acct", None),
        ("wasbs://c@acct.blob.core.windows.net/p/t/", StoreKind.AZURE, "c", "p/t", "acct", None),
        ("gs://b/t", StoreKind.GCS, "b", "t", None, "gs://b/t"),
    ],
)
def test_a_table_root_names_its_cloud_container_prefix_and_account(
    location: str, kind: StoreKind, container: str, prefix: str, account: str | None, canonical: str | None
) -> None:
    root = table_root(location)
    assert (root.kind, root.container, root.prefix, root.account) == (kind, container, prefix, account)
    assert root.canonical == (canonical or "abfss://c@acct.dfs.core.windows.net/p/t")


@pytest.mark.parametrize(
    ("location", "said"),
    [
        ("hdfs://nn/t", "reads tables in S3 (s3://), Azure"),
        ("abfss://acct.dfs.core.windows.net/t", "CONTAINER@ACCOUNT"),
    ],
)
def test_other_roots_are_refused_by_name(location: str, said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)):
        table_root(location)


def test_an_azure_file_url_is_the_blob_with_the_providers_sas() -> None:
    root = table_root("abfss://c@acct.dfs.core.windows.net/p")
    settings = StoreSettings(sas_token=SecretStr("?sv=2024&sig=abc"))
    url = object_url(root, settings, "part 1.parquet", 60, 0)
    assert url == "https://acct.blob.core.windows.net/c/p/part%201.parquet?sv=2024&sig=abc"
    emulated = settings.model_copy(update={"endpoint": "http://127.0.0.1:10000/acct"})
    assert object_url(root, emulated, "x", 60, 0).startswith("http://127.0.0.1:10000/acct/c/p/x?")


def test_a_gcs_file_url_is_the_media_url_and_the_token_a_header_for_its_origin() -> None:
    root = table_root("gs://b/p")
    settings = StoreSettings(oauth_token=SecretStr("ya29.t"))
    assert object_url(root, settings, "d/x.parquet", 60, 0) == (
        "https://storage.googleapis.com/download/storage/v1/b/b/o/p%2Fd%2Fx.parquet?alt=media"
    )
    assert bearer_for(root, settings) == ("https://storage.googleapis.com", "ya29.t")
    emulated = settings.model_copy(update={"endpoint": "http://127.0.0.1:4443"})
    assert bearer_for(root, emulated) == ("http://127.0.0.1:4443", "ya29.t")
    assert bearer_for(table_root("s3://b/p"), settings) is None
