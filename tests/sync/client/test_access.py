"""Directory-based access, client side: ``accessModes`` / ``location`` read from listings and
metadata, the access decision, and Generate Temporary Table Credential in its three cloud shapes
(only AWS is exercised end to end, against moto: tests/e2e/test_dir_access.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from sharesync.sync.core.errors import ProtocolViolation, UnsupportedAccessMode
from sharesync.sync.core.redact import redact
from sharesync.sync.protocol.access import TemporaryCredentials, choose_access
from sharesync.sync.protocol.wire import ListTablesPage, Metadata, TableAccess

from .test_streams import body, recorder

AWS = {
    "location": "s3://bucket/share/table",
    "awsTempCredentials": {
        "accessKeyId": "ASIA-access-key-0001",
        "secretAccessKey": "secret-access-key-0001",
        "sessionToken": "session-token-0001",
    },
    "expirationTime": 1718298900000,
}
AZURE = {
    "location": "abfss://c@a.dfs.core.windows.net/t",
    "azureUserDelegationSas": {"sasToken": "sv=2024&sig=azure-sig-0001"},
    "expirationTime": 1,
}
GCP = {"location": "gs://bucket/t", "gcpOauthToken": {"oauthToken": "ya29.gcp-token-0001"}, "expirationTime": 1}


def test_listings_and_metadata_carry_access_modes_and_location() -> None:
    page = ListTablesPage.model_validate(
        {"items": [{"name": "t", "schema": "s", "share": "sh", "location": "s3://b/t", "accessModes": ["url", "dir"]}]}
    )
    assert page.items is not None
    assert page.items[0].access_modes == ("url", "dir") and page.items[0].location == "s3://b/t"
    meta = Metadata.model_validate({"id": "x", "schemaString": "{}", "accessModes": ["dir"], "location": "s3://b/t"})
    assert choose_access("auto", meta, name="sh.s.t") == "dir"


@pytest.mark.parametrize(
    ("setting", "modes", "chosen"),
    [
        ("auto", None, "url"),  # absent: url only (spec)
        ("auto", ("url", "dir"), "url"),
        ("auto", ("DIR",), "dir"),
        ("dir", ("url", "dir"), "dir"),
        ("url", ("url", "dir"), "url"),
    ],
)
def test_the_access_setting_meets_the_offered_modes(setting: Any, modes: Any, chosen: str) -> None:
    assert choose_access(setting, TableAccess(access_modes=modes, location="s3://b/t"), name="a.b.c") == chosen


@pytest.mark.parametrize(
    ("setting", "modes", "said"),
    [
        ("url", ("dir",), "access: url is set but the provider offers only dir access to this table; set access: auto"),
        ("dir", None, "access: dir is set but the provider offers only url access"),
        ("auto", (), r"the provider offers no access mode sharesync knows \(accessModes: \[\]\)"),
    ],
)
def test_a_mode_the_table_does_not_offer_fails_the_table_by_name(setting: Any, modes: Any, said: str) -> None:
    with pytest.raises(UnsupportedAccessMode, match=f"^a.b.c: {said}"):
        choose_access(setting, TableAccess(access_modes=modes, location="s3://b/t"), name="a.b.c")


def test_dir_without_a_location_is_refused() -> None:
    with pytest.raises(UnsupportedAccessMode, match="sends no table location"):
        choose_access("dir", TableAccess(access_modes=("dir",)), name="a.b.c")


@pytest.mark.parametrize(("answer", "kind"), [(AWS, "aws"), (AZURE, "azure"), (GCP, "gcp")])
def test_credentials_are_requested_parsed_and_redacted(make_client: Any, answer: dict[str, Any], kind: str) -> None:
    seen, handler = recorder(httpx.Response(200, json={"credentials": answer}))
    creds = make_client(handler).temporary_table_credentials("sh.s.t")
    assert seen[0].method == "POST" and seen[0].url.path.endswith("/sh/schemas/s/tables/t/temporary-table-credentials")
    assert body(seen[0]) == {}
    assert creds.kind == kind and creds.location == answer["location"]
    for secret in creds.secrets():
        assert secret not in repr(creds) and secret not in str(creds)
        assert redact(f"failed with {secret}") == "failed with ***"


def test_an_auxiliary_location_is_asked_for_by_name(make_client: Any) -> None:
    seen, handler = recorder(httpx.Response(200, json={"credentials": AWS}))
    make_client(handler).temporary_table_credentials("sh.s.t", location="s3://aux/t")
    assert json.loads(seen[0].content) == {"location": "s3://aux/t"}


@pytest.mark.parametrize(
    "credentials", [{**AWS, "gcpOauthToken": GCP["gcpOauthToken"]}, {"location": "s3://b", "expirationTime": 1}]
)
def test_not_exactly_one_credential_kind_is_a_protocol_violation(make_client: Any, credentials: Any) -> None:
    _seen, handler = recorder(httpx.Response(200, json={"credentials": credentials}))
    with pytest.raises(ProtocolViolation, match="exactly one of awsTempCredentials") as caught:
        make_client(handler).temporary_table_credentials("sh.s.t")
    assert "0001" not in str(caught.value)


def test_the_model_never_dumps_secrets() -> None:
    creds = TemporaryCredentials.model_validate(AWS)
    assert "session-token-0001" not in json.dumps(creds.to_wire())
