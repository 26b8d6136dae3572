"""A provider that lies on purpose: answers whose every byte is well formed and whose meaning is wrong.

:mod:`support.faults.middleware` breaks answers the way networks and busy servers do; this
module makes the server behave as a broken or hostile provider would, so tests can prove
sharesync treats every byte it gets as untrusted. The knobs live on the same
:class:`~support.faults.knobs.Faults` object and are not limited by its ``budget``:

* ``repeat_file_action``: each NDJSON answer sends its first file action twice;
* ``reverse_file_actions``: file actions in reverse order (versions out of order — the spec
  allows any order, so this one must be read correctly, not refused);
* ``omit_version``: ``/changes`` and ``/query`` answers leave out every file action of that
  version (the protocol alone cannot tell this from a version that changed no data);
* ``file_url_origin``: presigned file and DV URLs point at this origin instead of the server
  (``http://127.0.0.1:<other port>``, standing for a cloud metadata address);
* ``drip_seconds``: every body, API answer or file, arrives one byte at a time, this many
  seconds apart, until the knob is set back to 0;
* ``label_version``: every answer's ``Delta-Table-Version`` header and every ``metaData.version``
  say this version, whatever was answered — set to the table's latest version, a provider that
  answers time travel but labels it as its current version;
* ``ignore_ending_version``: ``/changes`` is answered as if no ``endingVersion`` was asked for
  (lines past the range); ``ignore_metadata_version``: ``/metadata`` as if no ``version`` or
  ``timestamp`` was (the latest metadata, labelled as such);
* ``omit_configuration``: every ``metaData`` line leaves out ``configuration`` (optional in the
  protocol; an independent Java server sends none), so whether the table has a change data
  feed is not said.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Protocol
from urllib.parse import parse_qsl, urlencode

from starlette.types import Message, Send

_FILE_KEYS = ("file", "add", "cdf", "remove")


class Knobs(Protocol):
    """The knobs of :class:`~support.faults.knobs.Faults` this module reads (no import cycle)."""

    repeat_file_action: bool
    reverse_file_actions: bool
    omit_version: int | None
    file_url_origin: str | None
    drip_seconds: float
    label_version: int | None
    ignore_ending_version: bool
    ignore_metadata_version: bool
    omit_configuration: bool


def alters_feed(faults: Knobs) -> bool:
    return (
        faults.repeat_file_action
        or faults.reverse_file_actions
        or faults.omit_version is not None
        or faults.file_url_origin is not None
        or faults.label_version is not None
        or faults.omit_configuration
    )


def ignore_asked(path: str, query: bytes, faults: Knobs) -> bytes:
    """The query string of a request as a provider that ignores part of it reads it."""
    dropped: set[str] = set()
    if faults.ignore_ending_version and path.endswith("/changes"):
        dropped = {"endingVersion", "endingTimestamp"}
    if faults.ignore_metadata_version and path.endswith("/metadata"):
        dropped = {"version", "timestamp"}
    if not dropped:
        return query
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return urlencode([(k, v) for k, v in pairs if k not in dropped]).encode("latin-1")


def _relabel(line: bytes, version: int) -> bytes:
    """A ``metaData`` line that names its version, naming ``version`` instead."""
    if not line.startswith(b'{"metaData"'):
        return line
    action = json.loads(line)
    if action["metaData"].get("version") is None:
        return line
    action["metaData"]["version"] = version
    return json.dumps(action, separators=(",", ":")).encode() + b"\n"


def _file_version(line: bytes) -> tuple[bool, int | None]:
    """Whether ``line`` is a file action, and its version (None in a snapshot)."""
    try:
        action = json.loads(line)
    except ValueError:
        return False, None
    key = next(iter(action), None) if isinstance(action, dict) and len(action) == 1 else None
    if key not in _FILE_KEYS or not isinstance(action[key], dict):
        return False, None
    version = action[key].get("version")
    return True, version if isinstance(version, int) else None


def rewrite_lines(lines: list[bytes], faults: Knobs, files_prefix: str) -> list[bytes]:
    """The lines of one NDJSON answer as the hostile knobs make them."""
    kinds = [_file_version(line) for line in lines]
    omitted = faults.omit_version
    files = [
        line
        for line, (is_file, version) in zip(lines, kinds, strict=True)
        if is_file and (omitted is None or version != omitted)
    ]
    others = [line for line, (is_file, _) in zip(lines, kinds, strict=True) if not is_file]
    if faults.reverse_file_actions:
        files.reverse()
    if faults.repeat_file_action and files:
        files.insert(1, files[0])
    # Protocol and metaData first, the endStreamAction last (others keeps their order).
    head = [line for line in others if not line.startswith(b'{"endStreamAction"')]
    tail = [line for line in others if line.startswith(b'{"endStreamAction"')]
    if faults.omit_configuration:
        head = [_without_configuration(line) for line in head]
    result = [*head, *files, *tail]
    if faults.label_version is not None:
        result = [_relabel(line, faults.label_version) for line in result]
    if faults.file_url_origin is not None:
        pattern = re.compile(rb'https?://[^/"]+(?=' + re.escape(files_prefix.encode()) + rb"/)")
        target = faults.file_url_origin.rstrip("/").encode()
        result = [pattern.sub(target, line) for line in result]
    return result


def _without_configuration(line: bytes) -> bytes:
    """A ``metaData`` line (parquet or delta format) without its ``configuration``."""
    if not line.startswith(b'{"metaData"'):
        return line
    action = json.loads(line)
    meta = action["metaData"]
    meta.pop("configuration", None)
    if isinstance(meta.get("deltaMetadata"), dict):
        meta["deltaMetadata"].pop("configuration", None)
    return json.dumps(action, separators=(",", ":")).encode() + b"\n"


class FeedRewriter:
    """Holds back a 200 NDJSON answer's lines (one per body message) and sends them rewritten."""

    def __init__(self, faults: Knobs, send: Send, files_prefix: str) -> None:
        self.faults, self.send, self.files_prefix = faults, send, files_prefix
        self.active = False
        self.lines: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            content_type = dict(message.get("headers", [])).get(b"content-type", b"")
            headers = message.get("headers", [])
            self.active = message["status"] == 200 and content_type.startswith(b"application/x-ndjson")
            label = self.faults.label_version
            if self.active and label is not None and any(k == b"delta-table-version" for k, _ in headers):
                headers = [(k, str(label).encode() if k == b"delta-table-version" else v) for k, v in headers]
                message = {**message, "headers": headers}
            await self.send(message)
            return
        if not self.active or message["type"] != "http.response.body":
            await self.send(message)
            return
        if message.get("body"):
            self.lines.append(message["body"])
        if not message.get("more_body", False):
            for line in rewrite_lines(self.lines, self.faults, self.files_prefix):
                await self.send({"type": "http.response.body", "body": line, "more_body": True})
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})


class Drip:
    """Sends every body one byte at a time, ``drip_seconds`` apart, while the knob is set."""

    def __init__(self, faults: Knobs, send: Send) -> None:
        self.faults, self.send = faults, send

    async def __call__(self, message: Message) -> None:
        body: bytes = message.get("body", b"") if message["type"] == "http.response.body" else b""
        more = message.get("more_body", False)
        for index in range(len(body)):
            if self.faults.drip_seconds <= 0:  # switched off: the rest at once
                await self.send({**message, "body": body[index:], "more_body": more})
                return
            await self.send({"type": "http.response.body", "body": body[index : index + 1], "more_body": True})
            await asyncio.sleep(self.faults.drip_seconds)  # the pace of the drip, not a synchronisation
        await self.send({**message, "body": b""} if body else message)
