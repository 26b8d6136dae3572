"""Snapshot files the engine reads as the provider wrote them.

A bootstrap stages whole data files of one version: every row is an insert at the snapshot's
version, and what the files lack — partition columns and the change columns — is one value
per file. Decoding each file in Python only to encode it again with those columns was most of
a bootstrap's staging time (bench/README.md). So a file whose columns already have the
layout's names and types is kept as downloaded, and its constant columns are staged once per
group of files that share them: a one-row parquet file, typed by the same code as every staged
file (:func:`sharesync.sync.staging.files.constant_columns`). The engine joins each group with
its row (:func:`sharesync.pipelines.jobs.staged.read_staged`).

Kept files may spell a type differently (``string_view``, ``large_string``: the group says which
columns the engine casts) and may declare a column NOT NULL that staging declares nullable (the
join makes it nullable again), so a target is the same whichever way its rows were staged. A
file that does not fit — a column missing, another type, no rows, column mapping, a deletion
vector, dates in Spark's legacy calendar, more groups than :data:`MAX_GROUPS` — is staged the
usual way, so a batch may hold both kinds. The manifest ``_direct.json`` (skipped by
``staged_files`` like every ``_`` name) says which files are kept and how each group is read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from sharesync.sync.core.location import Location
from sharesync.sync.protocol.changes import ChangeFile
from sharesync.sync.staging.files import StageLayout, check_expansion, constant_columns, staged_writer

MANIFEST = "_direct.json"
# The one-row files: under a "_" directory, so staged_files() skips them, under names that do not
# start with "_", which engines skip even when the file is named explicitly (Sail does).
CONSTANTS_DIR = "_direct"
# Each group is one read and one join in the engine's plan: a table partitioned by thousands of
# values is staged the usual way beyond this many.
MAX_GROUPS = 64


class DirectGroup(BaseModel):
    """Provider files kept as downloaded, the one-row file of the columns they share, and the
    columns to cast to the layout's type (Spark type names: ``string``, ``binary``)."""

    model_config = ConfigDict(extra="forbid")

    constants: str
    files: list[str]
    casts: dict[str, str] = {}


class DirectManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    columns: list[str]  # the staged layout's data columns, in order
    partition_columns: list[str]  # those of ``columns`` that each group's one-row file holds
    groups: list[DirectGroup]

    @property
    def file_names(self) -> set[str]:
        return {name for group in self.groups for name in group.files}


def read_manifest(directory: Location) -> DirectManifest | None:
    """The batch's manifest; ``None`` when every file was staged the usual way."""
    manifest = directory.join(MANIFEST)
    if manifest.kind() != "file":
        return None
    with manifest.open_input() as source:
        return DirectManifest.model_validate_json(source.read())


# Other spellings of a layout type that the engine casts to it: the same values, another layout.
_SPELLINGS = {
    pa.string(): (pa.large_string(), pa.string_view()),
    pa.binary(): (pa.large_binary(), pa.binary_view()),
}
_SPARK_NAMES = {pa.string(): "string", pa.binary(): "binary"}


def casts_for(file_schema: pa.Schema, layout: StageLayout) -> dict[str, str] | None:
    """The casts that make ``file_schema``'s columns the layout's non-partition columns, or
    ``None`` when the file does not fit: a column missing (or spelled in another case), two
    columns spelled alike but for case, another type than the layout's or one of its spellings,
    or column mapping (physical names).

    Not INT96 or millisecond timestamps: how an engine reads those is its own (staging decides).
    """
    if layout.mapping.mode != "none":
        return None
    if len({name.lower() for name in file_schema.names}) < len(file_schema.names):
        return None  # two columns differing only in case: an engine's name resolution is ambiguous
    found = {field.name: field.type for field in file_schema}
    partitions = set(layout.kept_partitions)
    casts: dict[str, str] = {}
    for name, field in zip(layout.columns, layout.target, strict=False):
        if name in partitions:
            continue
        actual = found.get(name)
        if actual == field.type:
            continue
        if actual is None or actual not in _SPELLINGS.get(field.type, ()):
            return None
        casts[name] = _SPARK_NAMES[field.type]
    return casts


