"""The tables a pass syncs when the config selects some by pattern: the providers' listings, once.

Each provider's selected shares are listed once per pass (paginated by the client; one
``/all-tables`` listing per share, kept for the pass in :class:`Listings`), then the pure
:func:`~sharesync.sync.core.include_patterns.expand` decides. A matched table that was never synced
and whose mode needs keys costs one ``/metadata`` call, to see whether it has the pattern's key
columns. A share the provider no longer shares lists nothing (its tables are ``removed at
provider``); a provider that cannot be listed at all keeps its known tables, which then fail or
sync on their own.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from sharesync.pipelines.modes.registry import BUILTIN_MODES
from sharesync.pipelines.run.results import TableOutcome, TableSyncResult
from sharesync.state import RunStats, RunStatus
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import LeaseHeld, NotFound, SharesyncError
from sharesync.sync.core.include_patterns import Selection, expand, needs_keys_message
from sharesync.sync.core.table_config import Mode

if TYPE_CHECKING:
    from sharesync.state import StateStore
    from sharesync.sync.protocol.client import SharingClient

log = logging.getLogger(__name__)

ClientFor = Callable[[str], "SharingClient"]


@dataclass
class Listings:
    """What each provider's selected shares list, fetched once and kept for the pass."""

    tables: dict[str, list[str] | None] = field(default_factory=dict)  # provider → names (None: failed)

    def fetch(self, config: SharesyncConfig, client_for: ClientFor) -> Listings:
        for provider in dict.fromkeys(e.provider for e in config.include):
            if provider in self.tables:
                continue
            try:
                self.tables[provider] = self._provider(config, provider, client_for(provider))
            except SharesyncError as exc:
                self.tables[provider] = None
                log.warning("provider '%s': cannot list its shares (%s); its known tables are kept", provider, exc)
        return self

    def _provider(self, config: SharesyncConfig, provider: str, client: SharingClient) -> list[str]:
        patterns = [e.share for e in config.include if e.provider == provider]
        shares = {p for p in patterns if not _wild(p)}
        if any(_wild(p) for p in patterns):
            offered = [s.name for s in client.iter_shares()]
            shares |= {s for s in offered if any(fnmatch.fnmatchcase(s.lower(), p.lower()) for p in patterns)}
        names: list[str] = []
        for share in sorted(shares):
            try:
                names += [t.full_name for t in client.list_all_tables(share)]
            except NotFound:  # the share is no longer shared with us: none of its tables are
                log.warning("provider '%s': share '%s' is not shared (any more)", provider, share)
        return names


def select(
    config: SharesyncConfig, client_for: ClientFor, synced_modes: Mapping[str, str], listings: Listings | None = None
) -> Selection:
    """Explicit tables and the pattern-matched ones of this pass (``synced_modes``: key → checkpoint mode)."""
    if not config.include:
        return Selection(tuple(config.tables))
    listings = (listings or Listings()).fetch(config, client_for)
    first = expand(config.tables, config.include, listings.tables, synced_modes)
    explicit = {t.key for t in config.tables}
    new_keyed = [
        t
        for t in first.tables
        if t.key not in explicit and t.key not in synced_modes and BUILTIN_MODES.of_mode(t.mode).keyed
    ]
    if not new_keyed:
        return first
    columns: dict[str, list[str]] = {}
    for table in new_keyed:
        try:
            answer = client_for(table.provider).metadata(table.name)
        except SharesyncError:
            continue  # its run reports the failure
        columns[table.key] = [f.name for f in answer.metadata.table_schema.fields]
    return expand(config.tables, config.include, listings.tables, synced_modes, columns)


def _wild(text: str) -> bool:
    return any(c in text for c in "*?[")


def unsynced_results(store: StateStore, selection: Selection, lease_ttl: timedelta) -> list[TableSyncResult]:
    """The matched tables a pass does not sync, as results: ``removed at provider`` (on record in
    the run history once, when first seen gone) and ``needs keys``."""
    results = []
    latest = store.latest_runs([t.key for t in selection.removed]) if selection.removed else {}
    for table in selection.removed:
        checkpoint = store.get_checkpoint(table.key)
        version = checkpoint.version if checkpoint else None
        note = removed_note(table)
        run = latest.get(table.key)
        if run is None or run.note != note:
            _record(store, table.key, version, note, lease_ttl)
        mode = Mode(checkpoint.mode) if checkpoint is not None else table.mode  # as synced, e.g. a fallback_mode
        results.append(TableSyncResult(table.key, mode, TableOutcome.REMOVED, version, None, warnings=(note,)))
    for table, missing in selection.needs_keys:
        warning = needs_keys_message(table, missing)
        results.append(TableSyncResult(table.key, table.mode, TableOutcome.NEEDS_KEYS, None, None, warnings=(warning,)))
    return results


def removed_note(table: TableConfig) -> str:
    return (
        f"removed at provider: {table.name} is no longer in its share's listing; its target and checkpoint "
        "are kept, and syncing resumes if it comes back"
    )


def _record(store: StateStore, key: str, version: int | None, note: str, lease_ttl: timedelta) -> None:
    """A run with the note, under the table's lease (a sync holding it now: recorded next pass)."""
    try:
        with store.hold_lease(key, ttl=lease_ttl) as keeper:
            run_id = store.start_run(key, start_version=version, end_version=version, lease=keeper.lease)
            store.finish_run(run_id, RunStatus.SUCCEEDED, RunStats(), note=note)
    except LeaseHeld:
        log.info("%s: held by another sync; 'removed at provider' is recorded by a later pass", key)
