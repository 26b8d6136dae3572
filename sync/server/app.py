"""The HTTP routes of the local Delta Sharing server (spec "REST APIs"), as a Starlette app.

Routes are thin: authenticate, parse parameters, ask :mod:`~sharesync.sync.server.snapshots` /
:mod:`~sharesync.sync.server.change_answers` for an :class:`~sharesync.sync.server.answers.Answer` (in a worker thread,
the log is read from disk), and stream it (:mod:`~sharesync.sync.server.streaming`). Errors are
``{"errorCode", "message"}`` JSON like the reference server's. A test double's fault injection
comes in through :class:`~sharesync.sync.server.hooks.ServerHooks` (none in production).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from sharesync.sync.protocol.access import TemporaryCredentialsRequest
from sharesync.sync.protocol.wire import (
    GetShareResponse,
    ListSchemasPage,
    ListSharesPage,
    ListTablesPage,
    QueryInfoRequest,
    Schema,
    Table,
)
from sharesync.sync.server.answers import Answer, Context
from sharesync.sync.server.asyncqueries import status
from sharesync.sync.server.catalog import SharedTable
from sharesync.sync.server.change_answers import ChangesParams, answer_changes, answer_query_changes
from sharesync.sync.server.credentials import issue, require_url
from sharesync.sync.server.listings import page, parse_max_results
from sharesync.sync.server.logmodel import LogError
from sharesync.sync.server.negotiation import FILE_ID_HASH_HEADER, Capabilities, file_id_scheme, parse_capabilities
from sharesync.sync.server.problems import (
    INTERNAL_ERROR,
    RESOURCE_DOES_NOT_EXIST,
    ApiError,
    forbidden,
    history_not_shared,
    malformed,
    not_found,
)
from sharesync.sync.server.servable_versions import snapshot_at, version_at_or_after
from sharesync.sync.server.serving import ServerState
from sharesync.sync.server.signing import SignatureError
from sharesync.sync.server.snapshots import QueryRequest, answer_metadata, answer_snapshot_query
from sharesync.sync.server.streaming import CAPABILITIES_HEADER, NDJSON_TYPE, VERSION_HEADER, stream
from sharesync.sync.server.tokens import OAuthError

log = logging.getLogger(__name__)


Handler = Callable[[Request, ServerState], Awaitable[Response]]
M = TypeVar("M", bound=BaseModel)


def _api(handler: Handler, state: ServerState) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        state.auth.check(request.headers.get("authorization"), state.clock.now_ms())
        return await handler(request, state)

    return endpoint


# ---------------------------------------------------------------- listings


async def list_shares(request: Request, state: ServerState) -> Response:
    names = state.catalog.shares()
    items, token = _page(request, state, names, "shares")
    return _json(ListSharesPage(items=[state.catalog.share_info(n) for n in items], next_page_token=token))


async def get_share(request: Request, state: ServerState) -> Response:
    name = state.catalog.share(request.path_params["share"])
    return _json(GetShareResponse(share=state.catalog.share_info(name)))


async def list_schemas(request: Request, state: ServerState) -> Response:
    share = state.catalog.share(request.path_params["share"])
    items, token = _page(request, state, state.catalog.schemas(share), f"schemas/{share.lower()}")
    return _json(ListSchemasPage(items=[Schema(name=s, share=share) for s in items], next_page_token=token))


async def list_tables(request: Request, state: ServerState) -> Response:
    share, schema = state.catalog.schema(request.path_params["share"], request.path_params["schema"])
    tables = state.catalog.tables(share, schema)
    items, token = _page(request, state, tables, f"tables/{share.lower()}/{schema.lower()}")
    return _json(ListTablesPage(items=[_table_item(t) for t in items], next_page_token=token))


async def list_all_tables(request: Request, state: ServerState) -> Response:
    share = state.catalog.share(request.path_params["share"])
    items, token = _page(request, state, state.catalog.all_tables(share), f"all-tables/{share.lower()}")
    return _json(ListTablesPage(items=[_table_item(t) for t in items], next_page_token=token))


def _page(request: Request, state: ServerState, items: list[Any], scope: str) -> tuple[list[Any], str | None]:
    cap = state.settings.max_list_results
    max_results = parse_max_results(request.query_params.get("maxResults"), cap)
    return page(items, scope, max_results, request.query_params.get("pageToken"), state.signer, state.clock.now_ms())


def _table_item(table: SharedTable) -> Table:
    return Table(
        name=table.name,
        schema=table.schema,
        share=table.share,
        share_id=table.share_id,
        id=table.id,
        location=table.location,
        access_modes=table.access_modes,
    )


def _json(model: Any) -> JSONResponse:
    return JSONResponse(model.to_wire(), media_type="application/json; charset=utf-8")


# ---------------------------------------------------------------- table endpoints


def _table(request: Request, state: ServerState) -> SharedTable:
    p = request.path_params
    return state.catalog.table(p["share"], p["schema"], p["table"])


def _context(request: Request, state: ServerState, table: SharedTable) -> Context:
    base = str(request.base_url).rstrip("/")
    ctx = Context(
        table=table,
        log=state.catalog.log(table),
        signer=state.signer,
        files_base=f"{base}{state.settings.files_prefix}",
        now_ms=state.clock.now_ms(),
        url_ttl_ms=int(state.settings.url_ttl_seconds * 1000),
        token_ttl_ms=int(state.settings.token_ttl_seconds * 1000),
        max_page_size=state.settings.max_page_size,
        capabilities=Capabilities.from_header(request.headers.get(CAPABILITIES_HEADER)),
        verify_files=table.location is None,
        remote=state.catalog.remote_reader(table),
    )
    return ctx if state.hooks is None else state.hooks.answer_context(ctx)


async def table_credentials(request: Request, state: ServerState) -> Response:
    """Generate Temporary Table Credential (POST, optional ``location`` in the body)."""
    table = _table(request, state)
    body = _parse(TemporaryCredentialsRequest, await request.body(), "credentials request")
    args = (table, body.location, state.settings, state.clock.now_ms())
    secrets, answer = await run_in_threadpool(issue, *args)
    state.issued_credentials.append(secrets)
    return JSONResponse(answer, media_type="application/json; charset=utf-8")


async def table_version(request: Request, state: ServerState) -> Response:
    table = _table(request, state)
    ctx = _context(request, state, table)
    starting = request.query_params.get("startingTimestamp")

    def resolve() -> int:
        if starting is None:
            return ctx.log.latest_version()
        if not snapshot_at(ctx.log, table, None, check_files=False).metadata.cdf_enabled:
            raise history_not_shared(table.full_name)
        return version_at_or_after(ctx.log, table, starting, "startingTimestamp")

    version = await run_in_threadpool(resolve)
    return Response(status_code=200, headers={VERSION_HEADER: str(version)})


async def table_metadata(request: Request, state: ServerState) -> Response:
    ctx = _context(request, state, _table(request, state))
    version, timestamp = request.query_params.get("version"), request.query_params.get("timestamp")
    return stream(await run_in_threadpool(answer_metadata, ctx, version, timestamp), ctx.include_end_stream)


def _with_file_id_scheme(response: Response, scheme: str | None) -> Response:
    """Spec "File ID Hash Header": a valid ``fileidhash`` is echoed, lower case."""
    if scheme is not None:
        response.headers[FILE_ID_HASH_HEADER] = scheme
    return response


async def table_query(request: Request, state: ServerState) -> Response:
    ctx = _context(request, state, require_url(_table(request, state)))
    scheme = file_id_scheme(request.headers.get(FILE_ID_HASH_HEADER))
    query = _parse(QueryRequest, await request.body(), "query request")
    if state.queries.enabled(parse_capabilities(request.headers.get(CAPABILITIES_HEADER))):
        await run_in_threadpool(_check_versions, ctx, query)  # a bad request fails at submission
        return _query_status(status(state.queries.submit(_table_key(request), query), "pending"))
    return await _answer_query(ctx, query, scheme)


async def table_query_info(request: Request, state: ServerState) -> Response:
    """Get Query Info: the status of an asynchronous query, or (once succeeded) its files, paged."""
    ctx = _context(request, state, _table(request, state))
    scheme = file_id_scheme(request.headers.get(FILE_ID_HASH_HEADER))
    page = _parse(QueryInfoRequest, await request.body(), "query info request")
    found = state.queries.poll(_table_key(request), request.path_params["query_id"])
    if isinstance(found, dict):
        return _query_status(found)
    return await _answer_query(
        ctx, found.model_copy(update={"max_files": page.max_files, "page_token": page.page_token}), scheme
    )


def _parse(model: type[M], body: bytes, what: str) -> M:
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise malformed(f"invalid {what}: {problems}") from None


def _check_versions(ctx: Context, query: QueryRequest) -> None:
    query.validate_versions(ctx, snapshot_at(ctx.log, ctx.table, None, check_files=False).metadata.cdf_enabled)


async def _answer_query(ctx: Context, query: QueryRequest, scheme: str | None) -> Response:
    def answer() -> Answer:
        _check_versions(ctx, query)
        if query.starting_version is not None:
            return answer_query_changes(ctx, query)
        return answer_snapshot_query(ctx, query)

    return _with_file_id_scheme(stream(await run_in_threadpool(answer), ctx.include_end_stream), scheme)


def _table_key(request: Request) -> str:
    p = request.path_params
    return f"{p['share']}.{p['schema']}.{p['table']}".lower()


def _query_status(line: dict[str, Any]) -> Response:
    """A ``queryStatus`` line: no Delta-Table-Version (spec: only once the query has succeeded)."""
    body = json.dumps(line) + "\n"
    return Response(body, media_type=NDJSON_TYPE, headers={CAPABILITIES_HEADER: "asyncquery=true"})


async def table_changes(request: Request, state: ServerState) -> Response:
    ctx = _context(request, state, require_url(_table(request, state)))
    scheme = file_id_scheme(request.headers.get(FILE_ID_HASH_HEADER))
    q = request.query_params
    params = ChangesParams(
        starting_version=q.get("startingVersion"),
        starting_timestamp=q.get("startingTimestamp"),
        ending_version=q.get("endingVersion"),
        ending_timestamp=q.get("endingTimestamp"),
        include_historical_metadata=(q.get("includeHistoricalMetadata") or "").lower() == "true",
        include_historical_protocol=(q.get("includeHistoricalProtocol") or "").lower() == "true",
        max_files=q.get("maxFiles"),
        page_token=q.get("pageToken"),
    )
    response = stream(await run_in_threadpool(answer_changes, ctx, params), ctx.include_end_stream)
    return _with_file_id_scheme(response, scheme)


# ---------------------------------------------------------------- files and tokens


async def serve_file(request: Request, state: ServerState) -> Response:
    """A presigned file: checked signature and expiry, then the bytes (HEAD and Range supported)."""
    key = request.path_params["key"]
    try:
        state.signer.check_file(
            key, request.query_params.get("exp"), request.query_params.get("sig"), state.clock.now_ms()
        )
    except SignatureError as exc:
        raise forbidden(str(exc)) from None
    parts = key.split("/", 3)
    if len(parts) != 4:
        raise not_found(f"no file at {key}")
    share, schema, name, log_path = parts
    table = state.catalog.table(share, schema, name)
    path = state.catalog.log(table).file_path(log_path)
    if not path.is_file():
        raise not_found(f"file {log_path} of table {table.full_name} no longer exists")
    return FileResponse(path, media_type="application/octet-stream")


async def oauth_token(request: Request) -> Response:
    state: ServerState = request.app.state.sharing
    try:
        grant = state.auth.grant(request.headers.get("authorization"), await request.body(), state.clock.now_ms())
    except OAuthError as exc:
        return JSONResponse({"error": exc.error, "error_description": exc.description}, status_code=exc.status)
    return JSONResponse(grant.body(), headers={"Cache-Control": "no-store"})


# ---------------------------------------------------------------- errors


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    if request.method == "HEAD":
        return Response(status_code=exc.status, headers=exc.headers)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = RESOURCE_DOES_NOT_EXIST if exc.status_code == 404 else "METHOD_NOT_ALLOWED"
    return JSONResponse({"errorCode": code, "message": str(exc.detail)}, status_code=exc.status_code)


async def _log_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LogError)
    log.warning("cannot read the Delta log behind %s: %s", request.url.path, exc)
    return JSONResponse({"errorCode": INTERNAL_ERROR, "message": f"the table cannot be read: {exc}"}, status_code=500)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return JSONResponse({"errorCode": INTERNAL_ERROR, "message": ""}, status_code=500)


# ---------------------------------------------------------------- assembly


def create_app(state: ServerState) -> ASGIApp:
    """The ASGI app for ``state`` (its clock and queries stay adjustable while it serves)."""
    p = state.settings.prefix
    table = f"{p}/shares/{{share}}/schemas/{{schema}}/tables/{{table}}"
    routes = [
        Route(f"{p}/shares", _api(list_shares, state), methods=["GET"]),
        Route(f"{p}/shares/{{share}}", _api(get_share, state), methods=["GET"]),
        Route(f"{p}/shares/{{share}}/schemas", _api(list_schemas, state), methods=["GET"]),
        Route(f"{p}/shares/{{share}}/schemas/{{schema}}/tables", _api(list_tables, state), methods=["GET"]),
        Route(f"{p}/shares/{{share}}/all-tables", _api(list_all_tables, state), methods=["GET"]),
        # The deprecated HEAD form of "Query Table Version" (spec: migrating from HEAD to GET).
        Route(table, _api(table_version, state), methods=["HEAD"]),
        Route(f"{table}/version", _api(table_version, state), methods=["GET"]),
        Route(f"{table}/metadata", _api(table_metadata, state), methods=["GET"]),
        Route(f"{table}/query", _api(table_query, state), methods=["POST"]),
        Route(f"{table}/queries/{{query_id}}", _api(table_query_info, state), methods=["POST"]),
        Route(f"{table}/changes", _api(table_changes, state), methods=["GET"]),
        Route(f"{table}/temporary-table-credentials", _api(table_credentials, state), methods=["POST"]),
        Route(f"{state.settings.files_prefix}/{{key:path}}", _api_noauth(serve_file, state), methods=["GET", "HEAD"]),
        Route("/oauth/token", oauth_token, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            ApiError: _api_error,
            HTTPException: _http_error,
            LogError: _log_error,
            Exception: _internal_error,
        },
    )
    app.state.sharing = state
    return app if state.hooks is None else state.hooks.wrap(app, state.catalog, state.settings)


def _api_noauth(handler: Handler, state: ServerState) -> Callable[[Request], Awaitable[Response]]:
    """File URLs carry their own signature, like cloud presigned URLs: no bearer token."""

    async def endpoint(request: Request) -> Response:
        return await handler(request, state)

    return endpoint
