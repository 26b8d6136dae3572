"""The Dagster code location: ``defs``, built from the sharesync config.

``dagster dev -w workspace.yaml`` (repo root) or ``dagster dev -m sharesync.pipelines.dagster.definitions``
load it; the config path comes from ``SHARESYNC_CONFIG`` (default ``./sharesync.yaml``).
Importing this module loads the config; import :mod:`sharesync.pipelines.dagster.code_location` to build
definitions from another config.
"""

from __future__ import annotations

from sharesync.pipelines.dagster.code_location import load_definitions

defs = load_definitions()
