"""The Delta Sharing protocol client: one method per endpoint, typed results.

Listings follow ``nextPageToken``; query/changes/metadata are streamed NDJSON in the parquet or
delta response format (:mod:`sharesync.sync.protocol.streams`), collected into a :class:`QueryResult` /
:class:`ChangesResult` (``iter_query`` hands out a snapshot's files as they arrive).
Requests are built from keyword options by :mod:`sharesync.sync.protocol.options`; transport,
retries and error mapping live in :mod:`sharesync.sync.protocol.transport`; the profile's
credential is an ``httpx.Auth`` from :mod:`sharesync.sync.protocol.auth`. The httpx client is
injected, so tests pass an ``httpx.MockTransport`` and the engine shares one connection pool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self, Unpack

import httpx

from sharesync.sync.core.redact import install_log_redaction
from sharesync.sync.core.timestamps import to_wire
from sharesync.sync.protocol.access import (
    TemporaryCredentials,
    TemporaryCredentialsRequest,
    TemporaryCredentialsResponse,
)
from sharesync.sync.protocol.addresses import FileUrlPolicy
from sharesync.sync.protocol.asyncquery import AsyncQuery, SubmissionLog
from sharesync.sync.protocol.auth import auth_for
from sharesync.sync.protocol.changes import check_change_feed
from sharesync.sync.protocol.labels import check_changes, check_metadata, check_query
from sharesync.sync.protocol.ndjson import ANY_FILES, CHANGE_FILES, PageCursor
from sharesync.sync.protocol.options import (
    ChangesOptions,
    QueryOptions,
    Timestamp,
    build_changes,
    build_query,
    describe_query,
)
from sharesync.sync.protocol.profile import Profile
from sharesync.sync.protocol.responses import (
    ChangesResult,
    QueryResult,
    TableLike,
    TableMetadata,
    TableRef,
    TableVersion,
)
from sharesync.sync.protocol.retry import PollPolicy, RetryPolicy
from sharesync.sync.protocol.streams import FileStream, StreamCall
from sharesync.sync.protocol.transport import (
    FileIdScheme,
    SharingHttp,
    Timeouts,
    build_http_client,
    provider_subject,
    quote_segment,
    table_version_header,
)
from sharesync.sync.protocol.wire import (
    ChangesRequest,
    GetShareResponse,
    ListSchemasPage,
    ListSharesPage,
    ListTablesPage,
    QueryRequest,
    Schema,
    Share,
    Table,
)

# ---------------------------------------------------------------- the client


class SharingClient:
    """A client for one sharing server, authenticated by one profile. Thread-safe.

    ``http`` injects the transport (tests: ``httpx.MockTransport``; the engine: a shared
    pool); ``timeouts`` and ``ca_bundle`` only shape the client built when none is given.
    ``page_size`` / ``max_files`` are default page sizes (None: the server's). ``file_id_hash``
    asks ``/query`` and ``/changes`` for that file id scheme and checks the server's echo.
    ``allow_private_file_urls``: this provider serves files from private addresses (see
    :mod:`sharesync.sync.protocol.addresses`).
    ``polling`` paces asynchronous queries. ``provider`` is the config's name for this server:
    errors about its pace and notices of its retries name it.
    """

    def __init__(
        self,
        profile: Profile,
        *,
        http: httpx.Client | None = None,
        retry: RetryPolicy | None = None,
        timeouts: Timeouts | None = None,
        ca_bundle: Path | None = None,
        page_size: int | None = None,
        max_files: int | None = None,
        allow_private_file_urls: bool = False,
        file_id_hash: FileIdScheme | None = None,
        polling: PollPolicy | None = None,
        provider: str | None = None,
    ) -> None:
        install_log_redaction()  # httpx logs URLs: make sure nothing logs a token or a signature
        self.profile = profile
        self.provider = provider
        self.timeouts = timeouts or Timeouts.from_env()
        subject = provider_subject(provider, profile.endpoint)
        self._owns_http = http is None
        self._client = http or build_http_client(
            ca_bundle=ca_bundle, timeouts=self.timeouts, subject=subject, provider=provider
        )
        self.retry = dataclasses.replace(retry or RetryPolicy.from_env(), subject=subject)
        self.polling = polling or PollPolicy.from_env()
        self.page_size = page_size
        self.max_files = max_files
        self.file_id_hash = file_id_hash
        self._http = SharingHttp(profile.endpoint, auth_for(profile), self._client, self.retry)
        # Which presigned URLs of this provider may be fetched (its own origin; public hosts).
        self.file_url_policy = FileUrlPolicy(profile.endpoint, allow_private=allow_private_file_urls)
        # How file downloads authenticate beyond their URL (None: the URL is its own signature).
        self.file_auth: httpx.Auth | None = None

    def __repr__(self) -> str:
        return f"SharingClient(endpoint={self.profile.endpoint!r})"

    def close(self) -> None:
        if self._owns_http:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------ listings

    def list_shares(self, *, max_results: int | None = None) -> list[Share]:
        return list(self.iter_shares(max_results=max_results))

    def iter_shares(self, *, max_results: int | None = None) -> Iterator[Share]:
        return self._listing(self._http.url("shares"), ListSharesPage, "list shares", max_results)

    def get_share(self, share: str) -> Share:
        context = f"get share '{share}'"
        return self._http.get_json(self._http.url("shares", share), GetShareResponse, context=context).share

    def list_schemas(self, share: str, *, max_results: int | None = None) -> list[Schema]:
        url = self._http.url("shares", share, "schemas")
        return list(self._listing(url, ListSchemasPage, f"list schemas of share '{share}'", max_results))

    def list_tables(self, share: str, schema: str, *, max_results: int | None = None) -> list[Table]:
        url = self._http.url("shares", share, "schemas", schema, "tables")
        return list(self._listing(url, ListTablesPage, f"list tables of '{share}.{schema}'", max_results))

    def list_all_tables(self, share: str, *, max_results: int | None = None) -> list[Table]:
        url = self._http.url("shares", share, "all-tables")
        return list(self._listing(url, ListTablesPage, f"list all tables of share '{share}'", max_results))

    def _listing(
        self,
        url: str,
        model: type[ListSharesPage | ListSchemasPage | ListTablesPage],
        context: str,
        max_results: int | None,
    ) -> Iterator[Any]:
        cursor = PageCursor(context)
        size = max_results if max_results is not None else self.page_size
        if size is not None and size < 1:
            # The spec allows maxResults=0 — "no results but nextPageToken may be populated" — so
            # such a listing would never move on (against servers whose tokens differ per call,
            # without even repeating one).
            raise ValueError(f"{context}: a page size must be at least 1, got {size}")
        while not cursor.done:
            params: dict[str, str | int] = {}
            if size is not None:
                params["maxResults"] = size
            if cursor.token:
                params["pageToken"] = cursor.token
            page = self._http.get_json(url, model, params=params, context=context)
            yield from page.items or ()  # spec: items may be missing or empty when there are none
            cursor.advance(page.next_page_token)

    # ------------------------------------------------------------ one table

    def table_version(self, table: TableLike, *, starting_timestamp: Timestamp | None = None) -> TableVersion:
        """Query Table Version: the current version, or the first at/after ``starting_timestamp``."""
        ref = TableRef.of(table)
        params: dict[str, str | int] = {}
        if starting_timestamp is not None:
            params["startingTimestamp"] = to_wire(starting_timestamp)
        context = f"table version of {ref}"
        url = self._table_url(ref, "version")
        headers = self._http.get_headers(url, params=params, context=context)
        return TableVersion(ref, table_version_header(headers, context))

    def metadata(
        self, table: TableLike, *, version: int | None = None, timestamp: Timestamp | None = None
    ) -> TableMetadata:
        """Query Table Metadata: protocol, metaData and the Delta-Table-Version."""
        ref = TableRef.of(table)
        params: dict[str, str | int] = {}
        if version is not None:
            params["version"] = version
        if timestamp is not None:
            params["timestamp"] = to_wire(timestamp)
        call = StreamCall(
            "GET", self._table_url(ref, "metadata"), f"metadata of {ref}", lambda _token: (params, None), (), str(ref)
        )
        with FileStream(self._http, call) as stream:
            for _ in stream:  # no files are allowed; reading to the end checks the ending
                pass
        if version is not None:
            check_metadata(version, stream.version, stream.metadata, stream.context)
        return TableMetadata(ref, stream.version, stream.protocol, stream.metadata)

    def temporary_table_credentials(self, table: TableLike, *, location: str | None = None) -> TemporaryCredentials:
        """Generate Temporary Table Credential: read access to the table's root (or an auxiliary
        ``location``) for directory-based access. The secrets are registered with the redactor."""
        ref = TableRef.of(table)
        url = self._table_url(ref, "temporary-table-credentials")
        body = TemporaryCredentialsRequest(location=location).to_wire()
        context = f"temporary credentials of {ref}"
        answer = self._http.get_json(url, TemporaryCredentialsResponse, context=context, body=body)
        answer.credentials.register_secrets()
        return answer.credentials

    def iter_query(self, table: TableLike, **options: Unpack[QueryOptions]) -> FileStream:
        """Read Data from a Table, streamed. Close the stream (or use ``with``) when stopping early.

        Options (:class:`QueryOptions`): at most one of ``version`` / ``timestamp`` /
        ``starting_version`` (+ ``ending_version``); hints; ``max_files`` per page. A
        latest-snapshot query asks for a refreshToken unless ``include_refresh_token=False``,
        so the downloader can renew expired URLs without a new snapshot.
        """
        return self._query_stream(TableRef.of(table), build_query(self.max_files, **options))

    def query(
        self, table: TableLike, *, submissions: SubmissionLog | None = None, **options: Unpack[QueryOptions]
    ) -> QueryResult:
        """Read Data from a Table, all pages collected. Options as :meth:`iter_query`.

        With ``submissions`` the query is offered as asynchronous (``asyncquery=true``) and its
        submission kept there until read, so a killed process's successor resumes it
        (:mod:`sharesync.sync.protocol.asyncquery`).
        """
        return self.query_request(table, build_query(self.max_files, **options), submissions=submissions)

    def query_request(
        self, table: TableLike, request: QueryRequest, *, submissions: SubmissionLog | None = None
    ) -> QueryResult:
        """Run a prepared :class:`QueryRequest` (used to re-issue a query for fresh URLs)."""
        ref = TableRef.of(table)
        if submissions is None:
            with self._query_stream(ref, request) as stream:
                files = tuple(stream)
            check_change_feed(files, request.starting_version, stream.context)  # a snapshot: repeats only
            return _checked(QueryResult(request=request, files=files, **_summary(ref, stream)), stream.context)
        query = AsyncQuery(
            self._http,
            ref,
            request,
            log=submissions,
            policy=self.polling,
            submit=lambda sent: self._query_call(ref, sent, offer_async=True),
            query_url=lambda query_id: self._table_url(ref, "queries") + "/" + quote_segment(query_id),
        )
        with query.open() as stream:
            files = tuple(stream)
        check_change_feed(files, request.starting_version, stream.context)
        query.finished()  # a mislabelled answer is read: asking again would get the same one
        return _checked(QueryResult(request=request, files=files, **_summary(ref, stream)), stream.context)

    def changes(self, table: TableLike, **options: Unpack[ChangesOptions]) -> ChangesResult:
        """Read Change Data Feed from a Table (inclusive range), all pages collected.

        Options (:class:`ChangesOptions`): exactly one of ``starting_version`` /
        ``starting_timestamp``, at most one of ``ending_version`` / ``ending_timestamp``.
        """
        return self.changes_request(table, build_changes(self.max_files, **options))

    def changes_request(self, table: TableLike, request: ChangesRequest) -> ChangesResult:
        ref = TableRef.of(table)
        with self._changes_stream(ref, request) as stream:
            files = tuple(stream)
        check_change_feed(files, request.starting_version, stream.context)
        result = ChangesResult(request=request, files=files, **_summary(ref, stream))
        check_changes(request, result, stream.context)
        return result

    # ------------------------------------------------------------ streams

    def _table_url(self, ref: TableRef, action: str) -> str:
        return self._http.url("shares", ref.share, "schemas", ref.schema, "tables", ref.name, action)

    def _query_stream(self, ref: TableRef, request: QueryRequest) -> FileStream:
        return FileStream(self._http, self._query_call(ref, request))

    def _query_call(self, ref: TableRef, request: QueryRequest, *, offer_async: bool = False) -> StreamCall:
        def page_request(token: str | None) -> tuple[None, dict[str, Any]]:
            if token is None:
                return None, request.to_wire()
            # Refresh tokens belong to the first page only; later pages carry the pageToken.
            body = request.model_copy(
                update={
                    "page_token": token,
                    "include_refresh_token": None,
                    "refresh_token": None,
                    "idempotency_key": None,
                }
            )
            return None, body.to_wire()

        what = "snapshot" if request.is_latest_snapshot else describe_query(request)
        url, context = self._table_url(ref, "query"), f"query {ref} ({what})"
        changes = request.starting_version is not None
        return StreamCall(
            "POST",
            url,
            context,
            page_request,
            ANY_FILES,
            table=str(ref),
            changes=changes,
            file_id_hash=self.file_id_hash,
            offer_async=offer_async,
            may_pend=offer_async,
        )

    def _changes_stream(self, ref: TableRef, request: ChangesRequest) -> FileStream:
        def page_request(token: str | None) -> tuple[dict[str, str | int], None]:
            page = request if token is None else request.model_copy(update={"page_token": token})
            return page.to_params(), None

        start = request.starting_version if request.starting_version is not None else request.starting_timestamp
        end = request.ending_version if request.ending_version is not None else request.ending_timestamp
        context = f"changes of {ref} ({start}..{'latest' if end is None else end})"
        url = self._table_url(ref, "changes")
        call = StreamCall("GET", url, context, page_request, CHANGE_FILES, str(ref), True, self.file_id_hash)
        return FileStream(self._http, call)


def _checked(result: QueryResult, context: str) -> QueryResult:
    check_query(result.request, result, context)
    return result


def _summary(ref: TableRef, stream: FileStream) -> dict[str, Any]:
    return {
        "table": ref,
        "version": stream.version,
        "protocol": stream.protocol,
        "metadata": stream.metadata,
        "historical_metadata": tuple(stream.historical_metadata),
        "historical_protocols": tuple(stream.historical_protocols),
        "response_format": stream.response_format,
        "end_stream_action": stream.end_stream_action,
        "refresh_token": stream.refresh_token,
        "min_url_expiration_timestamp": stream.min_url_expiration_timestamp,
        "pages": stream.pages,
    }


# The client and what its calls return (defined in results.py), importable from here.
__all__ = [
    "ChangesResult",
    "QueryResult",
    "SharingClient",
    "TableMetadata",
    "TableRef",
    "TableVersion",
]