def _calendar_rebased(footer: dict[bytes, bytes] | None) -> bool:
    """Whether Apache Spark reads this file's dates and timestamps other than as stored.

    Files written by Spark 2, or by Spark 3+ in its legacy calendar mode, hold pre-1582 values
    in the hybrid Julian calendar: Apache Spark may shift them when it reads the file, or refuse
    it, as its rebase settings say; pyarrow — so staging — reads the stored values. Staged, the
    file reads alike on every engine.
    """
    if not footer:
        return False
    if any(key.startswith(b"org.apache.spark.legacy") for key in footer):
        return True
    version = footer.get(b"org.apache.spark.version")
    return version is not None and version.split(b".")[0] in (b"1", b"2")


def _flat_floats(footer: pq.FileMetaData) -> bool:
    """Whether a float column's statistics say min == max somewhere: Sail 0.7 then reads it as
    that constant, though NaN values — which writers leave out of min and max — may be there too
    (staged files carry no statistics)."""
    for group in range(footer.num_row_groups):
        row_group = footer.row_group(group)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            stats = chunk.statistics
            if chunk.physical_type in ("FLOAT", "DOUBLE") and stats is not None and stats.has_min_max:
                if stats.min == stats.max:
                    return True
    return False


class DirectFiles:
    """Keeps the fitting files of one snapshot batch and writes their constants and manifest.

    ``take`` runs in the downloader's worker threads, so the groups are guarded by a lock.
    """

    def __init__(self, data: Location, layout: StageLayout) -> None:
        self.data, self.layout = data, layout
        self._groups: dict[tuple[object, ...], DirectGroup] = {}
        self._lock = threading.Lock()

    def take(self, downloaded: Path, name: str, change: ChangeFile) -> int | None:
        """Keep ``downloaded`` as the staged file ``name`` if it fits; returns its rows, or ``None``
        when it must be staged the usual way (the file is then left where it is)."""
        if change.change_type is None:
            return None
        try:
            footer = pq.read_metadata(downloaded)
            schema = footer.schema.to_arrow_schema()
        except (pa.ArrowInvalid, OSError):
            return None  # staging reports what is wrong with it
        check_expansion(footer, downloaded.stat().st_size, f"file {change.id} (version {change.commit_version})")
        casts = casts_for(schema, self.layout)
        if casts is None or footer.num_rows == 0 or _calendar_rebased(footer.metadata) or _flat_floats(footer):
            return None  # (a group's join needs rows on the file side)
        # One file schema per group, unselected columns included: an engine reading several files
        # as one merges their schemas first, and refuses two types (or spellings) of one column,
        # or two metadata values of one nested field (Sail: "conflicting metadata"); schema-level
        # metadata (pandas' and the like) it merges. The commit time too: a group shares one
        # constant row.
        shape = schema.remove_metadata().serialize().to_pybytes()
        key = (tuple(sorted(change.file.partition_values.items())), shape, change.commit_timestamp_ms)
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                if len(self._groups) >= MAX_GROUPS:
                    return None
                if not self._groups and self.data.is_local:
                    self.data.filesystem.create_dir(self.data.join(CONSTANTS_DIR).path, recursive=True)
                group = DirectGroup(constants=f"{CONSTANTS_DIR}/{len(self._groups):04d}.parquet", files=[], casts=casts)
                self._groups[key] = group
                self._write_constants(group, change)  # under the lock: the group's first file
            group.files.append(name)
        self._place(downloaded, self.data.join(name))
        return int(footer.num_rows)

    def finish(self) -> None:
        """Write the manifest, if any file was kept (once every file is in place)."""
        if not self._groups:
            return
        groups = [g.model_copy(update={"files": sorted(g.files)}) for g in self._groups.values()]
        layout = self.layout
        manifest = DirectManifest(
            columns=list(layout.columns), partition_columns=list(layout.kept_partitions), groups=groups
        )
        target = self.data.join(MANIFEST)
        with target.publish() as path, target.filesystem.open_output_stream(path) as out:
            out.write(manifest.model_dump_json().encode())

    def _write_constants(self, group: DirectGroup, change: ChangeFile) -> None:
        row = constant_columns(change, self.layout)
        target = self.data.join(group.constants)
        with target.publish() as path, staged_writer(path, row.schema, target.filesystem) as writer:
            writer.write_table(row)

    @staticmethod
    def _place(downloaded: Path, target: Location) -> None:
        if target.is_local:
            os.replace(downloaded, target.path)  # the download directory is on the same disk
            return
        with target.publish() as path:
            pafs.copy_files(
                str(downloaded),
                path,
                source_filesystem=pafs.LocalFileSystem(),
                destination_filesystem=target.filesystem,
            )
