"""Check a sharesync target against its provider table, read independently with ``deltalake``.

The oracle shares no code with the engine: the source is read straight from the provider's
Delta log (``DeltaTable(source, version=v)`` for snapshots, ``load_cdf`` for the change feed),
filters are evaluated here in plain Python with SQL three-valued logic, and the target is
read back with ``deltalake``. Reused by the Dagster tests.

* :func:`assert_merge_target_matches`: the target is the source snapshot at ``version`` (one
  row per key; projected and filtered as configured; sharesync's ``_sharesync*`` columns ignored).
* :func:`assert_append_target_matches`: the target holds every change row exactly once — the
  bootstrap snapshot as inserts at its version, then every CDF row of the synced range.
* :func:`assert_snapshot_target_matches`: the target is the source snapshot, as a multiset.

A target in object storage is read with the ``storage_options`` the test passes (its own
credentials for the store, not sharesync's settings).

Types must agree too (modulo Arrow's string/binary view and timestamp zone spellings), so a
decimal that came back as a double, or a short widened to an int, fails the check.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from sharesync.pipelines.targets.delta.rows import read_rows

SHARESYNC_PREFIX = "_sharesync"
DELETED = "_sharesync_deleted"
CHANGE_COLUMNS = ("_change_type", "_commit_version")
_CDF_COLUMNS = (*CHANGE_COLUMNS, "_commit_timestamp")
Row = dict[str, Any]
Where = Sequence[Mapping[str, Any]] | None

_SHOW = 5  # rows shown per kind of difference in a failure message


# ---------------------------------------------------------------- public checks


def assert_merge_target_matches(
    source_path: str | Path,
    target_path: str | Path,
    keys: Sequence[str],
    version: int,
    columns: Sequence[str] | None = None,
    where: Where = None,
    *,
    soft_delete: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """The merge target equals the source snapshot at ``version``, row by row per key."""
    source = _snapshot(source_path, version)
    expected_names = _projected_names(source.schema.names, keys, columns)
    expected = [_project(r, expected_names) for r in source.to_pylist() if _matches(r, where)]
    target = _read_target(target_path, storage_options)
    _by_key(_data_only(target).to_pylist(), keys, f"target {target_path}")  # one row per key, flagged or not
    if soft_delete:
        assert DELETED in target.column_names, f"soft-delete target {target_path} has no {DELETED} column"
        target = target.filter(pc.invert(pc.fill_null(target[DELETED], False)))
    actual_table = _data_only(target)
    _assert_types(source.select(expected_names), actual_table, target_path)
    actual = actual_table.to_pylist()
    by_key_expected = _by_key(expected, keys, "source")
    by_key_actual = _by_key(actual, keys, f"target {target_path}")
    missing = [k for k in by_key_expected if k not in by_key_actual]
    extra = [k for k in by_key_actual if k not in by_key_expected]
    differ = [k for k in by_key_expected if k in by_key_actual and by_key_expected[k] != by_key_actual[k]]
    if missing or extra or differ:
        lines = [f"merge target {target_path} != source {source_path} at version {version}:"]
        lines += [f"  missing key {k}: {by_key_expected[k]}" for k in missing[:_SHOW]]
        lines += [f"  extra key {k}: {by_key_actual[k]}" for k in extra[:_SHOW]]
        for k in differ[:_SHOW]:
            diff = {
                c: (by_key_expected[k][c], by_key_actual[k][c])
                for c in expected_names
                if by_key_expected[k][c] != by_key_actual[k][c]
            }
            lines.append(f"  key {k} differs (expected, actual): {diff}")
        lines.append(f"  ({len(missing)} missing, {len(extra)} extra, {len(differ)} different of {len(expected)})")
        raise AssertionError("\n".join(lines))
    guards = _read_target(target_path, storage_options)
    if "_sharesync_version" in guards.column_names:
        newest = max(guards["_sharesync_version"].to_pylist(), default=None)
        assert newest is None or newest <= version, f"a target row claims source version {newest} > {version}"


def assert_append_target_matches(
    source_path: str | Path,
    target_path: str | Path,
    *,
    bootstrap_version: int | None,
    end_version: int,
    changes_from: int | None = None,
    above: int | None = None,
    columns: Sequence[str] | None = None,
    where: Where = None,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """The append target holds each change row exactly once.

    Expected rows: the snapshot at ``bootstrap_version`` as ``insert`` rows at that version
    (None: no bootstrap, e.g. ``start: {version: N}``), then every CDF row of versions
    ``changes_from`` (default ``bootstrap_version + 1``) through ``end_version``. Compared as a
    multiset of data columns + ``_change_type`` + ``_commit_version``. ``above``: compare only
    the target rows with ``_commit_version > above`` (the part of the log a re-bootstrap wrote).
    """
    # Columns as of the last version: rows from before an added column read NULL there.
    names = _projected_names(_schema_order(source_path, end_version), (), columns)
    expected: list[Row] = []
    if bootstrap_version is not None:
        expected += [
            {**_project(r, names), "_change_type": "insert", "_commit_version": bootstrap_version}
            for r in _snapshot(source_path, bootstrap_version).to_pylist()
            if _matches(r, where)
        ]
    start = (
        changes_from if changes_from is not None else (bootstrap_version + 1 if bootstrap_version is not None else 0)
    )
    if start <= end_version:
        cdf = DeltaTable(str(source_path)).load_cdf(starting_version=start, ending_version=end_version)
        for r in _normalise(pa.RecordBatchReader.from_stream(cdf).read_all()).to_pylist():
            if _matches(r, where):
                expected.append(
                    {
                        **_project(r, names),
                        "_change_type": r["_change_type"],
                        "_commit_version": int(r["_commit_version"]),
                    }
                )
    target = _read_target(target_path, storage_options)
    wanted = [*names, *CHANGE_COLUMNS]
    data_names = [c for c in target.column_names if c != "_commit_timestamp" and not c.startswith(SHARESYNC_PREFIX)]
    assert sorted(data_names) == sorted(wanted), (
        f"append target {target_path} columns {data_names} != expected {wanted}"
    )
    actual = target.select(wanted).to_pylist()
    if above is not None:
        actual = [r for r in actual if r["_commit_version"] > above]
    _assert_same_multiset(expected, actual, wanted, f"append target {target_path} vs CDF of {source_path}")


def assert_snapshot_target_matches(
    source_path: str | Path,
    target_path: str | Path,
    version: int,
    columns: Sequence[str] | None = None,
    where: Where = None,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """The snapshot target equals the source snapshot at ``version`` (as a multiset of rows)."""
    source = _snapshot(source_path, version)
    names = _projected_names(source.schema.names, (), columns)
    expected = [_project(r, names) for r in source.to_pylist() if _matches(r, where)]
    actual_table = _data_only(_read_target(target_path, storage_options))
    _assert_types(source.select(names), actual_table, target_path)
    _assert_same_multiset(
        expected, actual_table.to_pylist(), names, f"snapshot target {target_path} vs {source_path}@{version}"
    )


def target_rows(target_path: str | Path, storage_options: Mapping[str, str] | None = None) -> list[Row]:
    """The target's data rows (no ``_sharesync*`` columns), in storage order."""
    return _data_only(_read_target(target_path, storage_options)).to_pylist()


