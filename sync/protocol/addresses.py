"""Which addresses a presigned file URL may point at — pure, no DNS, no sockets.

The provider chooses every file URL sharesync fetches. A hostile or broken provider could aim
them at services only this host can reach: another port on loopback, a cloud metadata endpoint
(``169.254.169.254``), an admin page on the private network, a local file (``file://``).
Fetching them is server-side request forgery, so a file URL is fetched only when

* its scheme is ``http`` or ``https``, and
* its origin (scheme, host, port) is the provider's own — the profile's endpoint, where the
  local sharing server serves its files — or its host is a public address or a host name.

Loopback, link-local, private, shared (CGNAT), multicast, reserved and unspecified addresses,
and the ``localhost`` names, are refused unless the config says the provider legitimately
serves files from private addresses (``allow_private_file_urls: true``). The rule applies to
each request, so a redirect cannot lead around it. This module resolves nothing: a URL's host
name passes :meth:`FileUrlPolicy.refusal` as written, and the addresses it resolves to are judged
by :meth:`FileUrlPolicy.address_refusal` when the download connects
(:mod:`sharesync.sync.protocol.checked_connect` resolves once, checks, and connects to the checked
address), so a public-looking name that resolves to a private address is refused too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from sharesync.sync.core.errors import UnsafeUrl

_SCHEMES = ("http", "https")
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def non_public_kind(host: str) -> str | None:
    """What kind of non-public address ``host`` is ("loopback", "link-local", …), None when public.

    IP literals are classified by :mod:`ipaddress` (an IPv4-mapped IPv6 address as its IPv4
    address); ``localhost`` and ``*.localhost`` (RFC 6761) count as loopback; any other name
    counts as public (it is not resolved here).
    """
    name = host.strip("[]").rstrip(".").lower()
    if name in _LOCAL_NAMES or name.endswith(".localhost"):
        return "loopback"
    try:
        ip = ipaddress.ip_address(name.split("%", 1)[0])  # an IPv6 zone id ("fe80::1%eth0") names no address
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, test in (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
    ):
        if test:
            return kind
    return None if ip.is_global else "non-global"  # e.g. 100.64.0.0/10, shared by carrier NAT


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host.lower(), url.port or default


@dataclass(frozen=True)
class FileUrlPolicy:
    """The rule above for one provider: ``endpoint`` is the profile's, ``allow_private`` the config's."""

    endpoint: str
    allow_private: bool = False

    def refusal(self, url: httpx.URL | str) -> str | None:
        """Why ``url`` must not be fetched, or None when it may be."""
        url = httpx.URL(url)
        if url.scheme not in _SCHEMES:
            return f"its scheme is {url.scheme or 'missing'!r}; only http and https URLs are fetched"
        if _origin(url) == _origin(httpx.URL(self.endpoint)):
            return None
        kind = non_public_kind(url.host)
        if kind is None or self.allow_private:
            return None
        return (
            f"it points at {url.host}:{_origin(url)[2]}, a {kind} address that is not the provider's endpoint; "
            "if this provider serves its files from private addresses, set 'allow_private_file_urls: true' "
            "in the config"
        )

    def address_refusal(self, host: str, port: int, addresses: Sequence[str]) -> str | None:
        """Why a connection to ``host``:``port``, whose name resolved to ``addresses``, must not be
        made, or None when it may. Every address must be public: a name resolving to a public and
        a private address is refused (which one a connection would use is not ours to choose)."""
        endpoint = _origin(httpx.URL(self.endpoint))
        if self.allow_private or (host.lower().rstrip("."), port) == (endpoint[1], endpoint[2]):
            return None
        for address in addresses:
            kind = non_public_kind(address)
            if kind is not None:
                return (
                    f"its host {host} resolves to {address}, a {kind} address that is not the provider's "
                    "endpoint; if this provider serves its files from private addresses, set "
                    "'allow_private_file_urls: true' in the config"
                )
        return None

    def check(self, url: httpx.URL | str, *, context: str) -> None:
        """Raise :class:`UnsafeUrl` (never retried) when ``url`` must not be fetched."""
        reason = self.refusal(url)
        if reason is not None:
            raise UnsafeUrl(f"{context}: refused the file URL the provider gave: {reason}")
