"""Directory-based access: read a shared table from its root (S3, Azure, GCS) with the provider's credentials.

The reader is sharesync's own sharing server (:mod:`sharesync.sync.server`), run in this process
over the one table: it mirrors the table's ``_delta_log`` with the temporary credentials, replays
it with the log reader that serves every local table, and answers ``/metadata``, ``/query`` and
``/changes`` with files as URLs it presigns with the same credentials. A :class:`SharingClient`
reads those answers through an in-process transport, so a dir-mode batch is staged by exactly
the code of a url-mode batch — deletion vectors, column mapping, partition values, statistics,
change rules, URL renewal — one model, no second reader to keep in step. (``deltalake`` was the
other candidate; it cannot read deletion-vector tables and exposes no per-commit actions.)

Credentials are fetched from the provider on first use and again when less than a minute (or
half their life) is left: every presigned URL expires no later than its credentials, so the
downloader's renewal (an expiring URL, or storage answering 403) asks this server again, which
signs with fresh credentials.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from pydantic import SecretStr
from starlette.types import ASGIApp

from sharesync.pipelines.run.services import RunServices
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import UnsupportedAccessMode
from sharesync.sync.core.remote_table import Keys
from sharesync.sync.core.storage import StoreKind, StoreSettings, settings_from_environment
from sharesync.sync.core.store_urls import bearer_for, table_root
from sharesync.sync.protocol.access import TemporaryCredentials, choose_access
from sharesync.sync.protocol.asyncquery import SubmissionLog
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import Profile, parse_profile
from sharesync.sync.protocol.responses import ChangesResult, QueryResult, TableLike, TableMetadata
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.wire import ChangesRequest, QueryRequest
from sharesync.sync.server.app import create_app
from sharesync.sync.server.serving import ServerState
from sharesync.sync.server.settings import RemoteTableSpec, ServerSettings
from sharesync.sync.server.signing import Signer

log = logging.getLogger(__name__)

_ENDPOINT = "http://directory.sharesync.invalid/delta-sharing"  # never resolved: the transport is in-process
_RENEW_MARGIN_SECONDS = 60.0


class ProviderKeys:
    """The provider's temporary credentials for one table, renewed before they expire."""

    def __init__(
        self,
        client: SharingClient,
        name: str,
        base: StoreSettings,
        kind: StoreKind,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client, self._name, self._base, self._kind, self._clock = client, name, base, kind, clock
        self._lock = threading.Lock()
        self._keys: Keys | None = None
        self._received_ms = 0
        self.fetches = 0

    def renew(self) -> None:
        """Ask the provider again on next use (the store refused a URL: maybe revoked early)."""
        with self._lock:
            self._keys = None

    def __call__(self) -> Keys:
        with self._lock:
            now_ms = int(self._clock() * 1000)
            if self._keys is None or self._expiring(now_ms):
                self._keys, self._received_ms = self._fetch(), now_ms
            return self._keys

    def _expiring(self, now_ms: int) -> bool:
        assert self._keys is not None and self._keys.expires_ms is not None
        life = max(0, self._keys.expires_ms - self._received_ms)
        margin = min(_RENEW_MARGIN_SECONDS * 1000, life / 2)
        return now_ms + margin >= self._keys.expires_ms

    def _fetch(self) -> Keys:
        creds = self._client.temporary_table_credentials(self._name)
        kind = table_root(creds.location).kind if creds.location else self._kind
        if kind is not self._kind or _KINDS[creds.kind] is not kind:
            raise UnsupportedAccessMode(
                f"{self._name}: the provider issued {creds.kind} credentials for '{creds.location}', but the table's "
                f"root is in {self._kind.value}; set access: url for this table if the provider offers it"
            )
        self.fetches += 1
        log.info("%s: temporary credentials received (expire at %d ms)", self._name, creds.expiration_time)
        return Keys(self._base.model_copy(update=_settings_update(creds)), creds.expiration_time)


_KINDS = {"aws": StoreKind.S3, "azure": StoreKind.AZURE, "gcp": StoreKind.GCS}


def _settings_update(creds: TemporaryCredentials) -> dict[str, SecretStr | None]:
    """The credentials as store settings: on top of the endpoint, region… ``provider_storage:`` (or the
    environment) gives, in place of any key of the recipient's own found there."""
    if creds.aws_temp_credentials is not None:
        aws = creds.aws_temp_credentials
        return {
            "access_key_id": aws.access_key_id,
            "secret_access_key": aws.secret_access_key,
            "session_token": aws.session_token,
        }
    if creds.azure_user_delegation_sas is not None:
        return {"sas_token": creds.azure_user_delegation_sas.sas_token, "account_key": None, "client_secret": None}
    assert creds.gcp_oauth_token is not None
    return {"oauth_token": creds.gcp_oauth_token.oauth_token}


class DirectoryClient(SharingClient):
    """The client of the in-process server. A request made a second time is a URL renewal (the
    downloader's refreshers re-issue the same query or change feed when a URL expires or the store
    answers 403): the credentials are renewed first, so fresh URLs are signed with fresh ones."""

    def __init__(
        self,
        profile: Profile,
        *,
        keys: ProviderKeys,
        http: httpx.Client,
        retry: RetryPolicy,
        private: bool,
        max_files: int | None,
    ) -> None:
        super().__init__(profile, http=http, retry=retry, allow_private_file_urls=private, max_files=max_files)
        self._keys = keys
        self._asked: set[str] = set()

    def _renew_if_repeated(self, request: QueryRequest | ChangesRequest) -> None:
        key = request.model_dump_json(exclude={"refresh_token", "include_refresh_token", "page_token"})
        if key in self._asked:
            self._keys.renew()
        self._asked.add(key)

    def query_request(
        self, table: TableLike, request: QueryRequest, *, submissions: SubmissionLog | None = None
    ) -> QueryResult:
        self._renew_if_repeated(request)
        return super().query_request(table, request, submissions=submissions)

    def changes_request(self, table: TableLike, request: ChangesRequest) -> ChangesResult:
        self._renew_if_repeated(request)
        return super().changes_request(table, request)


class OriginBearer(httpx.Auth):
    """``Authorization: Bearer`` with the provider's current GCP token, on requests to the store's
    origin only (httpx drops the header on a redirect elsewhere): an OAuth token signs no URL."""

    def __init__(self, current: Callable[[], tuple[str, str] | None]) -> None:
        self._current = current

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        found = self._current()
        if found is not None and f"{request.url.scheme}://{request.url.netloc.decode()}" == found[0]:
            request.headers["Authorization"] = f"Bearer {found[1]}"
        yield request


class InProcessTransport(httpx.BaseTransport):
    """Each request answered by an ASGI app in this process, on an event loop of its own."""

    def __init__(self, app: ASGIApp) -> None:
        self._inner = httpx.ASGITransport(app=app)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def call() -> httpx.Response:
            response = await self._inner.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return asyncio.run(call())


@contextmanager
def directory_client(
    client: SharingClient, name: str, metadata: TableMetadata, config: SharesyncConfig
) -> Iterator[SharingClient]:
    """A client that reads ``name`` from its directory, for the length of the ``with`` block."""
    location = metadata.metadata.location
    assert location is not None  # choose_access refuses dir without a location
    root = table_root(location)  # S3, Azure or GCS: a ConfigError naming the scheme otherwise
    matched = config.provider_storage.match(location) or config.provider_storage.match(root.canonical)
    base = matched[1] if matched is not None else settings_from_environment(root.kind)
    keys = ProviderKeys(client, name, base, root.kind)
    scratch = Path(tempfile.mkdtemp(prefix="sharesync-dir-"))
    settings = ServerSettings(
        root=scratch / "empty",
        bearer_token=None,
        remote_tables=(RemoteTableSpec(name=name, location=location, access_modes=("url",)),),
        cache_dir=scratch / "log",
    )
    state = ServerState(settings, Signer(), keys=keys)
    http = httpx.Client(transport=InProcessTransport(create_app(state)))
    profile = parse_profile({"shareCredentialsVersion": 1, "endpoint": _ENDPOINT, "bearerToken": "in-process"})
    # The URLs are signed here for the endpoint the user's provider_storage: names (a private address
    # is then the user's choice, not the provider's).
    private = config.allow_private_file_urls or base.endpoint is not None
    reader = DirectoryClient(
        profile, keys=keys, http=http, retry=client.retry, private=private, max_files=client.max_files
    )
    if root.kind is StoreKind.GCS:
        reader.file_auth = OriginBearer(lambda: bearer_for(root, keys().settings))
    try:
        yield reader
    finally:
        reader.close()
        http.close()
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def read_access(services: RunServices, table: TableConfig, metadata: TableMetadata) -> Iterator[RunServices]:
    """The services a table's run reads with: unchanged for url access, a directory reader for dir."""
    if choose_access(table.access, metadata.metadata, name=table.name) == "url":
        yield services
        return
    with directory_client(services.client, table.name, metadata, services.config) as reader:
        yield dataclasses.replace(services, client=reader)
