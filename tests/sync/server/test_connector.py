"""The official ``delta-sharing`` Python connector against our server: the server is only as
faithful as the reference client's results say. Expected data comes from ``deltalake``
reading the same tables directly."""

from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import delta_sharing
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from support.faults import SharingServer

TABLES = ["samples.all_types.partitioned", "samples.all_types.plain"]
CDF_COLUMNS = ["_change_type", "_commit_version", "_commit_timestamp"]


def _value(value: Any) -> Any:
    """One comparable form per value, whatever pandas dtype the reader chose."""
    if value is None or value is pd.NaT or (isinstance(value, float | np.floating) and math.isnan(value)):
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if isinstance(value, Decimal):
        return value.normalize()
    if isinstance(value, pd.Timestamp | datetime):
        stamp = pd.Timestamp(value)
        return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    records = [tuple(_value(v) for v in row) for row in frame[columns].itertuples(index=False, name=None)]
    return sorted(records, key=repr)


def _path(root: Path, name: str) -> str:
    return str(root.joinpath(*name.split(".")))


def _cdf_frame(table: DeltaTable, start: int, end: int) -> pd.DataFrame:
    frame = pa.table(table.load_cdf(starting_version=start, ending_version=end)).to_pandas()
    # deltalake reports the commit timestamp as a timestamp; the protocol sends epoch ms.
    frame["_commit_timestamp"] = frame["_commit_timestamp"].astype("datetime64[ms]").astype("int64")
    return frame


def test_list_all_tables(sharing_server: SharingServer) -> None:
    client = delta_sharing.SharingClient(str(sharing_server.profile_path))
    names = sorted(f"{t.share}.{t.schema}.{t.name}" for t in client.list_all_tables())
    assert names == [
        "demo.sales.customers",
        "demo.sales.orders",
        "samples.all_types.no_cdf",
        "samples.all_types.partitioned",
        "samples.all_types.plain",
    ]


@pytest.mark.parametrize("name", TABLES)
def test_load_as_pandas_equals_the_delta_snapshot(sharing_server: SharingServer, name: str) -> None:
    got = delta_sharing.load_as_pandas(f"{sharing_server.profile_path}#{name}")
    expected = DeltaTable(_path(sharing_server.root, name)).to_pyarrow_table().to_pandas()
    assert len(expected) > 0
    assert list(got.columns) == list(expected.columns)
    assert rows(got, list(expected.columns)) == rows(expected, list(expected.columns))


def test_time_travel_by_version(sharing_server: SharingServer) -> None:
    name = TABLES[0]
    for version in (0, 3):
        got = delta_sharing.load_as_pandas(f"{sharing_server.profile_path}#{name}", version=version)
        expected = DeltaTable(_path(sharing_server.root, name), version=version).to_pyarrow_table().to_pandas()
        assert rows(got, list(expected.columns)) == rows(expected, list(expected.columns)), version


@pytest.mark.parametrize(("name", "start", "end"), [(TABLES[0], 0, 8), (TABLES[0], 3, 6), (TABLES[1], 1, 6)])
def test_table_changes_equal_deltalake_change_data_feed(
    sharing_server: SharingServer, name: str, start: int, end: int
) -> None:
    got = delta_sharing.load_table_changes_as_pandas(
        f"{sharing_server.profile_path}#{name}", starting_version=start, ending_version=end
    )
    expected = _cdf_frame(DeltaTable(_path(sharing_server.root, name)), start, end)
    assert len(expected) > 0
    columns = [c for c in expected.columns if c not in CDF_COLUMNS] + CDF_COLUMNS
    assert rows(got, columns) == rows(expected, columns)


def test_the_sample_history_exercises_every_change_type(provider_root: Path) -> None:
    """Guards the comparison above: the sample commits must produce every kind of change row."""
    frame = _cdf_frame(DeltaTable(_path(provider_root, TABLES[0])), 0, 8)
    assert set(frame["_change_type"]) == {"insert", "delete", "update_preimage", "update_postimage"}
