"""Connections for file downloads: resolve a host name once, check every address, connect to a checked one.

:class:`~sharesync.sync.protocol.addresses.FileUrlPolicy` judges a file URL as written, so a
host name the provider chose passes it whatever it resolves to. Checking the name's addresses
separately and then letting the connection resolve it again would leave a gap (DNS rebinding: a
second answer may differ from the first). So the check sits where the connection is made: an
``httpcore`` network backend (httpcore's public extension point, "Custom network backends")
whose ``connect_tcp`` resolves the name, refuses it when any address is not allowed, and
connects to the checked address itself. TLS is unaffected: httpcore starts TLS on that
connection with the URL's host name (``server_hostname``), so SNI and the certificate's name
check still use the name, never the address.

httpx's transport takes no network backend, so :func:`checked_transport` is httpx's own
transport with its connection pool rebuilt around this backend. A proxy set in the environment
resolves names itself; downloads then go through it unchecked by address, as before
(:func:`proxied`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import urllib.request
from collections.abc import Awaitable, Callable, Iterable

import httpcore
import httpx

from sharesync.sync.core.errors import UnsafeUrl
from sharesync.sync.protocol.addresses import FileUrlPolicy


class AddressRefused(UnsafeUrl):
    """Raised inside the connection pool, which knows no file: the download adds its name."""


Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``: what a host name resolves to (injectable for tests)."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's answer (``getaddrinfo``, as a connection would use), each address once, in its order."""
    answers = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(answer[4][0]) for answer in answers))


def proxied() -> bool:
    """Whether the environment names a proxy (httpx would use it; the proxy then resolves names)."""
    return any(scheme in urllib.request.getproxies() for scheme in ("http", "https", "all"))


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses ``policy`` allows."""

    def __init__(
        self,
        policy: FileUrlPolicy,
        resolve: Resolver = system_resolver,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolve = resolve
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._addresses(host, port, timeout)
        refusal = self.policy.address_refusal(host, port, addresses)
        if refusal is not None:
            raise AddressRefused(f"refused the file URL the provider gave: {refusal}")
        failure: Exception | None = None
        for address in addresses:  # the checked addresses, in the resolver's order
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # _addresses never returns an empty list
        raise failure

    async def _addresses(self, host: str, port: int, timeout: float | None) -> list[str]:
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            return [host]  # an address literal: nothing to resolve
        except ValueError:
            pass
        try:
            async with asyncio.timeout(timeout):
                addresses = await self.resolve(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout} s") from None
        except OSError as exc:  # socket.gaierror: no such host
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        return addresses

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:  # pragma: no cover - downloads never use a unix socket
        raise AddressRefused("refused a unix-socket connection for a file download")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def checked_transport(
    verify: ssl.SSLContext, limits: httpx.Limits, backend: CheckedBackend
) -> httpx.AsyncHTTPTransport:
    """httpx's transport (its request and error mapping) over a pool that connects through ``backend``."""
    transport = httpx.AsyncHTTPTransport(verify=verify, limits=limits, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(  # httpx builds its pool without a way to pass a backend
        ssl_context=verify,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=backend,
    )
    return transport
