"""The local sharing server with fault injection plugged in: what the test suite runs.

:class:`SharingServer` is :class:`sharesync.sync.server.runner.SharingServer` (real HTTP, the
production routes) with a :class:`~support.faults.knobs.Faults` as its hooks; ``server.faults``
is live — change it while the server runs — and :meth:`SharingServer.reset` forgets it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sharesync.sync.server import runner
from support.faults.knobs import Faults


class SharingServer(runner.SharingServer):
    def __init__(self, root: Path | str, *, faults: Faults | None = None, **options: Any) -> None:
        self.faults = faults if faults is not None else Faults()
        super().__init__(root, hooks=self.faults, **options)

    def reset(self) -> None:
        """Forget injected faults (the URL lifetime too), asynchronous queries and clock moves
        (the shared test server is reset around every test)."""
        self.faults.reset()
        self.faults.url_ttl_seconds = None
        self.queries.reset()
        self.clock.offset_ms = 0