def read_target_table(target_path: str | Path) -> pa.Table:
    """The whole target, every column, in one spelling per type (see :func:`_normalise`)."""
    return _read_target(target_path)


def source_version(source_path: str | Path) -> int:
    return DeltaTable(str(source_path)).version()


# ---------------------------------------------------------------- reading


def _snapshot(path: str | Path, version: int) -> pa.Table:
    """The snapshot's rows with columns in the table schema's order (as the protocol reports it)."""
    dt = DeltaTable(str(path), version=version)
    table = _normalise(dt.to_pyarrow_table())
    return table.select([f.name for f in dt.schema().fields])


def _schema_order(path: str | Path, version: int) -> list[str]:
    """Column names of the table schema at ``version``, in its order."""
    return [f.name for f in DeltaTable(str(path), version=version).schema().fields]


def _read_target(path: str | Path, storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """Through deltalake's QueryBuilder, as sharesync reads its targets: they may hold deletion vectors."""
    options = dict(storage_options) if storage_options else None
    return _normalise(read_rows(DeltaTable(str(path), storage_options=options)))


def _data_only(table: pa.Table) -> pa.Table:
    return table.select([c for c in table.column_names if not c.startswith(SHARESYNC_PREFIX)])


def _normalise(table: pa.Table) -> pa.Table:
    """One spelling per type: views → plain, ``Etc/UTC`` → ``UTC``, nullability ignored."""
    fields = []
    for field in table.schema:
        kind = field.type
        if pa.types.is_string_view(kind) or pa.types.is_large_string(kind):
            kind = pa.string()
        elif pa.types.is_binary_view(kind) or pa.types.is_large_binary(kind):
            kind = pa.binary()
        elif pa.types.is_timestamp(kind) and kind.tz in ("Etc/UTC", "+00:00", "UTC"):
            kind = pa.timestamp(kind.unit, tz="UTC")
        fields.append(pa.field(field.name, kind, nullable=True))
    return table.cast(pa.schema(fields))


def _projected_names(source_names: Sequence[str], keys: Sequence[str], columns: Sequence[str] | None) -> list[str]:
    if columns is None:
        return [n for n in source_names if n not in _CDF_COLUMNS]
    wanted = {c.lower() for c in [*keys, *columns]}
    return [n for n in source_names if n.lower() in wanted]


def _project(row: Row, names: Sequence[str]) -> Row:
    return {n: row.get(n) for n in names}


# ---------------------------------------------------------------- comparing


def _assert_types(expected: pa.Table, actual: pa.Table, target: str | Path) -> None:
    """Same columns with the same types; order is free (an added column lands last in the target,
    while the provider's writer may reorder its schema when it adds one)."""
    want = {f.name: f.type for f in expected.schema}
    got = {f.name: f.type for f in actual.schema}
    assert got == want, f"target {target} columns/types differ:\n  expected {want}\n  actual   {got}"


def _by_key(rows: list[Row], keys: Sequence[str], what: str) -> dict[tuple[Any, ...], Row]:
    out: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        key = tuple(row[k] for k in keys)
        assert key not in out, f"{what} has key {key} twice"
        out[key] = row
    return out


def _assert_same_multiset(expected: list[Row], actual: list[Row], names: Sequence[str], what: str) -> None:
    want = Counter(tuple(r[n] for n in names) for r in expected)
    got = Counter(tuple(r[n] for n in names) for r in actual)
    if want == got:
        return
    missing, extra = want - got, got - want
    lines = [f"{what}: {sum(missing.values())} rows missing, {sum(extra.values())} unexpected (columns {list(names)})"]
    lines += [f"  missing x{n}: {row}" for row, n in list(missing.items())[:_SHOW]]
    lines += [f"  unexpected x{n}: {row}" for row, n in list(extra.items())[:_SHOW]]
    raise AssertionError("\n".join(lines))


# ---------------------------------------------------------------- filters, evaluated independently


def _matches(row: Row, where: Where) -> bool:
    """AND of the predicates; only TRUE keeps a row (NULL, i.e. unknown, drops it)."""
    return all(_predicate(row, p) is True for p in where or ())


def _predicate(row: Row, predicate: Mapping[str, Any]) -> bool | None:
    column, op, val = predicate["col"], predicate["op"], predicate.get("val")
    value = _lookup(row, column)
    if op == "is_null":
        return value is None
    if op == "is_not_null":
        return value is not None
    if value is None:
        return None  # any comparison with NULL is unknown
    if op == "in":
        return any(value == _coerce(v, value) for v in val)
    if op in ("like", "ilike"):
        flags = re.IGNORECASE if op == "ilike" else 0
        pattern = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in val)
        return re.fullmatch(pattern, str(value), flags | re.DOTALL) is not None
    other = _coerce(val, value)
    compare = {
        "eq": lambda a, b: a == b,
        "neq": lambda a, b: a != b,
        "gt": lambda a, b: a > b,
        "gte": lambda a, b: a >= b,
        "lt": lambda a, b: a < b,
        "lte": lambda a, b: a <= b,
    }[op]
    return bool(compare(value, other))


def _lookup(row: Row, column: str) -> Any:
    for name, value in row.items():
        if name.lower() == column.lower():
            return value
    raise KeyError(f"filter column {column!r} not in {list(row)}")


def _coerce(val: Any, like: Any) -> Any:
    """The filter literal as the column's Python type (the config writes dates as strings)."""
    if isinstance(like, bool) or val is None:
        return val
    if isinstance(like, datetime) and isinstance(val, str):
        parsed = datetime.fromisoformat(val)
        return parsed if parsed.tzinfo or like.tzinfo is None else parsed.replace(tzinfo=like.tzinfo)
    if isinstance(like, date) and not isinstance(like, datetime) and isinstance(val, str):
        return date.fromisoformat(val)
    if isinstance(like, Decimal):
        return Decimal(str(val))
    return val
