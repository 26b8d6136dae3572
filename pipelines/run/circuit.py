"""One circuit per provider per pass: a provider that is down costs one retry budget, not one per table.

Every call retries a connection failure for up to ``retry_total_seconds`` (120 s by default), so
a pass over 50 tables of a provider that stopped answering took 50 budgets. The first table to
find its provider down spends the budget; from then on, for the rest of the pass, the
provider's other tables fail at once with the same reason, and the next pass asks again.
"Down" is no answer at all (connection refused, reset, timed out: ``TransportError``) or a
gateway's answer for a server behind it that is gone (502, 503, 504), after retries. An answer
about one table (a 404, a 500 for a corrupt table, a refused feature) leaves the circuit closed.

:class:`ProviderCircuits` lives as long as one pass (``Syncer`` makes one per pass, ``status``
one per look); nothing is remembered between passes.
"""

from __future__ import annotations

import threading

from sharesync.sync.core.errors import ServerError, SharesyncError, TransportError

_GATEWAY_DOWN = frozenset({502, 503, 504})


def provider_down(exc: BaseException) -> bool:
    """Whether ``exc`` (after its retries) says the provider as a whole does not answer."""
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, ServerError) and exc.status in _GATEWAY_DOWN


class ProviderCircuits:
    """Which providers this pass found down, and why (thread-safe: tables sync in threads)."""

    def __init__(self) -> None:
        self._down: dict[str, SharesyncError] = {}
        self._lock = threading.Lock()

    def reason(self, provider: str) -> SharesyncError | None:
        """Why ``provider`` is down this pass (an error to raise, of the first one's class and
        carrying its message), or None while it answers."""
        with self._lock:
            found = self._down.get(provider)
        return found.within(f"provider '{provider}' is down (not asked again this pass)") if found else None

    def trip(self, provider: str, exc: BaseException) -> None:
        """Open ``provider``'s circuit when ``exc`` says it is down (the first reason is kept)."""
        if isinstance(exc, SharesyncError) and provider_down(exc):
            with self._lock:
                self._down.setdefault(provider, exc)
