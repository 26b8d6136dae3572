"""Which tables the server shares: every ``ROOT/<share>/<schema>/<table>`` holding a ``_delta_log``.

The directory tree is the configuration, read again on each request so that tests and demos
can add tables while the server runs. Names are matched case-insensitively (spec: "It's
case-insensitive") and answered in the spelling found on disk. Ids are UUIDs derived from the
names, so they are stable across restarts, as the spec asks ("stay immutable").
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from sharesync.sync.server.deltalog import LOG_DIR, DeltaLog
from sharesync.sync.server.problems import not_found

_ID_NAMESPACE = uuid.UUID("6c1e0a9e-5d1b-4c55-9d0e-2f4a7f3c1b10")


def stable_id(*names: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, "/".join(n.lower() for n in names)))


@dataclass(frozen=True)
class SharedTable:
    share: str
    schema: str
    name: str
    path: Path

    @property
    def full_name(self) -> str:
        return f"{self.share}.{self.schema}.{self.name}"

    @property
    def id(self) -> str:
        return stable_id(self.share, self.schema, self.name)

    @property
    def share_id(self) -> str:
        return stable_id(self.share)


def _subdirs(path: Path) -> list[str]:
    try:
        names = [e.name for e in os.scandir(path) if e.is_dir() and not e.name.startswith((".", "_"))]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(names)


def _find(names: list[str], wanted: str) -> str | None:
    lowered = wanted.lower()
    return next((n for n in names if n.lower() == lowered), None)


class Catalog:
    """Shares, schemas and tables under one root directory, plus one cached log per table."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self._logs: dict[Path, DeltaLog] = {}
        self._lock = threading.Lock()

    def shares(self) -> list[str]:
        return _subdirs(self.root)

    def share(self, name: str) -> str:
        found = _find(self.shares(), name)
        if found is None:
            raise not_found(f"share '{name}' not found")
        return found

    def schemas(self, share: str) -> list[str]:
        share = self.share(share)
        return _subdirs(self.root / share)

    def schema(self, share: str, name: str) -> tuple[str, str]:
        share = self.share(share)
        found = _find(_subdirs(self.root / share), name)
        if found is None:
            raise not_found(f"schema '{name}' not found")
        return share, found

    def tables(self, share: str, schema: str) -> list[SharedTable]:
        share, schema = self.schema(share, schema)
        base = self.root / share / schema
        return [SharedTable(share, schema, t, base / t) for t in _subdirs(base) if (base / t / LOG_DIR).is_dir()]

    def all_tables(self, share: str) -> list[SharedTable]:
        share = self.share(share)
        return [t for schema in _subdirs(self.root / share) for t in self.tables(share, schema)]

    def table(self, share: str, schema: str, name: str) -> SharedTable:
        missing = not_found(
            f"[Share/Schema/Table] '{share}/{schema}/{name}' does not exist, "
            "please contact your share provider for further information."
        )
        found_share = _find(self.shares(), share)
        if found_share is None:
            raise missing
        found_schema = _find(_subdirs(self.root / found_share), schema)
        if found_schema is None:
            raise missing
        base = self.root / found_share / found_schema
        found = _find(_subdirs(base), name)
        if found is None or not (base / found / LOG_DIR).is_dir():
            raise missing
        return SharedTable(found_share, found_schema, found, base / found)

    def log(self, table: SharedTable) -> DeltaLog:
        with self._lock:
            log = self._logs.get(table.path)
            if log is None:
                log = self._logs[table.path] = DeltaLog(table.path)
            return log
