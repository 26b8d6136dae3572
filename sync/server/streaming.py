"""NDJSON response bodies of the table endpoints, and what a failure half way through becomes.

One action per line and per body message (the fault middleware relies on that). Lines are
produced while the body streams, in a worker thread (they read the disk), a batch per hop. A
failure then comes after the 200, so it ends the body with ``endStreamAction.errorMessage``
(spec "EndStreamAction": the client must fail the query) instead of a cut connection.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator

from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from sharesync.sync.protocol.wire import EndStreamAction, wrap_action
from sharesync.sync.server.answers import Answer
from sharesync.sync.server.logmodel import JsonObject, LogError
from sharesync.sync.server.problems import ApiError

log = logging.getLogger(__name__)

NDJSON_TYPE = "application/x-ndjson; charset=utf-8"
VERSION_HEADER = "Delta-Table-Version"
CAPABILITIES_HEADER = "delta-sharing-capabilities"

_BATCH = 256  # lines produced per worker-thread hop


def stream(answer: Answer, include_end_stream: bool) -> StreamingResponse:
    """The answer as a streamed body, with the headers that say what was honoured."""

    async def lines() -> AsyncIterator[bytes]:
        source = iter(answer.lines)
        while True:
            batch, failure = await run_in_threadpool(_next_lines, source)
            for line in batch:
                yield (json.dumps(line, separators=(",", ":")) + "\n").encode()
            if failure is not None:
                end = wrap_action(EndStreamAction(error_message=failure))
                yield (json.dumps(end, separators=(",", ":")) + "\n").encode()
                return
            if len(batch) < _BATCH:
                return

    # Echo what was honoured (the Spark connector checks the echo before trusting the last line).
    capabilities = f"responseformat={answer.response_format}"
    if include_end_stream:
        capabilities += ";includeendstreamaction=true"
    headers = {VERSION_HEADER: str(answer.version), CAPABILITIES_HEADER: capabilities}
    return StreamingResponse(lines(), media_type=NDJSON_TYPE, headers=headers)


def _next_lines(source: Iterator[JsonObject]) -> tuple[list[JsonObject], str | None]:
    """Up to a batch of lines, and what went wrong if producing them failed."""
    batch: list[JsonObject] = []
    try:
        for line in source:
            batch.append(line)
            if len(batch) == _BATCH:
                break
    except ApiError as exc:
        return batch, exc.message
    except LogError as exc:
        log.warning("failed while streaming an answer: %s", exc)
        return batch, f"the table cannot be read: {exc}"
    except OSError as exc:  # the server's own paths stay out of the message
        log.warning("failed while streaming an answer: %s", exc)
        return batch, f"the table cannot be read: {exc.strerror or type(exc).__name__}"
    except Exception:  # noqa: BLE001 - after the 200 the client can only learn it from the stream
        log.exception("unhandled error while streaming an answer")
        return batch, "internal error while streaming the response"
    return batch, None
