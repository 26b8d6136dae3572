"""Lines of the delta response format, read into the same models as parquet answers.

Spec "API Response Actions in Delta Format": each line wraps one Delta log action as the
provider's log holds it — ``protocol.deltaProtocol``, ``metaData.deltaMetadata`` (plus
``version``, ``size``, ``numFiles``) and ``file`` (``id``, ``deletionVectorFileId``,
``version``, ``timestamp``, ``expirationTimestamp``) around a ``deltaSingleAction`` holding one
``add``, ``remove`` or ``cdc`` whose ``path`` is the presigned URL. A server picks this format
for tables a parquet answer cannot describe (deletion vectors, column mapping). Reading it into
:mod:`.wire`'s models means planning, staging and the jobs see one model whichever format the
server chose: a snapshot's ``add`` is a :class:`~.wire.File`, a change feed's ``add`` /
``remove`` / ``cdc`` an :class:`~.wire.AddFile` / :class:`~.wire.RemoveFile` /
:class:`~.wire.CdfFile`; deletion vectors ride along on the file, column-mapped names stay
physical (staging maps them, knowing the batch's schema).
"""

from __future__ import annotations

from collections.abc import Mapping

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.properties import DeletionVectorDescriptor
from sharesync.sync.protocol.wire import (
    Action,
    AddFile,
    CdfFile,
    DataFile,
    EndStreamAction,
    File,
    Metadata,
    Protocol,
    RemoveFile,
    decode_wrapper,
    validate_action,
)

_KNOWN = dict.fromkeys(("protocol", "metaData", "file", "endStreamAction"))
_CHANGE_MODELS: dict[str, type[AddFile | RemoveFile | CdfFile]] = {"add": AddFile, "remove": RemoveFile, "cdc": CdfFile}


_METADATA_EXTRAS = ("version", "size", "numFiles", "location", "auxiliaryLocations", "accessModes")


def parse_delta_action(line: str | bytes, *, changes: bool) -> Action | None:
    """One delta-format line as its action; None when it holds only wrappers this client does not know.

    ``changes``: the answer is a change feed (``/changes``, or a query with ``startingVersion``),
    whose ``add`` lines are changes rather than the files of a snapshot.
    """
    found = decode_wrapper(line, _KNOWN)
    if found is None:
        return None
    key, value = found
    if not isinstance(value, dict):
        raise ProtocolViolation(f"invalid {key!r} action: not a JSON object")
    if key == "protocol":
        inner = _inner(value, "deltaProtocol", key)
        return validate_action(Protocol, key, _present({**inner, "version": value.get("version")}))
    if key == "metaData":
        inner = _inner(value, "deltaMetadata", key)
        # Beside deltaMetadata, as in the parquet format's metaData: the answer's own fields.
        extra = {name: value.get(name) for name in _METADATA_EXTRAS}
        return validate_action(Metadata, key, _present({**inner, **extra}))
    if key == "file":
        return _file(value, changes=changes)
    return validate_action(EndStreamAction, key, value)


def _file(wrapper: Mapping[str, object], *, changes: bool) -> DataFile:
    single = _inner(wrapper, "deltaSingleAction", "file")
    if len(single) != 1 or next(iter(single)) not in _CHANGE_MODELS:
        raise ProtocolViolation(
            f"invalid 'file' action: deltaSingleAction must hold one add, remove or cdc, got {list(single)}"
        )
    kind, action = next(iter(single.items()))
    if not isinstance(action, dict):
        raise ProtocolViolation(f"invalid 'file' action: deltaSingleAction.{kind} is not a JSON object")
    if not changes and kind != "add":
        raise ProtocolViolation(f"a snapshot lists the table's files as add actions, got a {kind} action")
    # The spec's own example puts the size beside the action; Delta puts it in the action.
    size = action.get("size", wrapper.get("size"))
    if size is None:
        # Optional for a Delta remove without extendedFileMetadata; every current writer records it.
        raise ProtocolViolation(
            f"the {kind} action of file {wrapper.get('id')} has no size; sharesync checks every download against it"
        )
    raw_dv = action.get("deletionVector")
    fields: dict[str, object] = {
        "url": action.get("path"),
        "id": wrapper.get("id"),
        "partitionValues": action.get("partitionValues"),
        "size": size,
        "stats": action.get("stats") if kind == "add" else None,
        "dataChange": action.get("dataChange"),
        "deletionVector": DeletionVectorDescriptor.from_json(raw_dv) if isinstance(raw_dv, dict) else None,
        "deletionVectorFileId": wrapper.get("deletionVectorFileId"),
        "version": wrapper.get("version"),
        "timestamp": wrapper.get("timestamp"),
        "expirationTimestamp": wrapper.get("expirationTimestamp"),
    }
    model: type[DataFile] = _CHANGE_MODELS[kind] if changes else File
    return validate_action(model, "file", _present(fields))


def _inner(wrapper: Mapping[str, object], name: str, key: str) -> dict[str, object]:
    inner = wrapper.get(name)
    if not isinstance(inner, dict):
        raise ProtocolViolation(f"invalid {key!r} action: {name} is missing or not a JSON object")
    return inner


def _present(fields: dict[str, object]) -> dict[str, object]:
    """Absent and null fields alike take the model's default (or fail as missing when required)."""
    return {k: v for k, v in fields.items() if v is not None}
