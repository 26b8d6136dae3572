"""Keep secrets out of every message, log line and stored row.

Three kinds of secret reach sharesync: bearer tokens and OAuth client secrets (from the
profile), presigned URL signatures (in every file URL a provider returns), and database
passwords (in state-store URLs). Known secret values are registered once when they are
loaded; URL query strings and userinfo passwords are recognised by shape. Everything that
turns into text for a person — exception messages, log records, run rows, Dagster
metadata — goes through :func:`redact`.

The registry of known secrets is process-wide on purpose, unlike every other setting: the log
handlers that must mask them belong to the process (any library's records, from any thread, pass
through them), and a secret must stay masked after the object that loaded it is gone — an error
raised by one config's run may be logged by another's. It only ever grows, so it holds no state
a caller could depend on being otherwise.
"""

from __future__ import annotations

import logging
import re
import threading

MASK = "***"

_lock = threading.Lock()
_secrets: set[str] = set()
# Longest first (a secret inside a longer one is masked with it), replaced as plain substrings:
# one regex alternation of every secret was compiled anew on each registration, which grew with
# the square of the secrets a long-running process registers (directory access gets new
# credentials every hour per table; a regex of 300 session tokens took seconds to compile).
_ordered: tuple[str, ...] = ()

# A URL's query string carries presigned signatures (X-Amz-Signature, sig=, se=, …): drop it whole.
_URL_QUERY = re.compile(r"(?P<base>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#\"'<>]+)\?[^\s\"'<>)]*")
# user:password@host in any URL (database URLs, proxies).
_URL_PASSWORD = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@")
# "Bearer abc…" in headers echoed into messages. Tokens are long; prose ("the bearer token is
# missing") is not, so only a run of 12+ token characters is masked.
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{12,}")
# Secret-looking key/value pairs in JSON ("key": "v") or form/query bodies (key=v) — and the
# ";token=…" of a Spark Connect URL (sc://host:443/;token=…); a plain "password: required" in a
# validation message is not a value and stays readable.
_SECRET_KEYS = r"(?:bearerToken|access_token|refresh_token|client_secret|clientSecret|password|token)"
_KEY_VALUE = re.compile(
    rf"(?i)(?P<key>[\"']{_SECRET_KEYS}[\"']\s*:\s*|\b{_SECRET_KEYS}=)"
    r"(?P<q>[\"']?)(?P<val>[^\"'&,\s}]+)"
)

# Shorter values are too likely to collide with ordinary words to be masked everywhere.
_MIN_SECRET_LENGTH = 6


def register_secret(value: str | None) -> None:
    """Remember a secret value so that :func:`redact` masks it wherever it appears."""
    global _ordered
    if not value or len(value) < _MIN_SECRET_LENGTH:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        at = next((i for i, held in enumerate(_ordered) if len(held) < len(value)), len(_ordered))
        _ordered = (*_ordered[:at], value, *_ordered[at:])


def redact(text: str) -> str:
    """Return ``text`` with every known or recognisable secret replaced by ``***``."""
    if not text:
        return text
    for secret in _ordered:  # a substring search each: fast in C, and most lines hold none
        if secret in text:
            text = text.replace(secret, MASK)
    text = _URL_QUERY.sub(lambda m: f"{m.group('base')}?{MASK}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{MASK}@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _KEY_VALUE.sub(lambda m: f"{m.group('key')}{m.group('q')}{MASK}", text)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that rewrites each record's message (and traceback text) redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.name or "").startswith(_BOTOCORE) and record.levelno <= logging.DEBUG:
            record.msg, record.args = "(botocore request details withheld)", None
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg = cleaned
            record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_installed = False
# botocore logs at DEBUG what its SigV4 signer signs, the signatures, the requests and the response
# bodies (an STS answer holds new credentials before anything could register them): directory-based
# access signs every file URL with it, so none of those records may reach a log.
_BOTOCORE = "botocore"


def install_log_redaction() -> None:
    """Redact every log record created in this process, whichever handler ends up writing it.

    A record factory (not a handler filter) is used because libraries attach their own
    handlers; the factory runs for every record before any handler sees it.
    """
    global _installed
    if _installed:
        return
    _installed = True
    base_factory = logging.getLogRecordFactory()
    redacting = RedactingFilter()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = base_factory(*args, **kwargs)
        redacting.filter(record)
        return record

    logging.setLogRecordFactory(factory)
