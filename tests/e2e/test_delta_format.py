"""Tables with deletion vectors and column mapping, end to end through ``sharesync sync``.

The provider's tables are written by Sail (appends, DV deletes, updates as DV delete + append,
see :mod:`support.feature_tables`); the local server answers them in the delta response format
only, as the reference server does. Every round of provider commits is synced through the CLI
with a fault on, and every target must equal the source at its checkpoint (sources read with
Sail, targets through ``deltalake``'s QueryBuilder: both read DVs); append targets must hold each change row once.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import on_both_engines
from support.faults import Faults
from support.feature_tables import (
    NTZ,
    assert_merge_matches,
    assert_mode_matches,
    commit,
    create_source,
    latest_version,
    read_target,
    rename_column,
)
from support.spark import get_spark

from sharesync.pipelines.dagster.provider_facts import snapshot_num_records
from sharesync.state import open_store

pytestmark = on_both_engines  # embedded Sail and Apache Spark + Delta

# name: (deletion vectors, column mapping, partitioned, mode)
TABLES = {
    "m": (True, True, True, "merge"),
    "c": (False, True, True, "merge"),  # column mapping alone: Sail's updates rewrite whole files
    "a": (True, False, False, "append"),
    "ac": (True, True, True, "append"),
    "s": (True, True, False, "snapshot"),
}


def _expiring_urls(faults: Faults) -> None:
    # One-second URLs and slow downloads: data and DV URLs expire while the batch downloads.
    faults.url_ttl_seconds, faults.download_delay_seconds = 1.0, 0.15


def _broken_streams(faults: Faults) -> None:
    faults.truncate_stream, faults.budget = True, 4


def _cut_downloads(faults: Faults) -> None:
    faults.drop_file_connection, faults.budget = True, 6


# Each fault once (the bootstrap's snapshot through broken streams; expiring data and DV URLs on a
# batch of changes); expiring URLs during a bootstrap are tests/reliability/test_provider_faults.py's.
ROUNDS: list[Callable[[Faults], None]] = [_broken_streams, _expiring_urls, _cut_downloads]


def test_every_mode_follows_dv_and_column_mapping_tables_through_faults(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    spark = get_spark()
    for seed, (name, (dvs, mapping, partitioned, _)) in enumerate(TABLES.items()):
        create_source(spark, workspace.path(name), dvs=dvs, mapping=mapping, partitioned=partitioned, seed=seed)
    workspace.config(*(workspace.spec(name, mode, download_concurrency=2) for name, (*_, mode) in TABLES.items()))
    store = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}")
    faults = workspace.server.faults
    bootstrap: dict[str, int] = {}

    for round_, fault in enumerate(ROUNDS):
        if round_:
            for offset, name in enumerate(TABLES):
                commit(spark, workspace.path(name), random.Random(100 * round_ + offset), 3)
        fault(faults)
        run = cli("--config", str(workspace.config_file), "sync")
        assert faults.budget in (None, 0), f"round {round_}: the fault never fired"
        faults.reset()
        assert run.code == 0, run.out + run.err
        for name, (*_, mode) in TABLES.items():
            source, target, version = workspace.path(name), workspace.target(name), latest_version(workspace.path(name))
            checkpoint = store.get_checkpoint(workspace.name(name))
            assert checkpoint is not None and checkpoint.version == version, (round_, name, checkpoint)
            bootstrap.setdefault(name, version)
            assert_mode_matches(spark, source, target, mode, bootstrap[name], version)

    # What the targets got: logical names, a wall-clock column, and deletion vectors (merge-on-read).
    for name in TABLES:
        target = DeltaTable(workspace.target(name))
        assert "deletionVectors" in (target.protocol().reader_features or [])
        assert target.metadata().configuration.get("delta.enableDeletionVectors") == "true"
        assert dict((f.name, f.type.type) for f in target.schema().fields)[NTZ] == "timestamp_ntz"
        assert not [c for c in read_target(workspace.target(name)).column_names if c.startswith("col-")]


def test_a_deletion_vector_with_a_wrong_checksum_fails_the_table_and_writes_nothing(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    spark = get_spark()
    source = create_source(spark, workspace.path("bad"), dvs=True, mapping=False, partitioned=False, rows=20)
    workspace.config(workspace.spec("bad", "merge"))
    config = ("--config", str(workspace.config_file))
    assert cli(*config, "sync").code == 0
    before = DeltaTable(workspace.target("bad")).version()

    commit(spark, source, random.Random(3), 2)  # an append, then a DV delete
    newest = max(source.rglob("deletion_vector_*.bin"), key=lambda p: p.stat().st_mtime)
    data = bytearray(newest.read_bytes())
    data[1 + 4 + 6] ^= 0xFF  # a byte of the bitmap; its stored CRC-32 no longer matches
    newest.write_bytes(bytes(data))

    run = cli(*config, "sync")
    assert run.code != 0
    assert "fails its CRC-32 check" in run.out + run.err
    assert DeltaTable(workspace.target("bad")).version() == before  # nothing written
    checkpoint = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}").get_checkpoint(workspace.name("bad"))
    assert checkpoint is not None and checkpoint.version == 0


def test_a_rename_at_the_provider_is_a_breaking_change_until_a_reset(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    spark = get_spark()
    source = create_source(spark, workspace.path("r"), dvs=True, mapping=True, partitioned=True, rows=20)
    workspace.config(workspace.spec("r", "merge"))
    config = ("--config", str(workspace.config_file))
    assert cli(*config, "sync").code == 0
    commit(spark, source, random.Random(5), 2)
    renamed = rename_column(source, "name", "label")  # crafted: Sail has no ALTER TABLE
    before = DeltaTable(workspace.target("r")).version()

    # The old name is gone (breaking), the new one added: nothing is written, the fix is named.
    run = cli(*config, "sync")
    assert run.code != 0 and "sharesync reset" in run.out + run.err, run.out + run.err
    assert DeltaTable(workspace.target("r")).version() == before

    assert cli(*config, "reset", workspace.name("r")).code == 0
    assert cli(*config, "sync").code == 0, "after a reset the target is rebuilt under the new names"
    assert_merge_matches(spark, source, workspace.target("r"), renamed)
    assert "label" in read_target(workspace.target("r")).column_names


def test_a_reader_feature_sharesync_lacks_fails_that_table_only(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    spark = get_spark()
    create_source(spark, workspace.path("ok"), dvs=True, mapping=False, partitioned=False, rows=5)
    variant = create_source(spark, workspace.path("v"), dvs=True, mapping=False, partitioned=False, rows=5)
    first = variant / "_delta_log" / f"{0:020d}.json"  # crafted: Sail writes no variant columns
    first.write_text(
        first.read_text().replace('"readerFeatures":["timestampNtz"', '"readerFeatures":["variantType","timestampNtz"')
    )
    workspace.config(workspace.spec("ok", "merge"), workspace.spec("v", "merge"))

    run = cli("--config", str(workspace.config_file), "sync")
    assert run.code != 0
    assert "uses Delta reader feature(s) variantType, which sharesync cannot read" in run.out + run.err
    assert not (workspace.root / "warehouse" / "v").exists()  # nothing written
    assert_merge_matches(spark, workspace.path("ok"), workspace.target("ok"), 0)


def test_the_row_count_check_counts_the_rows_deletion_vectors_leave(workspace: Workspace) -> None:
    spark = get_spark()
    source = create_source(spark, workspace.path("n"), dvs=True, mapping=False, partitioned=False, rows=20)
    assert commit(spark, source, random.Random(1), 2) == ["append", "delete"]
    assert list(source.rglob("deletion_vector_*.bin"))  # the delete marked rows, it rewrote no file
    client, _ = workspace.counting_client(workspace.config(workspace.spec("n")))
    version = latest_version(source)

    counted = snapshot_num_records(client, workspace.name("n"), version, latest=True)

    assert counted == spark.read.format("delta").load(str(source)).count()
