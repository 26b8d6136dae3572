"""A timestamp a person gives (``backfill --from``, a Dagster run config) fails as a usage error."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.timestamps import given_timestamp


def test_a_given_timestamp_is_aware_utc() -> None:
    assert given_timestamp("--from", "2024-01-01T02:00:00+02:00") == datetime(2024, 1, 1, tzinfo=UTC)


def test_a_bad_one_is_a_config_error_naming_where_it_was_given() -> None:
    with pytest.raises(ConfigError, match=r"^run config: starting_timestamp: 'last tuesday' is not an ISO-8601"):
        given_timestamp("run config: starting_timestamp", "last tuesday")
