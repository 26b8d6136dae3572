"""History mode's validity columns, defined once: the planner (staging) and the jobs both use them.

A history-mode target holds every image a key had, one row each, with the user's columns plus
these five. ``valid_to_*`` stay NULL while the row is current. Versions are source commit
versions; the timestamps are those commits' times (UTC), NULL when the provider gave none.

Reading the table as of a moment::

    WHERE _sharesync_valid_from <= TIMESTAMP '2024-03-03 00:00:00'
      AND (_sharesync_valid_to IS NULL OR _sharesync_valid_to > TIMESTAMP '2024-03-03 00:00:00')
"""

from __future__ import annotations

__all__ = [
    "HISTORY_COLUMNS",
    "IS_CURRENT",
    "VALID_FROM",
    "VALID_FROM_VERSION",
    "VALID_TO",
    "VALID_TO_VERSION",
]

VALID_FROM_VERSION = "_sharesync_valid_from_version"  # long: the version at which this image became current
VALID_TO_VERSION = "_sharesync_valid_to_version"  # long: the version that replaced or deleted it; NULL while current
VALID_FROM = "_sharesync_valid_from"  # timestamp of VALID_FROM_VERSION's commit
VALID_TO = "_sharesync_valid_to"  # timestamp of VALID_TO_VERSION's commit
IS_CURRENT = "_sharesync_is_current"  # boolean: VALID_TO_VERSION IS NULL, kept as a column for readers
HISTORY_COLUMNS = (VALID_FROM_VERSION, VALID_TO_VERSION, VALID_FROM, VALID_TO, IS_CURRENT)
