"""Keeping a lease alive while work runs: a heartbeat thread with an honest failure mode.

A sync can run far longer than any sensible lease ttl, and the ttl must stay short so a
crashed holder on another host is taken over quickly. So the holder renews every ``ttl / 3``
from a daemon thread. If renewal fails for good — someone else took the lease, or the
database stayed unreachable until the lease must be presumed expired — the keeper records it
and :meth:`LeaseKeeper.check` raises :class:`LeaseHeld`; the worker checks between batches,
and lease-guarded checkpoint advances refuse on their own. The thread never kills the work.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Protocol

from sharesync.state.records import Lease, Takeover
from sharesync.sync.core.errors import LeaseHeld, StateError

log = logging.getLogger("sharesync.state")


class Renews(Protocol):
    """What the keeper needs of the store (the store is built on top of this module)."""

    def renew_lease(self, lease: Lease, ttl: timedelta | None = None) -> Lease: ...


class LeaseKeeper:
    """Renews one lease from a daemon thread until :meth:`stop`; remembers if it was lost.

    ``takeover`` says whether the lease was taken from a holder found dead on this host, so
    the worker can tell the user whose sync it replaces.
    """

    def __init__(
        self, store: Renews, lease: Lease, renew_every: timedelta, *, takeover: Takeover | None = None
    ) -> None:
        if renew_every <= timedelta(0) or renew_every >= lease.ttl:
            raise ValueError(f"renew_every must be positive and shorter than the lease ttl {lease.ttl}")
        self._store = store
        self._ttl = lease.ttl
        self._interval = renew_every.total_seconds()
        self._lock = threading.Lock()
        self._lease = lease
        self._takeover = takeover
        self._lost_reason: str | None = None
        self._stopping = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-keeper:{lease.name}", daemon=True)

    @property
    def lease(self) -> Lease:
        """The lease as last renewed (pass it to ``advance_checkpoint(..., lease=...)``)."""
        with self._lock:
            return self._lease

    @property
    def takeover(self) -> Takeover | None:
        """The dead holder this lease was taken from at acquisition, if it was."""
        return self._takeover

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def check(self) -> None:
        """Raise :class:`LeaseHeld` if the lease is lost; call it between units of work."""
        if self._lost.is_set():
            raise LeaseHeld(self._lost_reason or f"lease of {self._lease.name} was lost")

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the lease is lost or ``timeout`` passes; True if lost."""
        return self._lost.wait(timeout)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _mark_lost(self, reason: str) -> None:
        self._lost_reason = reason
        self._lost.set()
        log.error("%s", reason)

    def _run(self) -> None:
        # Until a renewal succeeds, the lease is only safe until it expires as last renewed;
        # judged on the monotonic clock from the moment the last successful request started.
        deadline = time.monotonic() + self._ttl.total_seconds()
        while not self._stopping.wait(self._interval):
            started = time.monotonic()
            try:
                renewed = self._store.renew_lease(self.lease, self._ttl)
            except LeaseHeld as error:
                self._mark_lost(str(error))
                return
            except StateError as error:
                if time.monotonic() >= deadline:
                    self._mark_lost(
                        f"lease of {self._lease.name} presumed lost: could not renew it before it expired ({error})"
                    )
                    return
                log.warning("renewing the lease of %s failed, will retry: %s", self._lease.name, error)
                continue
            except Exception as error:  # noqa: BLE001 - a dead heartbeat must be visible, not silent
                self._mark_lost(f"lease of {self._lease.name} presumed lost: renewal crashed with {error!r}")
                return
            with self._lock:
                self._lease = renewed
            deadline = started + self._ttl.total_seconds()
