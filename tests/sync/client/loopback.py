"""A tiny real HTTP server on 127.0.0.1 (stdlib ``http.server``) for the paths the sharing server has no
route for: redirects, and a token endpoint that checks JWT assertions. Every request is recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=dict)  # sent as JSON
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Seen], Reply]


class Loopback:
    """``with Loopback(handler) as server:`` serves ``handler`` at ``server.url`` until the block ends."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[Seen] = []
        outer = self

        class _Request(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen = Seen(self.command, self.path, dict(self.headers.items()), self.rfile.read(length))
                outer.seen.append(seen)
                reply = outer.handler(seen)
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                for name, value in {"Content-Type": "application/json", **reply.headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Request)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-http", daemon=True)

    def __enter__(self) -> Loopback:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
