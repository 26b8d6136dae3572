"""``SharesyncComponent``: the sharesync code location as a Dagster component, set up in ``defs.yaml``.

A ``dg`` project adds sharesync with one file, no Python::

    # src/<project>/defs/sharesync/defs.yaml
    type: sharesync.pipelines.dagster.component.SharesyncComponent
    attributes:
      config_path: sharesync.yaml        # relative to this folder
      tables: [demo.sales.orders]        # optional: a selection of the config's tables
      asset_key_prefix: [warehouse]      # optional: instead of ["sharesync"]
      group_name: sharesync              # optional: one group instead of one per share
      pool: sharesync                    # optional: one concurrency pool instead of one per table
      retry: {max_retries: 5, delay_seconds: 60}

It builds exactly what :mod:`sharesync.pipelines.dagster.definitions` builds for the same
config (that module and ``workspace.yaml`` keep working): building reads the config only,
offline. One component per code location: its definitions hold the ``sharesync`` resource and
the fixed sensor name; one config holds any number of tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import dagster as dg
from pydantic import Field

from sharesync.pipelines.dagster.assets import DEFAULT_RETRY_POLICY
from sharesync.pipelines.dagster.code_location import build_definitions
from sharesync.pipelines.dagster.naming import ASSET_PREFIX, SOURCE_PREFIX, Names
from sharesync.pipelines.dagster.selection import with_selection
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.sync.core.config import SharesyncConfig, load_config


class RetryOverride(dg.Resolvable, dg.Model):
    """The retry policy of every table's sync op (transient failures only; permanent ones never retry)."""

    max_retries: int = Field(default=3, ge=0)
    delay_seconds: float = Field(default=30, ge=0, description="wait before the first retry")
    backoff: Literal["exponential", "linear"] | None = "exponential"
    jitter: Literal["plus_minus", "full"] | None = "plus_minus"

    def policy(self) -> dg.RetryPolicy:
        return dg.RetryPolicy(
            max_retries=self.max_retries,
            delay=self.delay_seconds,
            backoff=dg.Backoff(self.backoff.upper()) if self.backoff else None,
            jitter=dg.Jitter(self.jitter.upper()) if self.jitter else None,
        )


class SharesyncComponent(dg.Component, dg.Resolvable, dg.Model):
    """Delta Sharing tables kept in sync with Delta targets: one asset per table, its checks and automation."""

    config_path: str = Field(description="the sharesync config file; relative paths start at this defs.yaml's folder")
    tables: list[str] | None = Field(
        default=None,
        description="table keys to include: share.schema.table, provider/share.schema.table (default: all)",
    )
    asset_key_prefix: list[str] = Field(default=[ASSET_PREFIX], min_length=1, description="prefix of the tables' keys")
    source_key_prefix: list[str] = Field(
        default=[SOURCE_PREFIX], min_length=1, description="prefix of the provider tables' (observable sources') keys"
    )
    group_name: str | None = Field(default=None, description="one asset group for all tables (default: the share)")
    pool: str | None = Field(default=None, description="one concurrency pool for all tables (default: one per table)")
    retry: RetryOverride | None = Field(default=None, description="retry policy of the sync ops")

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        path = self.resolved_config_path(context.path)
        return build_definitions(
            self.selected(with_selection(load_config(path))),
            SharesyncResource(config_path=str(path)),
            names=self.names(),
            retry_policy=self.retry.policy() if self.retry else DEFAULT_RETRY_POLICY,
        )

    def resolved_config_path(self, folder: Path) -> Path:
        path = Path(self.config_path).expanduser()
        return (path if path.is_absolute() else folder / path).resolve()

    def selected(self, config: SharesyncConfig) -> SharesyncConfig:
        """The config with only the chosen tables (an unknown name fails, listing the configured ones)."""
        if self.tables is None:
            return config
        return config.model_copy(update={"tables": [config.table(name) for name in self.tables]})

    def names(self) -> Names:
        return Names(
            asset_prefix=tuple(self.asset_key_prefix),
            source_prefix=tuple(self.source_key_prefix),
            group=self.group_name,
            shared_pool=self.pool,
        )
