"""Who may call the API: one bearer token, plus tokens from an OAuth client-credentials endpoint.

Profiles come in two kinds that matter here (spec "Profile File Format" and the connector's
``oauth_client_credentials`` type): a fixed bearer token, and a client id/secret exchanged at
a token endpoint for short-lived bearer tokens. The server supports both so the client's
credential handling (including renewal before expiry) can be tested for real.
"""

from __future__ import annotations

import base64
import hmac
import secrets
import threading
from dataclasses import dataclass
from urllib.parse import parse_qs

from sharesync.sync.server.problems import unauthenticated


@dataclass(frozen=True)
class OAuthGrant:
    access_token: str
    expires_in: int

    def body(self) -> dict[str, object]:
        return {"access_token": self.access_token, "token_type": "Bearer", "expires_in": self.expires_in}


class OAuthError(Exception):
    """RFC 6749 section 5.2 error: ``error`` code and HTTP status."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


class Authenticator:
    """Checks ``Authorization: Bearer …``; ``bearer_token=None`` turns authentication off."""

    def __init__(
        self,
        bearer_token: str | None,
        client_id: str,
        client_secret: str,
        token_lifetime_seconds: int,
    ) -> None:
        self.bearer_token = bearer_token
        self.client_id = client_id
        self.client_secret = client_secret
        self.token_lifetime_seconds = token_lifetime_seconds
        self._issued: dict[str, int] = {}  # access token → expiry (epoch ms)
        self._lock = threading.Lock()

    def check(self, authorization: str | None, now_ms: int) -> None:
        if self.bearer_token is None:
            return
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise unauthenticated("Missing bearer token: send 'Authorization: Bearer <token>' from your profile")
        token = token.strip()
        if hmac.compare_digest(token.encode(), self.bearer_token.encode()):
            return
        with self._lock:
            expiry = self._issued.get(token)
        if expiry is None:
            raise unauthenticated("The bearer token is incorrect")
        if expiry <= now_ms:
            raise unauthenticated("The bearer token has expired; request a new one from the token endpoint")

    def grant(self, authorization: str | None, body: bytes, now_ms: int) -> OAuthGrant:
        """Issue a token for ``grant_type=client_credentials`` (credentials by basic auth or form)."""
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        if form.get("grant_type") != "client_credentials":
            raise OAuthError(400, "unsupported_grant_type", "only grant_type=client_credentials is supported")
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        scheme, _, encoded = (authorization or "").partition(" ")
        if scheme.lower() == "basic":
            try:
                client_id, _, client_secret = base64.b64decode(encoded).decode().partition(":")
            except ValueError:
                raise OAuthError(401, "invalid_client", "malformed basic credentials") from None
        if not (
            client_id == self.client_id
            and client_secret is not None
            and hmac.compare_digest(client_secret.encode(), self.client_secret.encode())
        ):
            raise OAuthError(401, "invalid_client", "unknown client or wrong secret")
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._issued = {t: e for t, e in self._issued.items() if e > now_ms}
            self._issued[token] = now_ms + self.token_lifetime_seconds * 1000
        return OAuthGrant(token, self.token_lifetime_seconds)

    def issued_tokens(self) -> list[str]:
        """The access tokens handed out and not yet expired (tests look for them where none belongs)."""
        with self._lock:
            return list(self._issued)
