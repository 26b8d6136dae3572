"""The errors the sharing server answers with, worded like the reference server's.

The reference server (delta-io/delta-sharing, ``DeltaSharingService.scala``) answers every
failure with ``{"errorCode": ..., "message": ...}``; clients match on the status and the code,
so the codes and, where clients parse them, the messages stay close to the reference.
"""

from __future__ import annotations

from typing import Any

from sharesync.sync.protocol.wire import ErrorBody

RESOURCE_DOES_NOT_EXIST = "RESOURCE_DOES_NOT_EXIST"
INVALID_PARAMETER_VALUE = "INVALID_PARAMETER_VALUE"
MALFORMED_REQUEST = "MALFORMED_REQUEST"
UNSUPPORTED_OPERATION = "UNSUPPORTED_OPERATION"
UNAUTHENTICATED = "UNAUTHENTICATED"
PERMISSION_DENIED = "PERMISSION_DENIED"
INTERNAL_ERROR = "INTERNAL_ERROR"
TEMPORARILY_UNAVAILABLE = "TEMPORARILY_UNAVAILABLE"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"


class ApiError(Exception):
    """An error answer: HTTP status, reference error code and a message for the user."""

    def __init__(self, status: int, error_code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return ErrorBody(error_code=self.error_code, message=self.message).to_wire()


def not_found(message: str) -> ApiError:
    return ApiError(404, RESOURCE_DOES_NOT_EXIST, message)


def invalid(message: str) -> ApiError:
    return ApiError(400, INVALID_PARAMETER_VALUE, message)


def malformed(message: str) -> ApiError:
    return ApiError(400, MALFORMED_REQUEST, message)


def unsupported(message: str) -> ApiError:
    return ApiError(400, UNSUPPORTED_OPERATION, message)


def unauthenticated(message: str) -> ApiError:
    return ApiError(401, UNAUTHENTICATED, message, {"WWW-Authenticate": "Bearer"})


def forbidden(message: str) -> ApiError:
    return ApiError(403, PERMISSION_DENIED, message)


def history_unavailable(
    table: str, earliest: int, *, version: int | None = None, timestamp: str | None = None, latest: int | None = None
) -> ApiError:
    """Versions no longer served (log cleaned up / files vacuumed): the client re-bootstraps.

    The phrase "is not available" and the earliest version are the contract with the client
    (``sharesync.sync.core.errors.HistoryUnavailable``); the last sentence is the reference server's.
    """
    subject = f"Version {version}" if version is not None else f"The version at timestamp {timestamp}"
    span = f" (latest {latest})" if latest is not None else ""
    return invalid(
        f"{subject} of table {table} is not available: the earliest available version is "
        f"{earliest}{span}; older history was removed by log cleanup or VACUUM. "
        f"You can only query table changes since version {earliest}."
    )


def cdf_disabled(table: str) -> ApiError:
    return invalid(f"cdf is not enabled on table {table}")


def history_not_shared(table: str) -> ApiError:
    return invalid(
        "Reading table by version or timestamp is not supported because change data feed "
        f"is not enabled on table: {table}"
    )
