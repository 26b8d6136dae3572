"""What a Delta log says, parsed: file actions, metadata, protocol, commits and replay state.

Pure functions and values only (the files on disk are :mod:`~sharesync.sync.server.deltalog`'s
job). Besides the fields the parquet response format needs, every action keeps its own JSON
(``raw``), because the delta response format hands actions to the client as the log wrote them
(spec "API Response Actions in Delta Format"). Checkpoint rows come from pyarrow with maps as
key/value pair lists and absent fields as ``None``; :func:`normalize` gives them the shape of a
JSON commit so both sources serve the same lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sharesync.sync.server.deletionvectors import DeletionVector

JsonObject = dict[str, object]

# The table properties that make a parquet-format answer wrong, and the reader feature a client
# must list to read the table anyway (reference server: SnapshotChecker / DeltaAction).
DELETION_VECTORS_PROPERTY = "delta.enableDeletionVectors"
COLUMN_MAPPING_PROPERTY = "delta.columnMapping.mode"
_MAP_FIELDS = ("partitionValues", "tags", "configuration", "options")


class LogError(Exception):
    """The log is unreadable or the version asked for cannot be reconstructed."""


class VersionUnavailable(LogError):
    """A version the log no longer covers (cleaned up) or that never existed."""

    def __init__(self, version: int, earliest: int, latest: int) -> None:
        self.version, self.earliest, self.latest = version, earliest, latest
        super().__init__(f"version {version} is outside the available range [{earliest}, {latest}]")


def normalize(value: object) -> object:
    """Checkpoint rows as JSON commits write them: maps as objects, absent fields left out."""
    if isinstance(value, dict):
        result: JsonObject = {}
        for key, item in value.items():
            if item is None or str(key).endswith("_parsed"):  # checkpoints' typed copies of stats etc.
                continue
            if key in _MAP_FIELDS:  # maps keep their nulls (a null partition value means something)
                pairs = item if isinstance(item, list) else list(dict(item).items())
                result[str(key)] = {str(k): v for k, v in pairs}
                continue
            result[str(key)] = normalize(item)
        return result
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


@dataclass(frozen=True)
class FileEntry:
    """One data or change file as the log describes it (``path`` is the log's URI-encoded form)."""

    path: str
    size: int | None
    partition_values: dict[str, str | None]
    stats: str | None = None
    data_change: bool = True
    deletion_vector: DeletionVector | None = None
    raw: JsonObject = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_records(self) -> int | None:
        if not self.stats:
            return None
        try:
            value = json.loads(self.stats).get("numRecords")
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, int) else None

    @property
    def live_records(self) -> int | None:
        """Rows a reader gets: ``numRecords`` counts the rows a deletion vector removed too."""
        total = self.num_records
        if total is None or self.deletion_vector is None:
            return total
        return max(total - self.deletion_vector.cardinality, 0)


@dataclass(frozen=True)
class TableMetadata:
    id: str
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    name: str | None = None
    description: str | None = None
    raw: JsonObject = field(default_factory=dict, compare=False, repr=False)

    @property
    def cdf_enabled(self) -> bool:
        return self.configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"

    @property
    def required_reader_features(self) -> frozenset[str]:
        """Reader features (lower case) a client needs because a table property turns them on."""
        needed: set[str] = set()
        if self.configuration.get(DELETION_VECTORS_PROPERTY, "false").lower() != "false":
            needed.add("deletionvectors")
        if self.configuration.get(COLUMN_MAPPING_PROPERTY, "none").lower() != "none":
            needed.add("columnmapping")
        return frozenset(needed)


@dataclass(frozen=True)
class TableProtocol:
    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    def to_json(self) -> JsonObject:
        result: JsonObject = {"minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version}
        if self.reader_features:
            result["readerFeatures"] = list(self.reader_features)
        if self.writer_features:
            result["writerFeatures"] = list(self.writer_features)
        return result


@dataclass(frozen=True)
class Commit:
    """The actions of one version, in log order."""

    version: int
    timestamp: int
    adds: tuple[FileEntry, ...] = ()
    removes: tuple[FileEntry, ...] = ()
    cdcs: tuple[FileEntry, ...] = ()
    # The adds and removes interleaved as the commit wrote them: answers keep the log's line order
    # (the reference server does), so they compare line by line with the reference's.
    file_actions: tuple[tuple[str, FileEntry], ...] = ()
    metadata: TableMetadata | None = None
    protocol: TableProtocol | None = None
    operation: str | None = None

    @property
    def min_reader_version(self) -> int | None:
        return self.protocol.min_reader_version if self.protocol is not None else None


@dataclass(frozen=True)
class Snapshot:
    version: int
    timestamp: int
    metadata: TableMetadata
    protocol: TableProtocol
    files: tuple[FileEntry, ...]  # sorted by path, so page indexes are stable for a version

    @property
    def min_reader_version(self) -> int:
        return self.protocol.min_reader_version

    @property
    def size(self) -> int:
        return sum(f.size or 0 for f in self.files)


# ---------------------------------------------------------------- parsing


def _object(value: object) -> JsonObject:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, int | float | str) else None


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _names(value: object) -> tuple[str, ...] | None:
    return tuple(str(v) for v in value) if isinstance(value, list) else None


