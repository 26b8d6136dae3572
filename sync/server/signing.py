"""HMAC signatures with expiry: presigned file URLs, page tokens and refresh tokens.

A real provider hands out cloud-storage URLs that stop working after a while; clients must
cope (refresh, retry). The local server reproduces that with one per-server secret: a file URL
carries ``exp`` (epoch ms) and ``sig`` = HMAC(secret, file key + exp) and is refused after
``exp`` or when tampered with. Page and refresh tokens are signed JSON for the same reason the
reference server validates its tokens: a client must not forge a position or a version.
Pure functions of (secret, inputs, now); no HTTP here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any


class SignatureError(Exception):
    """A file URL or token was refused; ``expired`` tells "too late" from "not ours"."""

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    """Signs and checks with one secret; keep the instance to keep URLs valid across restarts."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def _mac(self, message: str) -> str:
        return hmac.new(self._secret, message.encode("utf-8"), hashlib.sha256).hexdigest()

    # -- file URLs

    def sign_file(self, key: str, expires_ms: int) -> str:
        return self._mac(f"file\n{key}\n{expires_ms}")

    def check_file(self, key: str, exp: str | None, sig: str | None, now_ms: int) -> None:
        """Accept a (key, exp, sig) triple or raise :class:`SignatureError`."""
        if not exp or not sig or not exp.isdigit():
            raise SignatureError("the URL is not signed: the 'exp' and 'sig' query parameters are required")
        if not hmac.compare_digest(self.sign_file(key, int(exp)), sig):
            raise SignatureError("the request signature does not match: the URL was altered or not issued here")
        if int(exp) <= now_ms:
            raise SignatureError(
                f"Request has expired: the presigned URL expired at {exp} (epoch ms); "
                "ask the sharing server for a fresh URL",
                expired=True,
            )

    # -- tokens

    def _token_mac(self, body: str) -> str:
        return self._mac("token\n" + body)

    def encode_token(self, kind: str, payload: dict[str, Any], expires_ms: int) -> str:
        body = _b64(json.dumps({"k": kind, "exp": expires_ms, **payload}, separators=(",", ":")).encode())
        return f"{body}.{self._token_mac(body)}"

    def decode_token(self, kind: str, token: str, now_ms: int) -> dict[str, Any]:
        """The payload of a token of ``kind`` issued by this server and not yet expired."""
        body, _, mac = token.partition(".")
        if not mac or not hmac.compare_digest(self._token_mac(body), mac):
            raise SignatureError("the token was not issued by this server")
        try:
            payload = json.loads(_unb64(body))
        except ValueError:
            raise SignatureError("the token is not readable") from None
        if not isinstance(payload, dict) or payload.get("k") != kind:
            raise SignatureError(f"the token is not a {kind} token")
        if int(payload.get("exp", 0)) < now_ms:
            raise SignatureError("the token has expired", expired=True)
        return payload


def file_id(log_path: str) -> str:
    """Stable file id: md5 of the log path, as the reference server computes it."""
    return hashlib.md5(log_path.encode("utf-8"), usedforsecurity=False).hexdigest()


def checksum(params: dict[str, Any]) -> str:
    """Digest of query parameters: a page token is only valid for the query that produced it."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:32]
