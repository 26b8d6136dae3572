"""Fixtures for the Dagster layer: a fresh provider and server per test, built from one template.

* ``site``: a :class:`~dagster_support.Site` — provider tables ``dg.sales.orders`` (merge,
  partitioned) and ``dg.sales.events`` (append), served by a running local sharing server;
  ``write_config()`` / ``definitions()`` build the code location from a config in ``tmp_path``.
  Building the provider once and copying it keeps each test's setup to milliseconds; copies
  keep commit times (``copy2``), which the server's timestamp lookups read.
* ``instance``: a persistent Dagster instance in a temporary ``DAGSTER_HOME`` (sensors and
  event-log scans need one that outlives a run).

One Sail engine serves the whole session (``sharesync.pipelines.jobs.session`` caches it) and is stopped at the end.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import pytest
from support.dagster_site import APPEND_TABLE, MERGE_TABLE, SCHEMA, SHARE, Site
from support.faults import SharingServer

from sharesync.sync.server.samples import apply_random_commits, create_sample_table, table_path


@pytest.fixture(scope="session")
def provider_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dagster-provider")
    rng = random.Random(5)
    orders = create_sample_table(table_path(root, SHARE, SCHEMA, MERGE_TABLE), rows=30, seed=11)
    apply_random_commits(orders, rng, 4)
    events = create_sample_table(table_path(root, SHARE, SCHEMA, APPEND_TABLE), rows=12, partitioned=False, seed=12)
    apply_random_commits(events, rng, 2)
    return root


@pytest.fixture
def site(tmp_path: Path, provider_template: Path, start_server: Callable[..., SharingServer]) -> Site:
    provider = tmp_path / "provider"
    shutil.copytree(provider_template, provider)
    return Site(tmp_path, provider, start_server(provider))


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as test_instance:
        yield test_instance


@pytest.fixture(scope="session", autouse=True)
def _engine_session() -> Iterator[None]:
    """Stop the shared Sail engine once these tests are done."""
    yield
    from support.spark import stop_spark

    stop_spark()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Warnings are errors here: a deprecated Dagster API must fail a test, not scroll by."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.filterwarnings("error"))
