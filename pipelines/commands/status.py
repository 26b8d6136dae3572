"""What ``sharesync status`` and the Dagster checks report: checkpoint vs provider, last run.

The provider's side is a state of its own: a provider that cannot be reached (the demo's, once it
stopped) says nothing about the table, whose checkpoint and last run are what they were, so it is
shown as ``provider: unreachable``, never as the table's last error. ``last_error`` is the last
run's failure only. ``status`` reports rather than waits: it asks with a short retry budget
(:data:`STATUS_RETRY`), not the minutes a sync spends on a provider that is down.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from sharesync.state import Checkpoint, RunRecord, RunStatus
from sharesync.sync.core.config import Mode, TableConfig
from sharesync.sync.core.errors import SharesyncError, TransportError
from sharesync.sync.core.include_patterns import Selection, needs_keys_message
from sharesync.sync.core.providers import DEFAULT_PROVIDER
from sharesync.sync.protocol.retry import RetryPolicy

if TYPE_CHECKING:
    from sharesync.pipelines.run.sync_pass import Syncer
    from sharesync.state import StateStore
    from sharesync.sync.core.config import SharesyncConfig

TOKEN_WARNING_DAYS = 7
STATUS_RETRY = RetryPolicy(max_attempts=2, total_seconds=5.0)

JsonValue = str | int | bool | list[str] | None


class ProviderState(StrEnum):
    OK = "ok"  # it answered with the table's version
    UNREACHABLE = "unreachable"  # no answer at all: refused, reset or timed out
    ERROR = "error"  # it answered with an error (credentials, a table it no longer shares, …)


@dataclass(frozen=True)
class TableStatus:
    """One configured table: its checkpoint, the provider's version, and its last run."""

    name: str
    target: str
    mode: Mode | None  # None: a pattern's table that needs keys has no mode until it gets them
    checkpoint_version: int | None
    source_version: int | None
    lag_versions: int | None
    last_sync_at: datetime | None
    last_status: RunStatus | None
    last_error: str | None
    # A succeeded run may still carry a warning (e.g. it re-bootstrapped after a history gap).
    last_warning: str | None
    provider: ProviderState = ProviderState.OK
    provider_error: str | None = None  # why the provider's version is unknown
    provider_name: str = DEFAULT_PROVIDER  # which provider of the config shares it
    # An include: pattern's table the pass does not sync: gone from its share's listing (target
    # and checkpoint kept), or lacking the pattern's key columns (and no fallback_mode); ``note``: why.
    removed_at_provider: bool = False
    needs_keys: bool = False
    missing_keys: tuple[str, ...] = ()
    note: str | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """The ``status --json`` shape: enums as their values, times in ISO 8601."""
        return {
            "name": self.name,
            "target": self.target,
            "mode": self.mode.value if self.mode is not None else None,
            "checkpoint_version": self.checkpoint_version,
            "source_version": self.source_version,
            "lag_versions": self.lag_versions,
            "last_sync_at": self.last_sync_at.isoformat() if self.last_sync_at else None,
            "last_status": self.last_status.value if self.last_status else None,
            "last_error": self.last_error,
            "last_warning": self.last_warning,
            "provider": self.provider.value,
            "provider_error": self.provider_error,
            "provider_name": self.provider_name,
            "removed_at_provider": self.removed_at_provider,
            "needs_keys": self.needs_keys,
            "missing_keys": list(self.missing_keys),
            "note": self.note,
        }


def table_statuses(syncer: Syncer) -> tuple[list[TableStatus], list[str]]:
    """One row per configured table (those the ``include:`` patterns match now too) and any warnings."""
    selection = syncer.select() if syncer.declared.include else None
    config, store = syncer.config, syncer.resources.store
    checkpoints = {c.name: c for c in store.list_checkpoints()}
    runs = store.latest_runs([t.key for t in config.tables])
    versions = syncer.source_versions(None, retry=STATUS_RETRY)  # None: every table, no lookups
    rows = []
    for table in config.tables:
        polled = versions.get(table.key)
        provider, provider_error = ProviderState.OK, None
        if isinstance(polled, SharesyncError):
            provider = ProviderState.UNREACHABLE if isinstance(polled, TransportError) else ProviderState.ERROR
            provider_error = f"cannot read the provider's version: {polled}"
        source = polled if isinstance(polled, int) else None
        run = runs.get(table.key)
        rows.append(
            _row(table, checkpoints.get(table.key), run, provider, provider_error, source, run.note if run else None)
        )
    if selection is not None:
        rows += unsynced_rows(store, selection)
    return rows, token_warnings(config)


def unsynced_rows(store: StateStore, selection: Selection) -> list[TableStatus]:
    """Rows of the matched tables a pass does not sync: removed at provider, or needing keys."""
    from sharesync.pipelines.run.share_listings import removed_note

    keys = [t.key for t in selection.removed] + [t.key for t, _ in selection.needs_keys]
    runs = store.latest_runs(keys)

    def row(table: TableConfig) -> TableStatus:
        checkpoint = store.get_checkpoint(table.key)
        shown = _row(table, checkpoint, runs.get(table.key), ProviderState.OK, None, None, None)
        # The mode it was synced in (a pattern's fallback_mode, say), not the pattern's.
        return replace(shown, mode=Mode(checkpoint.mode)) if checkpoint is not None else shown

    removed = [replace(row(t), removed_at_provider=True, note=removed_note(t)) for t in selection.removed]
    return removed + [
        replace(row(t), mode=None, needs_keys=True, missing_keys=tuple(m), note=needs_keys_message(t, m))
        for t, m in selection.needs_keys
    ]


def _row(
    table: TableConfig,
    checkpoint: Checkpoint | None,
    run: RunRecord | None,
    provider: ProviderState,
    provider_error: str | None,
    source: int | None,
    warning: str | None,
) -> TableStatus:
    return TableStatus(
        name=table.key,
        target=table.target,
        provider_name=table.provider,
        mode=table.mode,
        checkpoint_version=checkpoint.version if checkpoint else None,
        source_version=source,
        lag_versions=source - checkpoint.version if source is not None and checkpoint is not None else None,
        last_sync_at=checkpoint.updated_at if checkpoint else None,
        last_status=run.status if run else None,
        last_error=run.error if run is not None else None,
        last_warning=warning,
        provider=provider,
        provider_error=provider_error,
    )


def token_warnings(config: SharesyncConfig) -> list[str]:
    """A warning per provider whose profile's token expires within a week (or has expired); with
    several providers, one whose profile cannot be read is a warning too (its rows say the same)."""
    from sharesync.sync.protocol.profile import load_profile

    providers = config.all_providers()
    warnings = []
    for name, settings in providers.items():
        whose = f"provider '{name}': " if len(providers) > 1 else ""
        try:
            profile = load_profile(settings.profile)
        except SharesyncError as exc:
            if len(providers) == 1:
                raise
            warnings.append(f"{whose}{exc}")
            continue
        expires = profile.expiration_time
        if expires is None:
            continue
        if profile.is_expired():
            warnings.append(
                f"{whose}the profile's token expired at {expires.isoformat()}; ask the provider for a new profile"
            )
        elif profile.expires_within(TOKEN_WARNING_DAYS):
            warnings.append(
                f"{whose}the profile's token expires at {expires.isoformat()} (within {TOKEN_WARNING_DAYS} days)"
            )
    return warnings
