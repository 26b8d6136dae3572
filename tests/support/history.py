"""An independent model of history mode, in plain Python: no engine or sharesync code inside.

:class:`HistoryModel` rebuilds the expected target from the change rows, one version at a time,
by the rules of issue 14: within a version the last image per key wins (upsert beats delete
beats preimage); an upsert closes the open row and opens a new one (or, touching only untracked
columns, updates it in place); a delete closes it; a snapshot closes every open row and opens its
own. :func:`apply_actions` applies a plan's action rows to a list of rows as a MERGE would, and
fails on an action that matches no row, or more than one.

:func:`source_history` feeds the model from a provider table's own Delta log (``deltalake``'s
``load_cdf``), and :func:`assert_history_matches` compares a target with it row for row: the
end-to-end checker of history mode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Row = dict[str, Any]

VF, VT = "_sharesync_valid_from_version", "_sharesync_valid_to_version"
VF_TS, VT_TS, CURRENT = "_sharesync_valid_from", "_sharesync_valid_to", "_sharesync_is_current"
HISTORY = (VF, VT, VF_TS, VT_TS, CURRENT)
CHANGE = ("_change_type", "_commit_version", "_commit_timestamp")
UPSERTS = ("insert", "update_postimage")


@dataclass
class HistoryModel:
    keys: Sequence[str]
    columns: Sequence[str]  # the data columns, keys included
    tracked: Sequence[str] | None = None  # None: every change opens a row
    keep: Callable[[Row], bool] | None = None  # the user's filter: an upsert it drops is a delete
    rows: list[Row] = field(default_factory=list)

    def key(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.keys)

    def open_row(self, key: tuple[Any, ...]) -> Row | None:
        found = [r for r in self.rows if r[CURRENT] and self.key(r) == key]
        assert len(found) <= 1, found
        return found[0] if found else None

    def apply_version(self, version: int, ts: datetime | None, changes: Iterable[Row]) -> None:
        for key, (image, upsert) in self._winners(changes).items():
            current = self.open_row(key)
            if upsert and current is not None and self._untracked_only(current, image):
                current.update({c: image[c] for c in self.columns})
                continue
            if current is not None:
                current.update({VT: version, VT_TS: ts, CURRENT: False})
            if upsert:
                self.rows.append({**{c: image[c] for c in self.columns}, **_opened(version, ts)})

    def snapshot(self, version: int, ts: datetime | None, rows: Iterable[Row]) -> None:
        for row in self.rows:
            if row[CURRENT]:
                row.update({VT: version, VT_TS: ts, CURRENT: False})
        for image, upsert in self._winners(rows).values():
            if upsert:
                self.rows.append({**{c: image[c] for c in self.columns}, **_opened(version, ts)})

    def _winners(self, changes: Iterable[Row]) -> dict[tuple[Any, ...], tuple[Row, bool]]:
        rank = {"insert": 0, "update_postimage": 0, "delete": 1, "update_preimage": 2}
        best: dict[tuple[Any, ...], Row] = {}
        for row in changes:
            key = self.key(row)
            if key not in best or rank[row["_change_type"]] < rank[best[key]["_change_type"]]:
                best[key] = row
        kept = self.keep or (lambda _: True)
        return {k: (r, r["_change_type"] in UPSERTS and kept(r)) for k, r in best.items()}

    def _untracked_only(self, current: Row, image: Row) -> bool:
        return self.tracked is not None and all(current[c] == image[c] for c in self.tracked)

    def sorted_rows(self) -> list[Row]:
        return sort_history(self.rows, self.keys)


def _opened(version: int, ts: datetime | None) -> Row:
    return {VF: version, VT: None, VF_TS: ts, VT_TS: None, CURRENT: True}


def sort_history(rows: Iterable[Row], keys: Sequence[str]) -> list[Row]:
    """Rows by key (NULL first) and valid-from version: a stable order to compare histories in."""
    return sorted(rows, key=lambda r: (*((r[k] is not None, r[k] if r[k] is not None else 0) for k in keys), r[VF]))


def apply_actions(rows: list[Row], actions: Iterable[Row], keys: Sequence[str], columns: Sequence[str]) -> list[Row]:
    """``rows`` after a plan's actions, as one MERGE on (keys, valid-from version) applies them."""
    out = [dict(r) for r in rows]
    by_identity: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(out):
        identity = (*(row[k] for k in keys), row[VF])
        assert identity not in by_identity, f"two target rows {identity}"
        by_identity[identity] = i
    gone: set[int] = set()
    added: list[Row] = []
    for action in actions:
        if action["__ss_action"] == "insert":
            assert action["__ss_match_version"] is None
            added.append({c: action[c] for c in (*columns, *HISTORY)})
            continue
        i = by_identity[(*(action[k] for k in keys), action["__ss_match_version"])]
        assert i not in gone, f"two actions for one row {action}"
        gone.add(i)
        if action["__ss_action"] == "update":
            values = {c: action[c] for c in columns if c not in keys} if action["__ss_set_values"] else {}
            added.append({**out[i], **values, VT: action[VT], VT_TS: action[VT_TS], CURRENT: action[CURRENT]})
    kept = [r for i, r in enumerate(out) if i not in gone] + added
    identities = [(*(r[k] for k in keys), r[VF]) for r in kept]
    assert len(set(identities)) == len(identities), "an insert duplicates a row"
    return kept


