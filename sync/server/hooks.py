"""Where a test double plugs into the sharing server; production passes none.

The server itself knows nothing of faults. The test suite's fault injection
(``tests/support/faults``) is handed to :class:`~sharesync.sync.server.runner.SharingServer` as a
:class:`ServerHooks`: it wraps the app in its middleware (errors, cut streams, lying answers) and
adjusts the context each answer is built with (another URL lifetime, files presigned unchecked).
"""

from __future__ import annotations

from typing import Protocol

from starlette.types import ASGIApp

from sharesync.sync.server.answers import Context
from sharesync.sync.server.catalog import Catalog
from sharesync.sync.server.settings import ServerSettings


class ServerHooks(Protocol):
    def wrap(self, app: ASGIApp, catalog: Catalog, settings: ServerSettings) -> ASGIApp:
        """``app`` inside the double's middleware (the outermost layer the server runs)."""

    def answer_context(self, ctx: Context) -> Context:
        """The context a ``/metadata``, ``/query`` or ``/changes`` answer is built with."""
