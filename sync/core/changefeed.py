"""The change-data-feed vocabulary, defined once: change types and the columns that carry them.

Delta Sharing's change data feed (and Delta's own) marks every change row with three columns:
``_change_type``, ``_commit_version`` and ``_commit_timestamp``. A provider's ``cdf`` files carry
them; sharesync adds them to rows of ``add``/``remove`` files and snapshots when it stages a
batch, so every staged row — and every row of an append-mode target — has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = [
    "CHANGE_COLUMNS",
    "CHANGE_TYPE",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "UPSERT_TYPES",
    "ChangeFeed",
    "ChangeType",
    "change_feed_of",
]


class ChangeType(StrEnum):
    """The values of ``_change_type``."""

    INSERT = "insert"
    UPDATE_PREIMAGE = "update_preimage"
    UPDATE_POSTIMAGE = "update_postimage"
    DELETE = "delete"


CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"  # long: the source commit of the change
COMMIT_TIMESTAMP = "_commit_timestamp"  # UTC timestamp of that commit
CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)

# A row whose winning change is one of these exists afterwards with that image; after any other
# (a delete, or a preimage without its postimage) the key is gone.
UPSERT_TYPES = (ChangeType.INSERT, ChangeType.UPDATE_POSTIMAGE)


class ChangeFeed(StrEnum):
    """Whether the provider publishes a table's change data feed, as far as its metadata says."""

    ON = "on"
    OFF = "off"
    # ``metaData.configuration`` is optional in the protocol and some servers leave it out: then
    # the changes are asked for, and only the server's refusal of them says "off".
    UNKNOWN = "unknown"


def change_feed_of(configuration: Mapping[str, str] | None) -> ChangeFeed:
    """The feed a ``metaData.configuration`` describes: its absence says nothing; present, a
    missing key is Delta's default (off) — the reference server sends ``{}`` for a table without
    one, and the table's own properties in delta-format answers."""
    if configuration is None:
        return ChangeFeed.UNKNOWN
    value = configuration.get("delta.enableChangeDataFeed", configuration.get("enableChangeDataFeed", "false"))
    return ChangeFeed.ON if value.lower() == "true" else ChangeFeed.OFF
