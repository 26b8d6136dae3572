"""Directory access, the recipient's credentials: asked for once, renewed at half their life or
when a URL is renewed, turned into the store settings of their cloud (AWS keys, an Azure SAS, a
GCP token), refused by name when they are not for the table root's cloud. The provider answers
through ``httpx.MockTransport`` (the client's transport seam); the end-to-end proofs against moto's
S3, azurite and fake-gcs-server are tests/e2e/test_dir_access.py and tests/e2e/test_dir_clouds.py."""

from __future__ import annotations

import httpx
import pytest

from sharesync.pipelines.run.directory import OriginBearer, ProviderKeys
from sharesync.sync.core.errors import UnsupportedAccessMode
from sharesync.sync.core.redact import redact
from sharesync.sync.core.storage import StoreKind, StoreSettings
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import parse_profile

PROFILE = {"shareCredentialsVersion": 1, "endpoint": "https://sharing.example.com/ds", "bearerToken": "token-0123456"}


class Provider:
    """Answers Generate Temporary Table Credential with new keys each time, living ``life`` seconds."""

    def __init__(self, now: list[float], life: float, kind: str = "aws", location: str = "s3://b/t") -> None:
        self.now, self.life, self.kind, self.location, self.asked = now, life, kind, location, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/sh/schemas/s/tables/t/temporary-table-credentials")
        self.asked += 1
        n = self.asked
        if self.kind == "aws":
            held = {"awsTempCredentials": {"accessKeyId": f"ASIA{n:04}", "secretAccessKey": f"secret-{n:04}",
                                           "sessionToken": f"token-{n:04}"}}  # fmt: skip
        elif self.kind == "azure":
            held = {"azureUserDelegationSas": {"sasToken": f"sv=1&sig=sas-{n:04}"}}
        else:
            held = {"gcpOauthToken": {"oauthToken": f"ya29.token-{n:04}"}}
        expires = int((self.now[0] + self.life) * 1000)
        answer = {"location": self.location, "expirationTime": expires, **held}
        return httpx.Response(200, json={"credentials": answer})


def _keys(provider: Provider, now: list[float], kind: StoreKind = StoreKind.S3) -> ProviderKeys:
    client = SharingClient(parse_profile(PROFILE), http=httpx.Client(transport=httpx.MockTransport(provider)))
    base = StoreSettings(region="eu-west-1")
    return ProviderKeys(client, "sh.s.t", base, kind, clock=lambda: now[0])


def test_credentials_are_reused_until_half_their_life_then_renewed() -> None:
    now = [1000.0]
    provider = Provider(now, life=10)
    keys = _keys(provider, now)
    first = keys()
    assert first.settings.region == "eu-west-1" and first.expires_ms == 1_010_000
    assert first.settings.session_token is not None and first.settings.session_token.get_secret_value() == "token-0001"
    now[0] += 4.9
    assert keys() is first and provider.asked == 1
    now[0] += 0.2  # past half of the ten seconds
    assert keys().settings.access_key_id.get_secret_value() == "ASIA0002"  # type: ignore[union-attr]
    assert provider.asked == 2 and keys.fetches == 2


def test_a_renewal_asks_again_at_once() -> None:
    now = [0.0]
    provider = Provider(now, life=3600)
    keys = _keys(provider, now)
    keys()
    keys.renew()  # a URL was refused by the store
    keys()
    assert provider.asked == 2


def test_credentials_for_another_store_fail_the_table_by_name() -> None:
    now = [0.0]
    keys = _keys(Provider(now, life=60, kind="azure"), now)
    with pytest.raises(
        UnsupportedAccessMode,
        match=r"^sh\.s\.t: the provider issued azure credentials for 's3://b/t', but the table's root is in s3; "
        r".*set access: url",
    ):
        keys()


@pytest.mark.parametrize(
    ("kind", "store", "location", "field", "secret"),
    [
        ("azure", StoreKind.AZURE, "abfss://c@acct.dfs.core.windows.net/t", "sas_token", "sv=1&sig=sas-0001"),
        ("gcp", StoreKind.GCS, "gs://b/t", "oauth_token", "ya29.token-0001"),
    ],
)
def test_azure_and_gcp_credentials_become_that_stores_settings(
    kind: str, store: StoreKind, location: str, field: str, secret: str
) -> None:
    now = [0.0]
    keys = _keys(Provider(now, life=60, kind=kind, location=location), now, store)()
    held = getattr(keys.settings, field)
    assert held is not None and held.get_secret_value() == secret and secret not in repr(keys)
    assert keys.settings.region == "eu-west-1" and keys.expires_ms == 60_000  # provider_storage: kept
    assert redact(f"got {secret}") == "got ***"


def test_a_gcp_token_goes_as_a_bearer_header_to_the_stores_origin_only() -> None:
    seen: list[tuple[str, str | None]] = []

    def store(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, request.headers.get("Authorization")))
        if request.url.host == "storage.googleapis.com":
            return httpx.Response(302, headers={"Location": "https://elsewhere.example.com/x"})
        return httpx.Response(200, content=b"data")

    auth = OriginBearer(lambda: ("https://storage.googleapis.com", "ya29.token-0001"))
    with httpx.Client(transport=httpx.MockTransport(store), auth=auth, follow_redirects=True) as http:
        http.get("https://storage.googleapis.com/download/storage/v1/b/b/o/t%2Fpart-0.parquet?alt=media")
        http.get("https://other.example.com/file")
    assert seen == [
        ("storage.googleapis.com", "Bearer ya29.token-0001"),
        ("elsewhere.example.com", None),  # a redirect away from the store: the token stays behind
        ("other.example.com", None),
    ]
