"""TLS trust for every connection: the system's (httpx's) trust store, plus a provider's CA bundle.

Verification is never off. Without a CA bundle the trusted CAs are loaded on first TLS use
(:class:`DeferredTrustContext`), so a run that only speaks plain http, or makes no call, does not
pay for reading them.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from pathlib import Path
from typing import Any

from sharesync.sync.core.errors import ConfigError


class DeferredTrustContext(ssl.SSLContext):
    """httpx's default trust (``verify=True``), read when the first TLS connection starts.

    Reading the CA bundle costs 30-40 ms, which a client that only speaks plain http (a local
    provider, the demo server) or makes no call at all should not pay when it is built. The
    context verifies from the start exactly like ``ssl.create_default_context`` (certificate
    required, host name checked); only loading the trusted CAs waits for the first
    ``wrap_socket``/``wrap_bio``, which every TLS connection (direct or through a proxy) goes
    through. The CAs are those httpx would load: ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``,
    else certifi's bundle. A CA file that cannot be read is a :class:`ConfigError`.
    """

    def __new__(cls) -> DeferredTrustContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self) -> None:
        # What ssl.create_default_context(cafile=...) sets besides the CAs (Python 3.11).
        self.verify_mode = ssl.CERT_REQUIRED
        self.check_hostname = True
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment:
            self.keylog_filename = keylog
        # httpx reads these when the client is built; so do we.
        self._cafile = os.environ.get("SSL_CERT_FILE") or None
        self._capath = None if self._cafile else os.environ.get("SSL_CERT_DIR") or None
        self._trust_lock = threading.Lock()
        self._trust_loaded = False

    def _load_trust(self) -> None:
        with self._trust_lock:
            if self._trust_loaded:
                return
            cafile, capath = self._cafile, self._capath
            if cafile is None and capath is None:
                import certifi

                cafile = certifi.where()
            try:
                self.load_verify_locations(cafile=cafile, capath=capath)
            except (ssl.SSLError, OSError) as exc:
                source = (
                    f"SSL_CERT_FILE '{cafile}'" if self._cafile else f"SSL_CERT_DIR '{capath}'" if capath else cafile
                )
                raise ConfigError(f"cannot load trusted certificates from {source} ({exc})") from None
            self._trust_loaded = True

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._load_trust()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self._load_trust()
        return super().wrap_bio(*args, **kwargs)


def ssl_context(ca_bundle: Path | None) -> ssl.SSLContext:
    """System trust store, plus the provider's CA bundle when one is configured. Never off.

    Without a CA bundle: httpx's default trust, loaded on first TLS use
    (:class:`DeferredTrustContext`); a configured bundle is loaded (and checked) at once.
    """
    if ca_bundle is None:
        return DeferredTrustContext()
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=str(ca_bundle))
    except FileNotFoundError:
        raise ConfigError(f"ca_bundle '{ca_bundle}' does not exist; fix the path or remove 'ca_bundle'") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"ca_bundle '{ca_bundle}' is not a PEM certificate file ({exc})") from None
    return context
