"""Listings with pagination, names, authentication (bearer and OAuth) and error bodies."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from support.faults import SharingServer

from sharesync.sync.protocol.wire import GetShareResponse, ListSchemasPage, ListSharesPage, ListTablesPage, Table

from .support import ORDERS, error

ALL_TABLES = ["demo.sales.customers", "demo.sales.orders"]


def _walk(api: httpx.Client, path: str, max_results: int) -> tuple[list[Table], int]:
    """Follow nextPageToken to the end; returns the items and the number of pages."""
    items: list[Table] = []
    token: str | None = None
    pages = 0
    while True:
        params: dict[str, str | int] = {"maxResults": max_results}
        if token:
            params["pageToken"] = token
        response = api.get(path, params=params)
        assert response.status_code == 200, response.text
        page = ListTablesPage.model_validate_json(response.text)
        assert "nextPageToken" not in response.json() or page.next_page_token
        items += page.items or []
        pages += 1
        token = page.next_page_token
        if not token:
            return items, pages


def test_list_shares_and_get_share(api: httpx.Client) -> None:
    shares = ListSharesPage.model_validate_json(api.get("/shares").text)
    assert [s.name for s in shares.items or []] == ["demo", "samples"]
    assert shares.next_page_token is None
    share = GetShareResponse.model_validate_json(api.get("/shares/DEMO").text).share
    assert share.name == "demo" and share.id == (shares.items or [])[0].id


def test_list_schemas(api: httpx.Client) -> None:
    page = ListSchemasPage.model_validate_json(api.get("/shares/samples/schemas").text)
    assert [(s.name, s.share) for s in page.items or []] == [("all_types", "samples")]


@pytest.mark.parametrize("max_results", [1, 2, 500])
def test_all_tables_pages_through_everything_once(api: httpx.Client, max_results: int) -> None:
    tables, pages = _walk(api, "/shares/demo/all-tables", max_results)
    assert [t.full_name for t in tables] == ALL_TABLES
    assert pages == -(-len(ALL_TABLES) // max_results)
    assert len({t.id for t in tables}) == len(tables) and all(t.share_id for t in tables)


def test_list_tables_in_schema_with_tiny_pages(api: httpx.Client) -> None:
    tables, pages = _walk(api, "/shares/samples/schemas/all_types/tables", 1)
    assert [t.name for t in tables] == ["no_cdf", "partitioned", "plain"] and pages == 3


def test_page_size_zero_returns_no_items_but_a_token(api: httpx.Client) -> None:
    body = api.get("/shares/demo/all-tables", params={"maxResults": 0}).json()
    assert body.get("items", []) == [] and body["nextPageToken"]


@pytest.mark.parametrize("bad", ["-1", "501", "ten"])
def test_bad_max_results_is_invalid(api: httpx.Client, bad: str) -> None:
    assert error(api.get("/shares", params={"maxResults": bad}), 400)["errorCode"] == "INVALID_PARAMETER_VALUE"


def test_a_page_token_only_fits_its_listing(api: httpx.Client) -> None:
    token = api.get("/shares/demo/all-tables", params={"maxResults": 1}).json()["nextPageToken"]
    body = error(api.get("/shares/samples/all-tables", params={"pageToken": token}), 400)
    assert body == {"errorCode": "INVALID_PARAMETER_VALUE", "message": "invalid 'nextPageToken'"}
    assert error(api.get("/shares", params={"pageToken": "forged"}), 400)["message"] == "invalid 'nextPageToken'"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/shares/nope", "share 'nope' not found"),
        ("/shares/demo/schemas/nope/tables", "schema 'nope' not found"),
        (f"{ORDERS}x/metadata", "'demo/sales/ordersx' does not exist"),
        ("/no/such/route", "Not Found"),
    ],
)
def test_unknown_names_are_404_json(api: httpx.Client, path: str, message: str) -> None:
    body = error(api.get(path), 404)
    assert body["errorCode"] == "RESOURCE_DOES_NOT_EXIST" and message in body["message"]


def test_names_are_case_insensitive(api: httpx.Client) -> None:
    response = api.get("/shares/Demo/schemas/SALES/tables/Orders/version")
    assert response.status_code == 200 and int(response.headers["Delta-Table-Version"]) >= 1


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", "Basic c2hhcmVzeW5j"])
def test_missing_or_wrong_token_is_401(sharing_server: SharingServer, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = httpx.get(f"{sharing_server.endpoint}/shares", headers=headers)
    assert error(response, 401)["errorCode"] == "UNAUTHENTICATED"
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_oauth_client_credentials_issue_expiring_bearer_tokens(sharing_server: SharingServer) -> None:
    profile = sharing_server.profile(oauth=True)
    credentials = (profile["clientId"], profile["clientSecret"])
    grant = httpx.post(profile["tokenEndpoint"], data={"grant_type": "client_credentials"}, auth=credentials)
    assert grant.status_code == 200, grant.text
    body = grant.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    bearer = {"Authorization": f"Bearer {body['access_token']}"}
    assert httpx.get(f"{sharing_server.endpoint}/shares", headers=bearer).status_code == 200

    sharing_server.clock.advance(3601)
    assert error(httpx.get(f"{sharing_server.endpoint}/shares", headers=bearer), 401)["message"].endswith(
        "request a new one from the token endpoint"
    )


def test_oauth_accepts_form_credentials_and_refuses_bad_ones(sharing_server: SharingServer) -> None:
    profile = sharing_server.profile(oauth=True)
    form = {"grant_type": "client_credentials", "client_id": profile["clientId"], "client_secret": "nope"}
    assert httpx.post(profile["tokenEndpoint"], data=form).json()["error"] == "invalid_client"
    form["client_secret"] = profile["clientSecret"]
    assert httpx.post(profile["tokenEndpoint"], data=form).status_code == 200
    form["grant_type"] = "password"
    assert httpx.post(profile["tokenEndpoint"], data=form).json()["error"] == "unsupported_grant_type"


def test_profile_files(sharing_server: SharingServer, tmp_path: Path) -> None:
    assert sharing_server.profile_path is not None
    assert sharing_server.profile() == {
        "shareCredentialsVersion": 1,
        "endpoint": sharing_server.endpoint,
        "bearerToken": sharing_server.token,
    }
    written = sharing_server.write_profile(tmp_path / "oauth.share", oauth=True)
    assert '"type": "oauth_client_credentials"' in written.read_text()
