"""The ``providers:`` section: which Delta Sharing servers a config reads, each by its profile.

A recipient usually receives shares from several providers; one config (one state store, one
Dagster code location) syncs them all. ``profile:`` stays the one-provider short form: it is
the provider named :data:`DEFAULT_PROVIDER`, whose tables keep their bare ``share.schema.table``
identity in the state store, the CLI and Dagster — so configs and stores written before
``providers:`` existed keep working unchanged. A table of any other provider is identified as
``provider/share.schema.table`` (:func:`table_key`): the same shared name from two providers is
two tables.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from sharesync.sync.core.errors import Forbidden, Unauthorized

DEFAULT_PROVIDER = "default"
E = TypeVar("E")
_PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class ProviderConfig(BaseModel):
    """One provider: its profile, and gentler limits where a provider needs them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: Path = Field(description="the Delta Sharing profile (.share file) this provider gave you")
    retry_max_attempts: int | None = Field(
        default=None, ge=1, description="attempts of a failing call to this provider (default: SHARESYNC_RETRY_…)"
    )
    retry_total_seconds: float | None = Field(default=None, gt=0, description="time bound of one call's retries")
    download_concurrency: int | None = Field(
        default=None, ge=1, le=256, description="per-table downloads in flight for this provider's tables"
    )
    min_rate_bytes_per_second: float | None = Field(
        default=None, ge=0, description="abandon an answer or download slower than this (0: no floor) ..."
    )
    min_rate_seconds: float | None = Field(default=None, gt=0, description="... for this many seconds")


def check_provider_name(name: str) -> str:
    """``name`` when it can appear in table keys, asset keys and paths (letters, digits, ``_``, ``-``)."""
    if not _PROVIDER_NAME.match(name):
        raise ValueError(f"provider name '{name}' may use only letters, digits, '_' and '-'; rename it")
    return name


def table_key(provider: str, name: str) -> str:
    """A table's identity across providers: the bare name for the default provider."""
    return name if provider == DEFAULT_PROVIDER else f"{provider}/{name}"


def credentials_refused(exc: E, provider: str, profile: Path) -> E:
    """A refused credential (401, 403) is the provider's profile's problem, not one table's: the
    error names the provider and its profile file, e.g. ``provider 'beta' (profiles/beta.share):
    … HTTP 401 …``. Anything else, and an error named already, is returned as it is."""
    if isinstance(exc, Unauthorized | Forbidden) and not exc.message.startswith("provider '"):
        return cast(E, exc.within(f"provider '{provider}' ({profile})"))
    return exc
