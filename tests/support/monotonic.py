"""A fake monotonic clock for code that takes ``clock`` and ``sleep`` callables (retries, ``sync --every``)."""

from __future__ import annotations


class FakeClock:
    """Monotonic time that only moves when the code under test sleeps (or a test moves ``now``)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)
