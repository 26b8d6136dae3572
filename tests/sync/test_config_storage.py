"""The ``storage:`` section: validation, ``${ENV}`` secrets, and the one mapping every client gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sharesync.sync.core.config import parse_config
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.redact import redact
from sharesync.sync.core.storage import StorageSection, StoreKind, settings_from_environment

SECRET = "s3cr3t-value-for-tests"  # noqa: S105 - a test value


def _config(storage: Any, **top: Any) -> Any:
    return parse_config({"profile": "p.share", "storage": storage, **top}, base_dir=Path("/base"))


def _error(storage: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        _config(storage)
    return str(raised.value)


def test_an_s3_prefix_maps_to_deltalake_options_the_engine_environment_and_s3a_conf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAKE_SECRET", SECRET)
    settings = {
        "endpoint": "http://127.0.0.1:9000",
        "region": "us-east-1",
        "access_key_id": "AKIAEXAMPLE",
        "secret_access_key": "${LAKE_SECRET}",
        "path_style": True,
        "allow_http": True,
    }
    storage = _config({"s3://lake/": settings}).storage

    expected = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_ALLOW_HTTP": "true",
    }
    assert storage.options_for("s3://lake/warehouse/orders") == expected
    assert storage.engine_environment() == expected
    assert storage.options_for("s3://lakehouse/x") == {}  # a prefix matches whole path segments
    assert storage.options_for("/local/path") == {}
    conf = storage.remote_spark_conf()
    assert conf == {
        "fs.s3a.bucket.lake.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.bucket.lake.endpoint.region": "us-east-1",
        "fs.s3a.bucket.lake.path.style.access": "true",
        "fs.s3a.bucket.lake.connection.ssl.enabled": "false",
    }
    assert SECRET not in repr(storage) and SECRET not in str(conf)


def test_the_longest_matching_prefix_wins() -> None:
    storage = _config({"s3://lake/": {"region": "us-east-1"}, "s3://lake/eu/": {"region": "eu-west-1"}}).storage
    assert storage.options_for("s3://lake/eu/t")["AWS_REGION"] == "eu-west-1"
    assert storage.options_for("s3://lake/us/t")["AWS_REGION"] == "us-east-1"


def test_azure_and_gcs_settings_map_to_their_keys() -> None:
    storage = _config(
        {
            "abfss://c@acct.dfs.core.windows.net/": {"account_name": "acct", "sas_token": "sv=1&sig=abc"},
            "gs://bucket/": {"service_account_file": "/keys/sa.json"},
        }
    ).storage
    assert storage.options_for("abfss://c@acct.dfs.core.windows.net/t") == {
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_SAS_TOKEN": "sv=1&sig=abc",
    }
    assert storage.options_for("gs://bucket/t") == {
        "GOOGLE_SERVICE_ACCOUNT": "/keys/sa.json",
        "GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json",
    }


@pytest.mark.parametrize(
    ("storage", "message"),
    [
        ({"s3://lake/": {"endpont": "x"}}, "storage.s3://lake/.endpont: unknown field"),
        ({"s3://lake/": {"account_key": "k"}}, "['account_key'] do not apply to s3 storage"),
        ({"/data/": {}}, "'/data/' is not an object-store URI prefix"),
        ({"s3://lake/": {"access_key_id": "AKIA"}}, "give 'access_key_id' and 'secret_access_key' together"),
        ({"s3://lake/": {"endpoint": "http://minio:9000"}}, "set 'allow_http: true'"),
        ({"s3://lake/": {"endpoint": "minio:9000"}}, "must be a URL like 'https://host:port'"),
        ({"az://c/": {"account_key": "k", "sas_token": "t"}}, "give one of 'account_key', 'sas_token'"),
        ({"az://c/": {"client_id": "i", "client_secret": "s"}}, "a service principal needs 'client_id'"),
        ({"s3://lake/": {"secret_access_key": "${NOT_SET_ANYWHERE}"}}, "NOT_SET_ANYWHERE, which is not set"),
        (["s3://lake/"], "must map URI prefixes"),
    ],
)
def test_a_wrong_storage_section_names_the_field_and_the_fix(storage: Any, message: str) -> None:
    assert message in _error(storage)


def test_a_missing_variable_error_never_shows_other_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKE_SECRET", SECRET)
    message = _error({"s3://lake/": {"access_key_id": "${LAKE_SECRET}", "secret_access_key": "${NOPE_NOT_SET}"}})
    assert SECRET not in message


def test_staging_dir_may_be_an_object_store_uri_and_stays_a_path_otherwise() -> None:
    assert _config({}, staging_dir="s3://lake/staging/").staging_dir == "s3://lake/staging"
    assert _config({}, staging_dir="stage").staging_dir == Path("/base/stage")
    with pytest.raises(ConfigError, match="not a supported staging location"):
        _config({}, staging_dir="ftp://host/staging")


def test_the_embedded_engine_needs_one_set_of_settings_per_kind_of_store() -> None:
    storage = StorageSection.model_validate(
        {"s3://a/": {"endpoint": "https://minio.internal"}, "s3://b/": {"region": "us-east-1"}}
    )
    with pytest.raises(ConfigError, match="'s3://a/' and 's3://b/' need different s3 settings"):
        storage.engine_environment()
    # deltalake and pyarrow take each prefix's own settings (a remote engine reads its own)
    assert storage.options_for("s3://a/t") == {"AWS_ENDPOINT_URL": "https://minio.internal"}
    assert storage.options_for("s3://b/t") == {"AWS_REGION": "us-east-1"}


def test_secrets_of_the_section_are_masked_wherever_they_appear() -> None:
    StorageSection.model_validate(  # registered when the section is loaded
        {"s3://lake/": {"access_key_id": "AKIAEXAMPLE", "secret_access_key": "masked-secret-4242"}}
    )
    assert "masked-secret-4242" not in redact("the store said: masked-secret-4242 is wrong")


def test_a_uri_no_prefix_matches_is_reached_with_the_standard_environment_variables() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": SECRET}
    settings = settings_from_environment(StoreKind.S3, env)
    assert (settings.endpoint, settings.region) == ("http://127.0.0.1:9000", "eu-west-1")
    assert settings.secret_access_key is not None and settings.secret_access_key.get_secret_value() == SECRET
    assert SECRET not in repr(settings)
    azure = settings_from_environment(StoreKind.AZURE, {"AZURE_STORAGE_ACCOUNT_NAME": "acct"})
    assert azure.account_name == "acct" and azure.account_key is None


def test_each_clouds_own_endpoint_variables_apply_when_no_prefix_matches() -> None:
    # AWS SDKs: the service-specific variable before the general one.
    both = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:2"}
    s3 = settings_from_environment(StoreKind.S3, both)
    assert (s3.endpoint, s3.allow_http) == ("http://127.0.0.1:2", True)
    # Azure SDKs and azurite: a connection string, when object_store's own AZURE_STORAGE_* are unset.
    text = f"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={SECRET};BlobEndpoint=http://127.0.0.1:3/acct;"
    azure = settings_from_environment(StoreKind.AZURE, {"AZURE_STORAGE_CONNECTION_STRING": text})
    assert (azure.account_name, azure.endpoint) == ("acct", "http://127.0.0.1:3/acct")
    assert azure.account_key is not None and azure.account_key.get_secret_value() == SECRET
    assert redact(f"key {SECRET}") == "key ***"  # registered like a configured key
    named = {"AZURE_STORAGE_CONNECTION_STRING": text, "AZURE_STORAGE_ACCOUNT_NAME": "other"}
    assert settings_from_environment(StoreKind.AZURE, named).account_name == "other"
    # Google's client libraries: STORAGE_EMULATOR_HOST, with or without its scheme.
    for host in ("127.0.0.1:4443", "http://127.0.0.1:4443"):
        gcs = settings_from_environment(StoreKind.GCS, {"STORAGE_EMULATOR_HOST": host})
        assert (gcs.endpoint, gcs.allow_http) == ("http://127.0.0.1:4443", True)
    assert settings_from_environment(StoreKind.GCS, {}).endpoint is None


def test_a_gcs_target_with_an_emulator_endpoint_is_refused_by_name() -> None:
    from sharesync.sync.core.location import locate

    storage = StorageSection.model_validate({"gs://lake/": {"endpoint": "http://127.0.0.1:4443", "allow_http": True}})
    with pytest.raises(ConfigError, match=r"^'gs://lake/t': targets and staging on gs:// reach Google Cloud Storage"):
        locate("gs://lake/t", storage)
