"""Which tables the server shares: every ``ROOT/<share>/<schema>/<table>`` holding a ``_delta_log``.

The directory tree is the configuration, read again on each request so that tests and demos
can add tables while the server runs. Names are matched case-insensitively (spec: "It's
case-insensitive") and answered in the spelling found on disk. Ids are UUIDs derived from the
names, so they are stable across restarts, as the spec asks ("stay immutable").

What the provider says about a share (``displayName``, ``comment``, ``properties``: spec "List
Shares") is a ``_share.json`` in its directory holding those fields, read on each listing too;
a table's description is its Delta log's own ``metaData.description``.

Tables in object stores (S3, Azure, GCS) are named in the settings instead (``remote_tables``, with their access modes):
their log is mirrored into a local directory (:class:`~sharesync.sync.core.remote_table.RemoteTable`)
before each read and their files are the store's URLs, so every answer is built the same way.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sharesync.sync.core.remote_table import Keys, KeySource, RemoteTable
from sharesync.sync.core.storage import StoreKind, StoreSettings
from sharesync.sync.core.store_urls import table_root
from sharesync.sync.protocol.wire import Share
from sharesync.sync.server.deltalog import LOG_DIR, DeltaLog
from sharesync.sync.server.problems import not_found
from sharesync.sync.server.settings import RemoteTableSpec

SHARE_FILE = "_share.json"
_ID_NAMESPACE = uuid.UUID("6c1e0a9e-5d1b-4c55-9d0e-2f4a7f3c1b10")


def stable_id(*names: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, "/".join(n.lower() for n in names)))


@dataclass(frozen=True)
class SharedTable:
    share: str
    schema: str
    name: str
    path: Path
    location: str | None = None  # a remote table's root (its log is mirrored under ``path``)
    access_modes: tuple[str, ...] | None = None  # None: url only, not announced

    @property
    def full_name(self) -> str:
        return f"{self.share}.{self.schema}.{self.name}"

    @property
    def id(self) -> str:
        return stable_id(self.share, self.schema, self.name)

    @property
    def share_id(self) -> str:
        return stable_id(self.share)


def _no_keys() -> Keys:
    return Keys(StoreSettings())  # the environment's credentials (the S3 clients' own chain)


def _subdirs(path: Path) -> list[str]:
    try:
        names = [e.name for e in os.scandir(path) if e.is_dir() and not e.name.startswith((".", "_"))]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(names)


def _find(names: list[str], wanted: str) -> str | None:
    lowered = wanted.lower()
    return next((n for n in names if n.lower() == lowered), None)


def _find_subdir(path: Path, wanted: str) -> str | None:
    """``_find(_subdirs(path), wanted)`` with one ``stat`` instead of one per entry: every table
    request resolves its name, and a schema of 1,000 tables made that 1,000 stats a request."""
    lowered = wanted.lower()
    try:
        names = sorted(n for n in os.listdir(path) if n.lower() == lowered and not n.startswith((".", "_")))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return next((n for n in names if (path / n).is_dir()), None)


class Catalog:
    """Shares, schemas and tables under one root directory (and in object stores), one cached log per table.

    ``keys`` gives the credentials of the remote tables in each kind of store."""

    def __init__(
        self,
        root: Path | str,
        remote: tuple[RemoteTableSpec, ...] = (),
        keys: Callable[[StoreKind], KeySource] | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.root = Path(root)
        self._logs: dict[Path, DeltaLog] = {}
        self._lock = threading.Lock()
        cache = cache_dir or Path(tempfile.mkdtemp(prefix="sharesync-serve-"))
        self._remote: dict[tuple[str, str, str], SharedTable] = {}
        self._readers: dict[str, RemoteTable] = {}
        for spec in remote:
            share, schema, name = spec.name.split(".")
            path = cache / share / schema / name
            table = SharedTable(share, schema, name, path, spec.location, tuple(spec.access_modes))
            self._remote[(share.lower(), schema.lower(), name.lower())] = table
            source = keys(table_root(spec.location).kind) if keys is not None else _no_keys
            self._readers[table.full_name] = RemoteTable(spec.location, source)

    def remote_reader(self, table: SharedTable) -> RemoteTable | None:
        """How to reach a remote table's files (None for a table under ``root``)."""
        return self._readers.get(table.full_name)

    def _remote_in(self, share: str, schema: str | None = None) -> list[SharedTable]:
        return [
            t
            for (sh, sc, _), t in sorted(self._remote.items())
            if sh == share.lower() and (schema is None or sc == schema.lower())
        ]

    def shares(self) -> list[str]:
        remote = {t.share for t in self._remote.values()}
        return sorted({*_subdirs(self.root), *remote})

    def share(self, name: str) -> str:
        found = _find(self.shares(), name)
        if found is None:
            raise not_found(f"share '{name}' not found")
        return found

    def share_info(self, name: str) -> Share:
        """The share as listed: its name and id, and whatever its ``_share.json`` says."""
        try:
            said = json.loads((self.root / name / SHARE_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            said = {}
        return Share.model_validate({**said, "name": name, "id": stable_id(name)})

    def schemas(self, share: str) -> list[str]:
        share = self.share(share)
        return sorted({*_subdirs(self.root / share), *(t.schema for t in self._remote_in(share))})

    def schema(self, share: str, name: str) -> tuple[str, str]:
        share = self.share(share)
        found = _find(self.schemas(share), name)
        if found is None:
            raise not_found(f"schema '{name}' not found")
        return share, found

    def tables(self, share: str, schema: str) -> list[SharedTable]:
        share, schema = self.schema(share, schema)
        base = self.root / share / schema
        local = [SharedTable(share, schema, t, base / t) for t in _subdirs(base) if (base / t / LOG_DIR).is_dir()]
        return sorted([*local, *self._remote_in(share, schema)], key=lambda t: t.name)

    def all_tables(self, share: str) -> list[SharedTable]:
        share = self.share(share)
        return [t for schema in self.schemas(share) for t in self.tables(share, schema)]

    def table(self, share: str, schema: str, name: str) -> SharedTable:
        missing = not_found(
            f"[Share/Schema/Table] '{share}/{schema}/{name}' does not exist, "
            "please contact your share provider for further information."
        )
        remote = self._remote.get((share.lower(), schema.lower(), name.lower()))
        if remote is not None:
            return remote
        found_share = _find_subdir(self.root, share)
        if found_share is None:
            raise missing
        found_schema = _find_subdir(self.root / found_share, schema)
        if found_schema is None:
            raise missing
        base = self.root / found_share / found_schema
        found = _find_subdir(base, name)
        if found is None or not (base / found / LOG_DIR).is_dir():
            raise missing
        return SharedTable(found_share, found_schema, found, base / found)

    def log(self, table: SharedTable) -> DeltaLog:
        reader = self.remote_reader(table)
        if reader is not None:
            reader.mirror_log(table.path)  # every read sees the log as the store has it now
        with self._lock:
            log = self._logs.get(table.path)
            if log is None:
                log = self._logs[table.path] = DeltaLog(table.path)
            return log
