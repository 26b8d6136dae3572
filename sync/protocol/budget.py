"""One pass's shared limits: file downloads in flight, and downloaded bytes held in memory.

Tables synced in parallel each run their own downloader (its own event loop, in its own
thread) and their own stager. A :class:`TransferBudget` handed to all of them bounds the pass
as a whole, so eight tables at once neither open eight times the connections nor hold eight
batches in memory.

* **Download slots** are taken by coroutines on different event loops, so an ``asyncio``
  semaphore (one loop) cannot be shared and a blocking ``threading`` semaphore would stall a
  loop. A freed slot is handed straight to the oldest waiter, on that waiter's loop; a waiter
  cancelled in between gives it back.
* **Bytes** are reserved by a batch for as long as it holds its files in memory (merge-mode
  netting), all at once and first come, first served: a batch never waits while holding part of
  the budget, so two batches cannot deadlock, and one larger than the whole budget waits until
  it runs alone.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class TransferBudget:
    """At most ``max_downloads`` downloads at once and ``max_bytes`` held, over every user of it."""

    def __init__(self, max_downloads: int, max_bytes: int) -> None:
        if max_downloads < 1 or max_bytes < 1:
            raise ValueError("a transfer budget needs at least one download slot and one byte")
        self.max_downloads = max_downloads
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._free = max_downloads
        self._waiters: deque[_Waiter] = deque()
        self._memory = threading.Condition()
        self._held = 0
        self._tickets = itertools.count()
        self._queue: deque[int] = deque()  # reservations waiting, oldest first

    # ------------------------------------------------------------ download slots

    @asynccontextmanager
    async def download_slot(self) -> AsyncIterator[None]:
        """Hold one of the pass's download slots (waits, without blocking the loop, for a free one)."""
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    @property
    def downloads_in_flight(self) -> int:
        with self._lock:
            return self.max_downloads - self._free

    async def _acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            future: asyncio.Future[None] = loop.create_future()
            waiter = (loop, future)
            self._waiters.append(waiter)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                queued = waiter in self._waiters
                if queued:
                    self._waiters.remove(waiter)
            # Handed a slot already (its grant ran) but cancelled before it resumed: give it back.
            # A grant still to run finds the future cancelled and gives it back itself.
            if not queued and not future.cancelled():
                self._release()
            raise

    def _release(self) -> None:
        """Hand the slot to the oldest waiter, or free it."""
        while True:
            with self._lock:
                if not self._waiters:
                    self._free += 1
                    return
                loop, future = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(self._grant, future)
                return
            except RuntimeError:  # that waiter's loop is closed: try the next one
                continue

    def _grant(self, future: asyncio.Future[None]) -> None:
        """On the waiter's loop: wake it, or pass the slot on if it gave up meanwhile."""
        if future.cancelled():
            self._release()
        else:
            future.set_result(None)

    # ------------------------------------------------------------ bytes in memory

    @contextmanager
    def holding(self, nbytes: int) -> Iterator[None]:
        """Reserve ``nbytes`` (at most the whole budget) for the block; blocks until they fit, in turn."""
        wanted = min(max(nbytes, 0), self.max_bytes)
        with self._memory:
            ticket = next(self._tickets)
            self._queue.append(ticket)
            try:
                self._memory.wait_for(lambda: self._queue[0] == ticket and self._held + wanted <= self.max_bytes)
            finally:
                self._queue.remove(ticket)
                self._memory.notify_all()  # the next in line may fit too
            self._held += wanted
        try:
            yield
        finally:
            with self._memory:
                self._held -= wanted
                self._memory.notify_all()

    @property
    def bytes_held(self) -> int:
        with self._memory:
            return self._held
