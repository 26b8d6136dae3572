"""Run the sharing server in a background thread (tests, demo, benchmarks) or in the foreground (CLI).

``with SharingServer(root) as server:`` starts uvicorn on 127.0.0.1 and a free port, returns
once the socket accepts connections (a startup event, no sleeping), and stops cleanly on
exit. ``restart()`` stops and starts again on the same port with the same signing secret and
clock, the way a provider restart looks to a client: in-flight requests fail, URLs issued
before stay valid. ``queries`` and ``clock`` are live: change them while the server runs. A test
double's fault injection is passed in as ``hooks`` (:mod:`sharesync.sync.server.hooks`).
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from sharesync.sync.core.redact import register_secret
from sharesync.sync.protocol.profile import write_profile_file
from sharesync.sync.server.app import create_app
from sharesync.sync.server.asyncqueries import AsyncQueries
from sharesync.sync.server.hooks import ServerHooks
from sharesync.sync.server.serving import Clock, ServerState
from sharesync.sync.server.settings import DEFAULT_PREFIX, ServerSettings
from sharesync.sync.server.signing import Signer

DEFAULT_HOST = "127.0.0.1"


class _Server(uvicorn.Server):
    """uvicorn that reports startup through an event (it handles signals only in the main thread)."""

    def __init__(self, config: uvicorn.Config, started: threading.Event) -> None:
        super().__init__(config)
        self._started_event = started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self._started_event.set()


class SharingServer:
    """A local Delta Sharing server over ``root`` (``ROOT/<share>/<schema>/<table>``)."""

    def __init__(
        self,
        root: Path | str,
        *,
        token: str | None = None,
        host: str = DEFAULT_HOST,
        port: int = 0,
        prefix: str = DEFAULT_PREFIX,
        hooks: ServerHooks | None = None,
        ssl_certfile: Path | str | None = None,
        ssl_keyfile: Path | str | None = None,
        **settings: Any,
    ) -> None:
        self.root = Path(root)
        # HTTPS when given a certificate (PEM) and its key: for testing TLS verification.
        self.ssl_certfile, self.ssl_keyfile = ssl_certfile, ssl_keyfile
        self.token = token if token is not None else f"sharesync-{secrets.token_urlsafe(16)}"
        register_secret(self.token)
        self.host = host
        self.port = port
        self.hooks = hooks
        self.clock = Clock()
        self.queries = AsyncQueries()  # asynchronous queries: off until a test or --async-after-polls turns them on
        self.settings = ServerSettings(root=self.root, prefix=prefix, bearer_token=self.token, **settings)
        self._signer = Signer()
        self.profile_path: Path | None = None  # the last bearer-token profile write_profile() wrote
        self._server: _Server | None = None
        self._state: ServerState | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- addresses and profiles

    @property
    def base_url(self) -> str:
        scheme = "https" if self.ssl_certfile else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def credentials_issued(self) -> int:
        """Generate Temporary Table Credential answers so far (directory-based access)."""
        return len(self.issued_credentials())

    def issued_credentials(self) -> list[tuple[str, ...]]:
        """The secret values of every temporary credential handed out (for leak scans)."""
        return list(self._state.issued_credentials) if self._state is not None else []

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}{self.settings.prefix}"

    @property
    def token_endpoint(self) -> str:
        return f"{self.base_url}/oauth/token"

    def profile(self, *, oauth: bool = False) -> dict[str, Any]:
        """A profile for this server (spec "Profile File Format"), bearer or OAuth client credentials."""
        if oauth:
            return {
                "shareCredentialsVersion": 2,
                "type": "oauth_client_credentials",
                "endpoint": self.endpoint,
                "tokenEndpoint": self.token_endpoint,
                "clientId": self.settings.oauth_client_id,
                "clientSecret": self.settings.oauth_client_secret,
            }
        return {"shareCredentialsVersion": 1, "endpoint": self.endpoint, "bearerToken": self.token}

    def write_profile(self, path: Path | str, *, oauth: bool = False) -> Path:
        """Write this server's profile, readable by its owner alone (it holds the token)."""
        path = write_profile_file(path, self.profile(oauth=oauth))
        if not oauth:
            self.profile_path = path
        return path

    def issued_access_tokens(self) -> list[str]:
        """OAuth access tokens this server issued since it last started (and still valid)."""
        return self._state.auth.issued_tokens() if self._state is not None else []

    # -- lifecycle

    def _bind(self) -> socket.socket:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the proto
        # says TCP; without it every response body waits ~40 ms behind its headers (Nagle).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)  # connections queue from now on, even before uvicorn runs
        self.port = sock.getsockname()[1]
        return sock

    def _config(self) -> uvicorn.Config:
        self._state = state = ServerState(self.settings, self._signer, self.clock, self.queries, hooks=self.hooks)
        return uvicorn.Config(
            create_app(state),
            log_level="warning",
            lifespan="off",
            loop="asyncio",
            timeout_graceful_shutdown=2,
            access_log=False,
            ssl_certfile=str(self.ssl_certfile) if self.ssl_certfile else None,
            ssl_keyfile=str(self.ssl_keyfile) if self.ssl_keyfile else None,
        )

    def start(self) -> SharingServer:
        """Serve in a daemon thread; returns once the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        sock = self._bind()
        started = threading.Event()
        self._server = server = _Server(self._config(), started)
        self._error = None

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # noqa: BLE001 - surfaced by start() in the caller thread
                self._error = exc
            finally:
                sock.close()
                started.set()

        self._thread = threading.Thread(target=run, name=f"sharing-server-{self.port}", daemon=True)
        self._thread.start()
        started.wait()
        if self._error is not None or not server.started:
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"the sharing server did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        """Stop serving; open connections are closed (idle ones at once, busy ones after 2 s)."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join()
        self._server = self._thread = None

    def restart(self) -> None:
        """Stop and start again on the same port (same secret, clock and hooks)."""
        self.stop()
        self.start()

    def serve_forever(self, on_ready: Callable[[SharingServer], None] | None = None) -> None:
        """Serve in the calling thread until interrupted (``sharesync serve``).

        ``on_ready`` runs once the port is bound (so a port 0 is known), before serving starts.
        """
        sock = self._bind()
        if on_ready is not None:
            on_ready(self)
        server = _Server(self._config(), threading.Event())
        try:
            asyncio.run(server.serve(sockets=[sock]))
        finally:
            sock.close()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def __enter__(self) -> SharingServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
