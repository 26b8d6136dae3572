"""Reader features: what a protocol demands, and a clear refusal naming what sharesync cannot read."""

from __future__ import annotations

import pytest

from sharesync.sync.core.errors import UnsupportedTableFeature
from sharesync.sync.delta.features import check_reader_features, table_reader_features


def test_legacy_reader_versions() -> None:
    assert table_reader_features(1, None) == frozenset()
    assert table_reader_features(2, None) == frozenset({"columnMapping"})  # column mapping predates features
    assert table_reader_features(3, ["deletionVectors"]) == frozenset({"deletionVectors"})


def test_supported_features_pass() -> None:
    features = [
        "deletionVectors",
        "columnMapping",
        "timestampNtz",
        "typeWidening",
        "v2Checkpoint",
        "vacuumProtocolCheck",
    ]
    assert check_reader_features(3, features, table="s.t.x") == frozenset(features)


def test_unsupported_features_are_named() -> None:
    with pytest.raises(
        UnsupportedTableFeature, match=r"table s\.t\.x uses Delta reader feature\(s\) catalogManaged, variantType"
    ):
        check_reader_features(3, ["deletionVectors", "variantType", "catalogManaged"], table="s.t.x")


def test_unknown_reader_version() -> None:
    with pytest.raises(UnsupportedTableFeature, match="reader version 4"):
        check_reader_features(4, [], table="s.t.x")
