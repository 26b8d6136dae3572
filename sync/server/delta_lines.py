"""Lines of the delta response format (spec "API Response Actions in Delta Format").

Each line wraps a Delta action as the provider's log holds it, so the client can write the
actions into a local log and read the table with a Delta library: ``protocol.deltaProtocol``,
``metaData.deltaMetadata`` (plus ``version``/``size``/``numFiles``) and ``file`` wrappers with
``deltaSingleAction`` whose ``path`` is a presigned URL. On-disk deletion vectors are rewritten
to presigned ``p`` descriptors (see :mod:`~sharesync.sync.server.deletionvectors`) behind the
same expiring file endpoint as the data files; inline DVs pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from sharesync.sync.server.deletionvectors import DeletionVector, DeletionVectorError
from sharesync.sync.server.logmodel import FileEntry, JsonObject, LogError, Snapshot, TableMetadata, TableProtocol
from sharesync.sync.server.signing import file_id

# Presigns a path of the table (as the log writes it): the URL and its expiry (epoch ms).
Sign = Callable[[str], tuple[str, int]]

# Wrapper key of ``/changes`` line kinds → key of the Delta action inside ``deltaSingleAction``.
ACTION_KEYS = {"add": "add", "remove": "remove", "cdf": "cdc"}


def protocol_line(protocol: TableProtocol, *, version: int | None = None) -> JsonObject:
    wrapper: JsonObject = {"deltaProtocol": protocol.to_json()}
    if version is not None:
        wrapper["version"] = version
    return {"protocol": wrapper}


def metadata_line(
    meta: TableMetadata,
    *,
    version: int | None = None,
    snapshot: Snapshot | None = None,
    extra: JsonObject | None = None,
) -> JsonObject:
    """``extra``: the answer's own fields beside ``deltaMetadata`` (``location``, ``accessModes``)."""
    delta: JsonObject = {"format": {"provider": "parquet", "options": {}}, **meta.raw}
    wrapper: JsonObject = {"deltaMetadata": delta, **(extra or {})}
    if version is not None:
        wrapper["version"] = version
    if snapshot is not None:
        wrapper["size"] = snapshot.size
        wrapper["numFiles"] = len(snapshot.files)
    return {"metaData": wrapper}


def dv_log_path(dv: DeletionVector, entry: FileEntry) -> str:
    """The DV file of an on-disk descriptor, relative to the table (the file endpoint serves it)."""
    try:
        return dv.relative_path()
    except DeletionVectorError as exc:
        raise LogError(f"the deletion vector of file {entry.path} cannot be shared: {exc}") from None


def file_line(
    sign: Sign, kind: str, entry: FileEntry, *, version: int | None = None, timestamp: int | None = None
) -> JsonObject:
    """A ``file`` line: one add/remove/cdc action with presigned data and DV URLs."""
    url, expires = sign(entry.path)
    action: JsonObject = {**entry.raw, "path": url}
    wrapper: JsonObject = {"id": file_id(entry.path)}
    dv = entry.deletion_vector
    if dv is not None and dv.storage_type != "i":
        dv_path = dv_log_path(dv, entry)
        dv_url, _ = sign(dv_path)
        action["deletionVector"] = dv.presigned(dv_url)
        wrapper["deletionVectorFileId"] = file_id(dv_path)
    if version is not None:
        wrapper["version"] = version
    if timestamp is not None:
        wrapper["timestamp"] = timestamp
    wrapper["expirationTimestamp"] = expires
    wrapper["deltaSingleAction"] = {ACTION_KEYS[kind]: action}
    return {"file": wrapper}
