"""Configuration of one sharing server (the fault knobs live in :mod:`sharesync.sync.server.faults`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_PREFIX = "/delta-sharing"


class ServerSettings(BaseModel):
    """Where the tables are, how callers authenticate, and the limits the reference server has too."""

    model_config = ConfigDict(frozen=True)

    root: Path
    prefix: str = DEFAULT_PREFIX
    bearer_token: str | None = Field(..., description="None turns authentication off")
    oauth_client_id: str = "sharesync-client"
    oauth_client_secret: str = "sharesync-client-secret"
    oauth_token_lifetime_seconds: int = Field(default=3600, gt=0)
    token_ttl_seconds: float = Field(default=3600.0, gt=0, description="lifetime of page and refresh tokens")
    max_page_size: int = Field(default=1000, gt=0, description="cap on maxFiles (reference: queryTablePageSizeLimit)")
    max_list_results: int = Field(default=500, gt=0, description="cap and default of maxResults in listings")

    @field_validator("prefix")
    @classmethod
    def _normalise_prefix(cls, value: str) -> str:
        value = "/" + value.strip("/")
        return "" if value == "/" else value

    @property
    def files_prefix(self) -> str:
        return f"{self.prefix}/files"
