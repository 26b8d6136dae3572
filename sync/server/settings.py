"""Configuration of one sharing server."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sharesync.sync.core.storage import StoreKind, StoreSettings

DEFAULT_PREFIX = "/delta-sharing"
_ROOTS = ("s3://", "s3a://", "abfss://", "abfs://", "wasbs://", "wasb://", "gs://")


# The setting that says how the server reaches each kind of store.
STORE_FIELDS = {StoreKind.S3: "object_store", StoreKind.AZURE: "azure_store", StoreKind.GCS: "gcs_store"}


class RemoteTableSpec(BaseModel):
    """A table shared from an object store rather than from under ``root``, and the ways it may be read."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="share.schema.table")
    location: str = Field(description="the table root: s3://bucket/path, abfss://container@account…/path, gs://…")
    access_modes: tuple[Literal["url", "dir"], ...] = ("url", "dir")

    @classmethod
    def parse(cls, text: str) -> RemoteTableSpec:
        """``NAME=URI[@MODES]`` (``sharesync serve --remote-table``); ValueError naming the form."""
        name, sep, rest = text.partition("=")
        tail = rest.rsplit("@", 1)[-1]  # an Azure root has an "@" of its own: modes follow the last one
        location, _, modes = rest.rpartition("@") if "@" in rest and not {"/", "."} & set(tail) else (rest, "", "")
        if not sep or len(name.split(".")) != 3 or not location.startswith(_ROOTS):
            raise ValueError(
                f"'{text}' is not share.schema.table=URI[@url,dir] with URI s3://bucket/path, "
                "abfss://container@account.dfs.core.windows.net/path or gs://bucket/path"
            )
        wanted = tuple(m.strip() for m in modes.split(",")) if modes else ("url", "dir")
        if not wanted or not set(wanted) <= {"url", "dir"}:
            raise ValueError(f"'{text}': access modes are url and/or dir, e.g. @dir or @url,dir")
        return cls.model_validate({"name": name, "location": location, "access_modes": wanted})


class ServerSettings(BaseModel):
    """Where the tables are, how callers authenticate, and the limits the reference server has too."""

    model_config = ConfigDict(frozen=True)

    root: Path
    prefix: str = DEFAULT_PREFIX
    bearer_token: str | None = Field(..., description="None turns authentication off")
    oauth_client_id: str = "sharesync-client"
    oauth_client_secret: str = "sharesync-client-secret"
    oauth_token_lifetime_seconds: int = Field(default=3600, gt=0)
    url_ttl_seconds: float = Field(default=3600.0, gt=0, description="lifetime of presigned file URLs")
    token_ttl_seconds: float = Field(default=3600.0, gt=0, description="lifetime of page and refresh tokens")
    max_page_size: int = Field(default=1000, gt=0, description="cap on maxFiles (reference: queryTablePageSizeLimit)")
    max_list_results: int = Field(default=500, gt=0, description="cap and default of maxResults in listings")
    remote_tables: tuple[RemoteTableSpec, ...] = ()
    object_store: StoreSettings | None = Field(default=None, description="how the server reaches remote tables in S3")
    azure_store: StoreSettings | None = Field(default=None, description="…in Azure (account key: signs SAS tokens)")
    gcs_store: StoreSettings | None = Field(default=None, description="…in GCS (an emulator's endpoint)")
    credentials_role_arn: str | None = Field(default=None, description="STS role whose sessions are handed out")
    credential_ttl_seconds: float = Field(default=3600.0, gt=0, description="expirationTime of issued credentials")
    cache_dir: Path | None = Field(default=None, description="where remote tables' logs are mirrored (None: temp)")

    def store_for(self, kind: StoreKind) -> StoreSettings | None:
        """How the server itself reaches a remote table in a store of this kind."""
        store: StoreSettings | None = getattr(self, STORE_FIELDS[kind])
        return store

    @field_validator("prefix")
    @classmethod
    def _normalise_prefix(cls, value: str) -> str:
        value = "/" + value.strip("/")
        return "" if value == "/" else value

    @property
    def files_prefix(self) -> str:
        return f"{self.prefix}/files"
