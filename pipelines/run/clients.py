"""One sharing client per provider of a config, each with that provider's profile and limits.

Apart from the pass's resources (:mod:`~sharesync.pipelines.run.pass_resources`) because ``status``
makes short-lived clients the same way (with a short retry budget), and because a provider's
profile is read only when one of its tables needs it: a provider whose profile is missing or
expired fails its own tables only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from sharesync.pipelines.run.circuit import ProviderCircuits
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import SharesyncError

POLL_WORKERS = 32  # concurrent /version calls of a pass

if TYPE_CHECKING:
    from sharesync.sync.protocol.client import SharingClient
    from sharesync.sync.protocol.retry import RetryPolicy


def make_client(config: SharesyncConfig, provider: str, *, retry: RetryPolicy | None = None) -> SharingClient:
    """A client for ``provider``: its profile (token expiry checked, warned naming the provider
    when there are several), retry bounds (``retry``: these instead, e.g. ``status``'s) and
    transfer-rate floor."""
    from sharesync.sync.protocol.client import SharingClient
    from sharesync.sync.protocol.profile import check_expiry, load_profile
    from sharesync.sync.protocol.retry import RetryPolicy as Policy
    from sharesync.sync.protocol.transport import Timeouts

    settings = config.provider(provider)
    profile = load_profile(settings.profile)
    check_expiry(profile, provider=provider if len(config.all_providers()) > 1 else None)
    if retry is None:
        defaults = Policy.from_env()
        retry = dataclasses.replace(
            defaults,
            max_attempts=settings.retry_max_attempts or defaults.max_attempts,
            total_seconds=settings.retry_total_seconds or defaults.total_seconds,
        )
    timeouts = Timeouts.from_env()
    if settings.min_rate_bytes_per_second is not None:
        timeouts = dataclasses.replace(timeouts, floor_rate=settings.min_rate_bytes_per_second)
    if settings.min_rate_seconds is not None:
        timeouts = dataclasses.replace(timeouts, floor_seconds=settings.min_rate_seconds)
    return SharingClient(
        profile,
        provider=provider,
        retry=retry,
        timeouts=timeouts,
        ca_bundle=config.ca_bundle,
        allow_private_file_urls=config.allow_private_file_urls,
        file_id_hash=config.file_id_hash,
    )


def poll_versions(
    tables: list[TableConfig],
    clients: dict[str, SharingClient | SharesyncError],
    circuits: ProviderCircuits | None = None,
) -> dict[str, int | SharesyncError]:
    """Each table's version from its provider's client (or that provider's failure), by key.

    The first table of each provider is asked first (all providers at once): a provider it
    finds down (``circuits``) fails its other tables at once instead of each retrying."""
    circuits = circuits if circuits is not None else ProviderCircuits()

    def poll(table: TableConfig) -> int | SharesyncError:
        polling = clients[table.provider]
        if isinstance(polling, SharesyncError):
            return polling
        down = circuits.reason(table.provider)
        if down is not None:
            return down
        try:
            return polling.table_version(table.name).version
        except SharesyncError as exc:
            circuits.trip(table.provider, exc)
            return exc

    firsts: dict[str, TableConfig] = {}
    for table in tables:
        firsts.setdefault(table.provider, table)
    first_keys = {t.key for t in firsts.values()}
    waves = (list(firsts.values()), [t for t in tables if t.key not in first_keys])
    found: dict[str, int | SharesyncError] = {}
    with ThreadPoolExecutor(max_workers=min(POLL_WORKERS, max(1, len(tables)))) as pool:
        for wave in waves:
            found.update(zip([t.key for t in wave], pool.map(poll, wave), strict=True))
    return {t.key: found[t.key] for t in tables}


def clients_by_provider(
    providers: Iterable[str], make: Callable[[str], SharingClient], *, contain: bool
) -> dict[str, SharingClient | SharesyncError]:
    """Each provider's client, or why it cannot be made (``contain``: that provider's tables fail
    alone; else it is raised — with one provider, a broken profile means the command cannot run)."""
    clients: dict[str, SharingClient | SharesyncError] = {}
    for provider in providers:
        try:
            clients[provider] = make(provider)
        except SharesyncError as exc:
            if not contain:
                raise
            clients[provider] = exc
    return clients


def close_clients(clients: dict[str, SharingClient | SharesyncError]) -> None:
    for client in clients.values():
        if not isinstance(client, SharesyncError):
            client.close()
