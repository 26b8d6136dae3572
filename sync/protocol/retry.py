"""How long to keep trying a call that failed with a :class:`~sharesync.sync.core.errors.Retryable` error.

A :class:`RetryBudget` is the state of one logical call, not a loop: the caller's loop does the
I/O and hands each failure to :meth:`RetryBudget.failed`, which waits or re-raises. That lets a
budget live inside a generator that resumes a broken stream (:mod:`sharesync.sync.protocol.ndjson`)
and inside an async download. The waits are full-jitter exponential backoff (uniform in
``[0, initial * 2^(n-1)]``, capped), except that a server's ``Retry-After`` is honoured exactly;
a wait that would cross the total time bound is not started.

A failure to connect at all (:class:`~sharesync.sync.core.errors.ConnectFailed`: refused, timed
out, no such host) is announced as a warning at each retry, naming the policy's ``subject`` (the
provider and its address), so a provider that is down shows at once instead of after the whole
budget; other retries are routine and logged at info.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from sharesync.sync.core.errors import (
    ConfigError,
    ConnectFailed,
    RateLimited,
    Retryable,
    ServerError,
    SharesyncError,
)
from sharesync.sync.core.redact import redact

logger = logging.getLogger(__name__)

T = TypeVar("T")
N = TypeVar("N", int, float)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


async def _async_sleep(seconds: float) -> None:
    import asyncio  # here, not at the top: only downloads are async, and a no-op sync never imports asyncio

    await asyncio.sleep(seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying a Retryable failure. ``sleep``/``clock`` are injectable for tests;
    ``subject`` names who is called in retry notices ("provider partner (https://host:443)")."""

    max_attempts: int = 8
    total_seconds: float = 120.0
    initial_backoff: float = 0.5
    max_backoff: float = 30.0
    subject: str = ""
    sleep: Callable[[float], None] = field(default=_sleep, repr=False, compare=False)
    async_sleep: Callable[[float], Awaitable[None]] = field(default=_async_sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        """Defaults, overridden by ``SHARESYNC_RETRY_MAX_ATTEMPTS`` / ``SHARESYNC_RETRY_TOTAL_SECONDS``."""
        env = os.environ if environ is None else environ
        defaults = cls()
        return cls(
            max_attempts=env_number(env, "SHARESYNC_RETRY_MAX_ATTEMPTS", int, defaults.max_attempts),
            total_seconds=env_number(env, "SHARESYNC_RETRY_TOTAL_SECONDS", float, defaults.total_seconds),
        )

    def budget(self, context: str) -> RetryBudget:
        return RetryBudget(self, context)


@dataclass(frozen=True)
class PollPolicy:
    """How an asynchronous query is polled: waits doubling from ``initial`` up to ``max_wait``,
    for at most ``timeout`` seconds in all (spec "Get Query Info": poll while ``pending``)."""

    initial: float = 0.5
    max_wait: float = 10.0
    timeout: float = 1800.0
    sleep: Callable[[float], None] = field(default=_sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PollPolicy:
        """Defaults, overridden by ``SHARESYNC_ASYNC_POLL_SECONDS`` (first wait) and ``SHARESYNC_ASYNC_TIMEOUT_SECONDS``."""
        env = os.environ if environ is None else environ
        defaults = cls()
        return cls(
            initial=env_number(env, "SHARESYNC_ASYNC_POLL_SECONDS", float, defaults.initial),
            timeout=env_number(env, "SHARESYNC_ASYNC_TIMEOUT_SECONDS", float, defaults.timeout),
        )

    def waits(self) -> Iterator[float]:
        """The wait before each next poll; ends when the next one would cross ``timeout``."""
        deadline = self.clock() + self.timeout
        wait = self.initial
        while self.clock() + wait <= deadline:
            yield wait
            wait = min(wait * 2, self.max_wait)


def env_number(env: Mapping[str, str], key: str, kind: Callable[[str], N], default: N) -> N:
    """``env[key]`` as a number, ``default`` when unset; a clear ConfigError when not a number."""
    if not env.get(key):
        return default
    try:
        return kind(env[key])
    except ValueError:
        raise ConfigError(f"{key}={env[key]!r} is not a number; unset it or give e.g. 5") from None


class RetryBudget:
    """The retry state of one logical call: ``failed(exc)`` waits before the next attempt or re-raises.

    ``exc`` is re-raised when it is not Retryable, when the attempts are used up, or when the next
    wait would end after the total bound (stopping before such a wait, not after it). The bound
    counts from the first failure: a download or a page that streamed for minutes before its
    connection reset is still retried.
    """

    def __init__(self, policy: RetryPolicy, context: str) -> None:
        self.policy = policy
        self.context = context
        self.attempts = 1
        self._deadline: float | None = None

    def next_wait(self, exc: BaseException) -> float:
        """Seconds to wait before trying again; raises ``exc`` if there is no next attempt."""
        if not isinstance(exc, Retryable) or self.attempts >= self.policy.max_attempts:
            raise exc
        if self._deadline is None:
            self._deadline = self.policy.clock() + self.policy.total_seconds
        wait = self._wait(exc)
        if self.policy.clock() + wait > self._deadline:
            raise exc
        self.attempts += 1
        if isinstance(exc, ConnectFailed):  # nothing answers: say so now, not after the whole budget
            who = self.policy.subject or self.context
            logger.warning(
                "%s: %s%s; retry %d of %d in %s s",
                who,
                exc.reason,
                f" at {exc.origin}" if exc.origin and f"({exc.origin})" not in who else "",  # e.g. a token endpoint
                self.attempts,
                self.policy.max_attempts,
                f"{wait:.0f}" if wait >= 10 else f"{wait:.2g}",
            )
            return wait
        logger.info(  # info, not warning: a retried call that then succeeds is routine
            "%s failed (%s); attempt %d of %d in %.2fs",
            self.context,
            redact(str(exc)),
            self.attempts,
            self.policy.max_attempts,
            wait,
        )
        return wait

    def failed(self, exc: BaseException) -> None:
        self.policy.sleep(self.next_wait(exc))

    async def failed_async(self, exc: BaseException) -> None:
        await self.policy.async_sleep(self.next_wait(exc))

    def _wait(self, exc: BaseException) -> float:
        retry_after = exc.retry_after if isinstance(exc, RateLimited | ServerError) else None
        if retry_after is not None and retry_after >= 0:
            return retry_after  # the server said when; never earlier (RFC 9110 §10.2.3)
        ceiling = min(self.policy.max_backoff, self.policy.initial_backoff * 2 ** (self.attempts - 1))
        return random.uniform(0, ceiling)


def call_with_retries(policy: RetryPolicy, context: str, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` until it succeeds or the budget says stop."""
    budget = policy.budget(context)
    while True:
        try:
            return attempt()
        except SharesyncError as exc:
            budget.failed(exc)
