"""Another host, as far as the state store can tell: own host name, and a wall clock off by minutes.

``python -m support.skewed_host SKEW_SECONDS HOST URL NAME COMMAND…`` runs one lease command in
a process whose Python wall clock (``time.time``, ``datetime.now``/``utcnow``/``today``) is
``SKEW_SECONDS`` ahead (negative: behind), installed before sharesync is imported, so any lease
time taken from the host's clock instead of the database's would carry the skew. Commands:

* ``acquire TTL`` — try to take the lease; print one JSON line (won/held, expiry, message).
* ``hold TTL`` — take the lease and start a run, print ``holding``; on each stdin line try to
  advance the checkpoint to version 1 under that lease (then finish the run as failed, as a
  batch does) and print the outcome as JSON. For a holder frozen with SIGSTOP.
"""

from __future__ import annotations

import datetime as _datetime_module
import json
import sys
import time as _time_module
from typing import Any

_REAL_DATETIME = _datetime_module.datetime
_REAL_TIME, _REAL_TIME_NS = _time_module.time, _time_module.time_ns


def install_skew(seconds: float) -> None:
    """Shift this process's wall clock by ``seconds`` (monotonic clocks are left alone)."""

    class _Meta(type):
        def __instancecheck__(cls, obj: object) -> bool:  # values from drivers are real datetimes
            return isinstance(obj, _REAL_DATETIME)

    class SkewedDatetime(_REAL_DATETIME, metaclass=_Meta):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return _REAL_DATETIME.now(tz) + _datetime_module.timedelta(seconds=seconds)

        @classmethod
        def utcnow(cls) -> Any:
            return _REAL_DATETIME.utcnow() + _datetime_module.timedelta(seconds=seconds)  # noqa: DTZ003

        @classmethod
        def today(cls) -> Any:
            return cls.now()

    _datetime_module.datetime = SkewedDatetime  # type: ignore[misc]
    _time_module.time = lambda: _REAL_TIME() + seconds
    _time_module.time_ns = lambda: _REAL_TIME_NS() + int(seconds * 1e9)


def main(argv: list[str]) -> None:
    skew, host, url, name, command, ttl = float(argv[0]), argv[1], argv[2], argv[3], argv[4], float(argv[5])
    install_skew(skew)
    import dataclasses
    from datetime import UTC, datetime, timedelta

    from sharesync.state import RunStatus, open_store, this_process
    from sharesync.sync.core.errors import LeaseHeld, StateError
    from support.state import make_checkpoint

    host_clock = datetime.now(UTC)
    real_clock = _REAL_DATETIME.now(UTC)
    assert abs((host_clock - real_clock).total_seconds() - skew) < 5, "the skew is not installed"
    store = open_store(url)
    holder = dataclasses.replace(this_process(), host=host)
    if command == "acquire":
        try:
            lease = store.acquire_lease(name, f"{host}-owner", timedelta(seconds=ttl), holder=holder)
        except LeaseHeld as held:
            print(json.dumps({"outcome": "held", "message": str(held)}), flush=True)
            return
        print(json.dumps({"outcome": "won", "expires_at": lease.expires_at.isoformat()}), flush=True)
        return
    assert command == "hold"
    lease = store.acquire_lease(name, f"{host}-owner", timedelta(seconds=ttl), holder=holder)
    run_id = store.start_run(name, start_version=0, end_version=1, lease=lease)
    print("holding", flush=True)
    for _line in sys.stdin:
        try:
            store.advance_checkpoint(make_checkpoint(name, 1), expected_version=None, lease=lease)
            outcome: dict[str, str] = {"advance": "committed"}
        except StateError as refused:
            outcome = {"advance": type(refused).__name__, "message": str(refused)}
        try:
            store.finish_run(run_id, RunStatus.FAILED, error="stale holder")
            outcome["finish"] = "recorded"
        except StateError as closed:
            outcome["finish"] = type(closed).__name__
        print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