# ---------------------------------------------------------------- a target against its provider's change feed


def source_history(
    source: str | Path,
    keys: Sequence[str],
    *,
    start: int,
    end: int,
    columns: Sequence[str] | None = None,
    tracked: Sequence[str] | None = None,
    keep: Callable[[Row], bool] | None = None,
    gaps: Mapping[int, int] | None = None,
) -> list[Row]:
    """The history a target synced from the provider table at ``source`` must hold, rebuilt from
    the provider's own Delta log with ``deltalake``: the snapshot at ``start`` opens, then every
    version through ``end`` of the change data feed (``load_cdf``) is applied one at a time.

    ``gaps``: re-bootstraps after a history gap, ``{snapshot version: last version applied before
    it}`` — the versions in between were not served; at the snapshot version every open row
    closes and the snapshot's rows open. ``columns``: the data columns kept (keys added), all by
    default. ``tracked``/``keep``: as :class:`HistoryModel`. Commit times: each version's
    ``commitInfo``.
    """
    import pyarrow as pa
    from deltalake import DeltaTable

    path, gaps = str(source), gaps or {}
    names = [f.name for f in DeltaTable(path, version=end).schema().fields]
    if columns is not None:
        wanted = {c.lower() for c in (*keys, *columns)}
        names = [n for n in names if n.lower() in wanted]
    model = HistoryModel(keys, names, tracked, keep)
    stamps = commit_times(path)
    changes: dict[int, list[Row]] = {}
    if end > start:
        feed = DeltaTable(path).load_cdf(starting_version=start + 1, ending_version=end)
        for row in pa.RecordBatchReader.from_stream(feed).read_all().to_pylist():
            changes.setdefault(int(row["_commit_version"]), []).append(row)
    skipped = {v for at, applied in gaps.items() for v in range(applied + 1, at + 1)}
    model.snapshot(start, stamps[start], _snapshot_rows(path, start, names))
    for version in range(start + 1, end + 1):
        if version not in skipped:
            model.apply_version(version, stamps[version], changes.get(version, []))
        if version in gaps:
            model.snapshot(version, stamps[version], _snapshot_rows(path, version, names))
    return model.sorted_rows()


def commit_times(path: str | Path) -> dict[int, datetime]:
    """Each version's commit time as the provider's log records it (UTC)."""
    from deltalake import DeltaTable

    return {
        int(c["version"]): datetime.fromtimestamp(int(c["timestamp"]) / 1000, tz=UTC)
        for c in DeltaTable(str(path)).history()
    }


def _snapshot_rows(path: str, version: int, names: Sequence[str]) -> list[Row]:
    from deltalake import DeltaTable

    rows = DeltaTable(path, version=version).to_pyarrow_table().to_pylist()
    return [{**{n: r.get(n) for n in names}, "_change_type": "insert"} for r in rows]


def assert_history_matches(target: str | Path, expected: list[Row], keys: Sequence[str]) -> None:
    """The target's rows (every column, sharesync's five included) equal ``expected``, row for row."""
    from support.verify import read_target_table

    table = read_target_table(target)
    actual = sort_history(table.to_pylist(), keys)
    names = sorted({*expected[0]} if expected else set(table.column_names))
    assert sorted(table.column_names) == names, f"target {target} columns {sorted(table.column_names)} != {names}"
    if actual == expected:
        return
    want = {(*(r[k] for k in keys), r[VF]): r for r in expected}
    got = {(*(r[k] for k in keys), r[VF]): r for r in actual}
    lines = [f"history target {target}: {len(actual)} rows, {len(expected)} expected"]
    lines += [f"  missing {k}: {want[k]}" for k in [k for k in want if k not in got][:5]]
    lines += [f"  unexpected {k}: {got[k]}" for k in [k for k in got if k not in want][:5]]
    for k in [k for k in want if k in got and want[k] != got[k]][:5]:
        diff = {c: (want[k][c], got[k].get(c)) for c in want[k] if want[k][c] != got[k].get(c)}
        lines.append(f"  {k} differs (expected, actual): {diff}")
    raise AssertionError("\n".join(lines))
