"""Turn a failed sync into the Dagster failure that says what happened and whether to retry.

Dagster stores an exception's message, class and cause chain in the run's event log. A
sharesync error's message is already redacted, but its ``__cause__`` (an httpx error, a
driver error) may carry a presigned URL or a DSN, so the failure raised here is cut from
the chain and carries only redacted text. Permanent errors (config, auth, breaking schema
change, a bug: :func:`~sharesync.pipelines.run.failures.is_transient`) bypass the op's retry
policy; transient ones use it, waiting at least as long as the provider's ``Retry-After`` asked.
"""

from __future__ import annotations

import traceback
from typing import NoReturn

import dagster as dg

from sharesync.pipelines.run.failures import describe, is_transient
from sharesync.sync.core.errors import Retryable, SharesyncError
from sharesync.sync.core.redact import redact

__all__ = ["describe", "raise_for"]


def raise_for(exc: BaseException, table: str, policy: dg.RetryPolicy | None) -> NoReturn:
    """Re-raise ``exc`` as a Dagster :class:`~dagster.Failure` (or retry request), redacted."""
    message = f"{table}: {describe(exc)}"
    permanent = not is_transient(exc)
    metadata: dict[str, dg.RawMetadataValue] = {
        "error_class": type(exc).__name__,
        "retryable": isinstance(exc, Retryable),
    }
    if not isinstance(exc, SharesyncError):
        # Not ours (a Spark or library error, or a bug): keep the stack for whoever debugs it.
        metadata["traceback"] = dg.MetadataValue.text(redact("".join(traceback.format_exception(exc))))
    failure = dg.Failure(description=message, metadata=metadata, allow_retries=not permanent)
    wait = getattr(exc, "retry_after", None)
    if policy is not None and not permanent and isinstance(wait, int | float) and wait > 0:
        delay = max(float(wait), float(policy.delay or 0))
        raise dg.RetryRequested(max_retries=policy.max_retries, seconds_to_wait=delay) from failure
    raise failure from None
