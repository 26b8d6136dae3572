"""Facts about a shared table that the Dagster layer shows but a sync does not need.

A sync knows commit timestamps only for the versions whose change files it read; a
bootstrap from the latest snapshot learns none. Lag and freshness need them, and the
row-count check needs the source's record count at the checkpoint version; both are one
extra, file-less request each (commit times: :func:`sharesync.sync.protocol.commit_time.version_commit_time`) (the presigned URLs in the answers are never downloaded).
Every function answers ``None`` when the provider cannot tell — no change data feed, no
history, no stats — instead of failing the materialization or check that asked.

What the provider says about the table and its share (:func:`provider_words`: the table's
description, the share's display name, comment and properties) is asked on each
materialization, so a provider's new description shows at the next one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.protocol.responses import ShareInfo, TableRef

if TYPE_CHECKING:
    from sharesync.sync.protocol.client import SharingClient

log = logging.getLogger(__name__)


def snapshot_num_records(client: SharingClient, table: str, version: int, *, latest: bool) -> int | None:
    """Rows in the snapshot at ``version``: its files' ``numRecords`` less the rows their deletion
    vectors mark (``numRecords`` counts a file's physical rows); None without stats.

    ``latest`` asks for the current snapshot without a version, which works even where the
    provider does not share history.
    """
    result = client.query(table, version=None if latest else version)
    if result.version != version:
        return None  # the provider moved on between the two calls; nothing comparable
    total = 0
    for file in result.files:
        stats = getattr(file, "parsed_stats", None)
        if stats is None or stats.num_records is None:
            return None
        deleted = file.deletion_vector.cardinality if file.deletion_vector is not None else 0
        total += stats.num_records - deleted
    return total


@dataclass(frozen=True)
class ProviderWords:
    """The provider's own words about one table, made safe to show (``sharesync.sync.core.provider_text``)."""

    description: str | None
    share: ShareInfo


def provider_words(client: SharingClient, table: str) -> ProviderWords:
    """Two small requests: the table's metadata (its description) and its share (Get Share; a
    provider that will not describe the share leaves it at its name)."""
    description = client.metadata(table).description
    share = TableRef.of(table).share
    try:
        return ProviderWords(description, ShareInfo.of(client.get_share(share)))
    except SharesyncError as exc:
        log.info("%s: the provider does not describe share %s: %s", table, share, exc)
        return ProviderWords(description, ShareInfo(share))