def parse_entry(action: JsonObject) -> FileEntry:
    raw = _object(normalize(action))
    dv = raw.get("deletionVector")
    return FileEntry(
        path=str(raw["path"]),
        size=_int_or_none(raw.get("size")),
        partition_values={k: _str_or_none(v) for k, v in _object(raw.get("partitionValues")).items()},
        stats=_str_or_none(raw.get("stats")),
        data_change=bool(raw.get("dataChange", True)),
        deletion_vector=DeletionVector.from_json(_object(dv)) if isinstance(dv, dict) else None,
        raw=raw,
    )


def parse_metadata(action: JsonObject) -> TableMetadata:
    raw = _object(normalize(action))
    return TableMetadata(
        id=str(raw["id"]),
        schema_string=str(raw["schemaString"]),
        partition_columns=_names(raw.get("partitionColumns")) or (),
        configuration={k: str(v) for k, v in _object(raw.get("configuration")).items() if v is not None},
        name=_str_or_none(raw.get("name")),
        description=_str_or_none(raw.get("description")),
        raw=raw,
    )


def parse_protocol(action: JsonObject) -> TableProtocol:
    return TableProtocol(
        min_reader_version=_int_or_none(action.get("minReaderVersion")) or 1,
        min_writer_version=_int_or_none(action.get("minWriterVersion")) or 2,
        reader_features=_names(action.get("readerFeatures")),
        writer_features=_names(action.get("writerFeatures")),
    )


def parse_commit(version: int, lines: list[str], fallback_timestamp: int) -> Commit:
    """Parse the NDJSON of one commit file; unknown actions are ignored (Delta protocol rule)."""
    adds: list[FileEntry] = []
    removes: list[FileEntry] = []
    file_actions: list[tuple[str, FileEntry]] = []
    cdcs: list[FileEntry] = []
    metadata: TableMetadata | None = None
    protocol: TableProtocol | None = None
    timestamp: int | None = None
    operation: str | None = None
    for line in lines:
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LogError(f"commit {version} of the Delta log is not valid JSON ({exc.msg})") from exc
        if "add" in action:
            adds.append(parse_entry(action["add"]))
            file_actions.append(("add", adds[-1]))
        elif "remove" in action:
            removes.append(parse_entry(action["remove"]))
            file_actions.append(("remove", removes[-1]))
        elif "cdc" in action:
            cdcs.append(parse_entry(action["cdc"]))
        elif "metaData" in action:
            metadata = parse_metadata(action["metaData"])
        elif "protocol" in action:
            protocol = parse_protocol(action["protocol"])
        elif "commitInfo" in action:
            info = action["commitInfo"]
            timestamp = info.get("inCommitTimestamp", info.get("timestamp"))
            operation = info.get("operation")
    return Commit(
        version=version,
        timestamp=int(timestamp) if timestamp is not None else fallback_timestamp,
        adds=tuple(adds),
        removes=tuple(removes),
        cdcs=tuple(cdcs),
        file_actions=tuple(file_actions),
        metadata=metadata,
        protocol=protocol,
        operation=operation,
    )


def monotonize(timestamps: dict[int, int]) -> dict[int, int]:
    """Make timestamps strictly increase with the version (Delta's history manager does the same)."""
    result: dict[int, int] = {}
    previous: int | None = None
    for version in sorted(timestamps):
        value = timestamps[version]
        if previous is not None and value <= previous:
            value = previous + 1
        result[version] = previous = value
    return result


# ---------------------------------------------------------------- replay


@dataclass
class ReplayState:
    """Mutable replay state, rolled forward one commit at a time."""

    version: int
    metadata: TableMetadata | None
    protocol: TableProtocol
    files: dict[str, FileEntry]

    def apply(self, commit: Commit) -> None:
        for removed in commit.removes:
            self.files.pop(removed.path, None)
        for added in commit.adds:  # a DV update removes and re-adds the same path: the add wins
            self.files[added.path] = added
        if commit.metadata is not None:
            self.metadata = commit.metadata
        if commit.protocol is not None:
            self.protocol = commit.protocol
        self.version = commit.version

    def freeze(self, timestamp: int) -> Snapshot:
        if self.metadata is None:
            raise LogError(f"no metaData action at or before version {self.version}")
        ordered = tuple(self.files[p] for p in sorted(self.files))
        return Snapshot(self.version, timestamp, self.metadata, self.protocol, ordered)

    def copy(self) -> ReplayState:
        return ReplayState(self.version, self.metadata, self.protocol, dict(self.files))
