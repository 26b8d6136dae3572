"""Any exception inside one table's run becomes that table's failure: classified and redacted.

sharesync's own errors carry their class: ``Permanent`` ones need a person to change something,
the others may pass on a later attempt. Anything else was raised by a library. From the Spark
Connect client (gRPC) or the operating system (a reset socket, a full disk) it is transient:
the engine, the network or the disk may recover by the next pass. Anything else is a bug, and
permanent: the same input meets it again.

Every failed attempt is on record, so ``status``, the run history and Dagster show the last
outcome: a batch's run records its own failure; a failure before the first batch (a config that
does not fit the shared table, a failed metadata or version call, a lease held elsewhere) is
recorded as one finished failed run by :func:`record_failure`.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.sync.core.errors import Permanent, SharesyncError, StateStoreUnavailable, exception_line
from sharesync.sync.core.redact import redact

if TYPE_CHECKING:
    from pyspark.errors.exceptions.connect import SparkConnectException

    from sharesync.state import StateStore

log = logging.getLogger(__name__)

# The record of a run stopped by Ctrl+C (SIGINT), in place of "KeyboardInterrupt: ".
INTERRUPTED = (
    "interrupted (Ctrl+C) before it finished; the next sync continues from the checkpoint (none: bootstraps anew)"
)

# Spark Connect error classes that say the session cannot be used again: closed on the client
# (NO_ACTIVE_SESSION), or unknown to the server, e.g. after a restart (INVALID_HANDLE.*).
_SESSION_GONE = ("NO_ACTIVE_SESSION", "INVALID_HANDLE")


def describe(exc: BaseException) -> str:
    """The one-line, redacted text recorded and shown for ``exc``; the rest of a library's long
    message stays in the log's traceback (``-v``)."""
    if isinstance(exc, SharesyncError):
        return redact(str(exc))
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    line, more = exception_line(exc)
    return redact(line + (" (more in the log at -v)" if more else ""))


def is_transient(exc: BaseException) -> bool:
    """Whether a later attempt may succeed without anyone changing anything."""
    if isinstance(exc, SharesyncError):
        return not isinstance(exc, Permanent)
    return isinstance(exc, OSError) or _spark_connect_error(exc) is not None


def session_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says the Spark Connect session is unusable: closed, or its server gone."""
    error = _spark_connect_error(exc)
    if error is None:
        return False
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    if (error.getCondition() or "").startswith(_SESSION_GONE):
        return True
    # The server does not answer at all (stopped, crashed, or its port closed).
    return isinstance(error, SparkConnectGrpcException) and str(error.getGrpcStatusCode().name) == "UNAVAILABLE"


def _spark_connect_error(exc: BaseException) -> SparkConnectException | None:
    module = sys.modules.get("pyspark.errors.exceptions.connect")
    if module is None or getattr(module.__spec__, "_initializing", False):
        # Not imported (or another thread is importing it): nothing raised one. Importing it here
        # could race that thread through pyspark's import cycles.
        return None
    from pyspark.errors.exceptions.connect import SparkConnectException

    return exc if isinstance(exc, SparkConnectException) else None


@dataclass
class Attempt:
    """One attempt at a table: whether a run record already holds its failure."""

    recorded: bool = False


def record_failure(
    store: StateStore, name: str, exc: BaseException, *, checkpoint: int | None, source: int | None
) -> None:
    """Put a failure that no run recorded on record; a store that fails too is only logged."""
    start = checkpoint + 1 if checkpoint is not None and source is not None and checkpoint < source else None
    try:
        store.record_failed_run(name, describe(exc), start_version=start, end_version=source)
    except SharesyncError as error:
        store_failed(f"could not record the failure of {name}", error, exc)


def store_failed(what: str, error: SharesyncError, original: BaseException) -> None:
    """Log, on one line, that the state store failed while ``original`` was being put on record.

    The table's result reports ``original`` already; when both are the store being unreachable,
    this adds nothing a user needs (info, ``-v``), otherwise it is a warning. The stack is about
    our own error handling, so it is kept for ``-vv``.
    """
    same_outage = isinstance(error, StateStoreUnavailable) and isinstance(original, StateStoreUnavailable)
    log.log(logging.INFO if same_outage else logging.WARNING, "%s: %s", what, describe(error))
    log.debug("%s", what, exc_info=error)
