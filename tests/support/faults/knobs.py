"""Fault knobs for the local sharing server, so clients can be tested against a bad day.

Real providers expire URLs, rate-limit, fail with 5xx, cut streams and serve files that do
not match their declared size; sharesync must survive all of it. The knobs live in one
:class:`Faults` object that tests change at runtime on a running server (plain attribute
assignment, validated) and ``python -m support.faults.serve`` sets from flags. It is the server's
:class:`~sharesync.sync.server.hooks.ServerHooks`: its middleware
(:mod:`support.faults.middleware`) wraps the routes, which know nothing of faults: it answers
errors before a route runs, and rewrites response bodies line by line (NDJSON routes send one
line per body message) or byte by byte (file downloads). Randomness comes from a seeded RNG, so a seed replays the same faults.

Knobs, by what they imitate:

* outages: ``error_rate`` / ``error_status`` / ``retry_after`` (429, 5xx, revoked access);
* broken streams: ``truncate_stream``, ``drop_connection``, ``drop_end_stream_action``,
  ``end_stream_error`` (a failure after the 200; real ones, such as a file gone while the
  answer streams, produce the same ``errorMessage`` without any knob);
* broken downloads: ``url_ttl_seconds`` (expiry, in place of the server's setting), ``file_size_delta``, ``drop_file_connection``,
  ``download_delay_seconds``;
* vacuumed history, as a real provider shows it:
  ``unchecked_presign`` presigns without checking that files still exist, as the reference
  server does, so time travel and change queries hand out URLs of vacuumed files, which the
  file endpoint answers with 404; ``gone_files`` makes chosen files answer ``gone_status``
  (404 or 410, with a storage-style XML body) although they exist, e.g. ``("_change_data/",)``
  for every change-data file; ``history_error`` answers ``/changes`` with one of the reference
  servers' history errors (:data:`HISTORY_ERRORS`).

``budget`` caps how many responses any knob may fault (then the server behaves again). A
provider that lies rather than fails (repeated or missing file actions, file URLs aimed
elsewhere, a drip of bytes) has its knobs here too; :mod:`support.faults.hostile` applies them.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from starlette.types import ASGIApp

from sharesync.sync.server.answers import Context
from sharesync.sync.server.catalog import Catalog
from sharesync.sync.server.settings import ServerSettings
from support.faults.middleware import HistoryError, fault_layers


class Faults(BaseModel):
    """What goes wrong, and how often. Every field can be changed while the server runs."""

    model_config = ConfigDict(validate_assignment=True)

    url_ttl_seconds: float | None = Field(
        default=None, gt=0, description="lifetime of presigned file URLs (None: the server's url_ttl_seconds)"
    )
    error_rate: float = Field(default=0.0, ge=0, le=1, description="share of API calls answered with error_status")
    error_status: int = Field(default=503, ge=400, le=599, description="status of injected errors (429, 500, 503, …)")
    retry_after: float | None = Field(default=None, ge=0, description="Retry-After seconds sent with injected errors")
    drop_end_stream_action: bool = Field(default=False, description="omit the endStreamAction line")
    truncate_stream: bool = Field(default=False, description="end NDJSON bodies in the middle of their last line")
    drop_connection: bool = Field(default=False, description="abort NDJSON responses after their first line")
    end_stream_error: str | None = Field(default=None, description="errorMessage put into endStreamAction")
    download_delay_seconds: float = Field(default=0.0, ge=0, description="pause before each file download")
    file_size_delta: int = Field(default=0, description="serve files this many bytes longer (>0) or shorter (<0)")
    drop_file_connection: bool = Field(default=False, description="abort file downloads half way")
    unchecked_presign: bool = Field(default=False, description="presign files without checking they exist")
    gone_files: tuple[str, ...] = Field(default=(), description="file paths containing one of these answer gone_status")
    gone_status: Literal[404, 410] = Field(default=404, description="status of gone_files downloads")
    history_error: HistoryError | None = Field(default=None, description="answer /changes with this history error")
    repeat_file_action: bool = Field(default=False, description="send each answer's first file action twice")
    reverse_file_actions: bool = Field(default=False, description="send file actions in reverse order")
    omit_version: int | None = Field(default=None, description="leave out every file action of this version")
    file_url_origin: str | None = Field(default=None, description="presign file URLs at this origin instead")
    label_version: int | None = Field(default=None, ge=0, description="label every answer with this version")
    ignore_ending_version: bool = Field(default=False, description="answer /changes up to the latest version")
    ignore_metadata_version: bool = Field(default=False, description="answer /metadata of the latest version")
    drip_seconds: float = Field(default=0.0, ge=0, description="send every body one byte per this many seconds")
    omit_configuration: bool = Field(default=False, description="leave metaData.configuration out (optional)")
    budget: int | None = Field(
        default=None, ge=0, description="how many more responses may be faulted (None: no limit)"
    )
    seed: int = Field(default=0, description="seed of the RNG behind error_rate")

    _rng: random.Random = PrivateAttr(default_factory=lambda: random.Random(0))
    faulted: int = Field(default=0, description="responses faulted so far (read it in tests)")
    files_in_flight: int = Field(default=0, description="file downloads being served now (read it in tests)")
    peak_files_in_flight: int = Field(default=0, description="the most file downloads served at once")

    def model_post_init(self, context: Any) -> None:
        self._rng = random.Random(self.seed)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "seed":
            self._rng = random.Random(value)

    def reset(self) -> None:
        """Back to a well-behaved server (keeps the URL lifetime)."""
        ttl = self.url_ttl_seconds
        for name, info in type(self).model_fields.items():
            setattr(self, name, info.default)
        self.url_ttl_seconds = ttl

    def take(self) -> bool:
        """Spend one unit of budget; False when the budget is used up."""
        if self.budget is not None:
            if self.budget <= 0:
                return False
            self.budget -= 1
        self.faulted += 1
        return True

    def roll_error(self) -> bool:
        return self.error_rate > 0 and self._rng.random() < self.error_rate and self.take()

    @property
    def alters_streams(self) -> bool:
        return (
            self.drop_end_stream_action or self.truncate_stream or self.drop_connection or bool(self.end_stream_error)
        )

    @property
    def alters_files(self) -> bool:
        return self.file_size_delta != 0 or self.drop_file_connection

    def gone(self, path: str) -> bool:
        return any(fragment in path for fragment in self.gone_files) and self.take()

    # -- the server's hooks (sharesync.sync.server.hooks.ServerHooks)

    def wrap(self, app: ASGIApp, catalog: Catalog, settings: ServerSettings) -> ASGIApp:
        return fault_layers(app, self, catalog, settings)

    def answer_context(self, ctx: Context) -> Context:
        if self.url_ttl_seconds is not None:
            ctx = dataclasses.replace(ctx, url_ttl_ms=int(self.url_ttl_seconds * 1000))
        if self.unchecked_presign:
            ctx = dataclasses.replace(ctx, verify_files=False)
        return ctx
