"""Targets in object storage beyond the rounds: schema evolution, history mode, the no-op glance,
and Azure (the ``azurite`` emulator, which the suite installs with npm on first need: ``support.azurite``).

The rounds of every mode with targets and staging in S3 are in ``test_rounds``, a crash in
``test_recovery``; bad settings and foreign targets in ``reliability/test_object_storage``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable, write_deltalake
from support.azurite import AzuriteStore, azurite_store
from support.e2e import Workspace
from support.engines import on_both_engines
from support.history import sort_history
from support.jobs import ins, post, pre, write_batch
from support.s3 import S3Store, S3Workspace
from support.spark import get_spark
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
)

from sharesync.pipelines.modes.history.history_batch import apply_history, bootstrap_history
from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.targets.delta.identity import glance
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.pipelines.targets.facts import Glance
from sharesync.sync.core.location import Location, locate
from sharesync.sync.core.storage import StorageSection
from sharesync.sync.server.samples import sample_rows

MODES = {"m": "merge", "a": "append", "s": "snapshot"}


@on_both_engines
def test_an_added_column_evolves_every_mode_in_s3(s3_workspace: S3Workspace) -> None:
    ws, options = s3_workspace, s3_workspace.store.options()
    for seed, table in enumerate(MODES):
        ws.table(table, rows=15, seed=seed)
    syncer = ws.syncer(ws.config(*(ws.spec(t, mode) for t, mode in MODES.items())))
    first = {r.name: r.checkpoint_version for r in syncer.sync_all()}
    for seed, table in enumerate(MODES):
        ws.commit(table, 2, seed=seed)
        rows = sample_rows(random.Random(seed), [1000 + seed]).append_column("note", pa.array(["new"]))
        write_deltalake(str(ws.path(table)), rows, mode="append", schema_mode="merge")

    results = syncer.sync_all()

    assert [r.outcome for r in results] == [TableOutcome.SYNCED] * 3, [r.error for r in results]
    for table in MODES:
        assert "note" in DeltaTable(ws.target(table), storage_options=options).schema().to_arrow().names
    m, a, s = (ws.path(t) for t in MODES)
    assert_merge_target_matches(m, ws.target("m"), ["id"], source_version(m), storage_options=options)
    assert_append_target_matches(
        a, ws.target("a"), bootstrap_version=first[ws.name("a")], end_version=source_version(a), storage_options=options
    )
    assert_snapshot_target_matches(s, ws.target("s"), source_version(s), storage_options=options)


def test_without_a_storage_section_the_standard_environment_variables_reach_the_store(
    s3_workspace: S3Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, store = s3_workspace, s3_workspace.store
    for name, value in store.options().items():
        monkeypatch.setenv(name, value)
    ws.table("m", rows=10)
    syncer = ws.syncer(ws.config(ws.spec("m"), storage=None))
    assert syncer.sync_all()[0].outcome is TableOutcome.SYNCED
    ws.commit("m", 2, seed=4)
    assert syncer.sync_all()[0].outcome is TableOutcome.SYNCED
    m = ws.path("m")
    assert_merge_target_matches(m, ws.target("m"), ["id"], source_version(m), storage_options=store.options())


def test_the_no_op_glance_at_an_s3_target_sees_its_commits(s3_workspace: S3Workspace) -> None:
    ws, options = s3_workspace, s3_workspace.store.options()
    ws.table("m", rows=10)
    syncer = ws.syncer(ws.config(ws.spec("m")))
    syncer.sync_all()
    checkpoint = syncer.resources.store.get_checkpoint(ws.name("m"))
    assert checkpoint is not None and checkpoint.target_version is not None
    version, written = checkpoint.target_version, checkpoint.updated_at
    storage = syncer.config.storage

    assert glance(ws.target("m"), version, written, storage) is Glance.SAME
    before = len(ws.store.requests(ws.base))
    assert syncer.sync_all()[0].outcome is TableOutcome.UP_TO_DATE
    no_op = ws.store.requests(ws.base)[before:]
    commit, following = (
        f"/{ws.target('m').removeprefix('s3://')}/_delta_log/{v:020d}.json" for v in (version, version + 1)
    )
    assert [(m, p) for m, p, _ in no_op] == [("HEAD", commit), ("HEAD", following)]  # docs: two HEAD requests
    long_ago = datetime(2000, 1, 1, tzinfo=UTC)
    assert glance(ws.target("m"), version, long_ago, storage) is Glance.CHANGED  # re-created since
    write_deltalake(
        ws.target("m"),
        read_rows(DeltaTable(ws.target("m"), storage_options=options)).slice(0, 1),
        mode="append",
        storage_options=options,
    )
    assert glance(ws.target("m"), version, written, storage) is Glance.CHANGED  # another commit after it
    assert glance(f"{ws.base}/nothing-here", 0, written, storage) is Glance.CHANGED


def test_a_rolled_back_or_lost_s3_target_is_healed_on_a_pass_with_nothing_new(s3_workspace: S3Workspace) -> None:
    """The no-op glance is what finds it: the provider has nothing new either time."""
    ws, store, options = s3_workspace, s3_workspace.store, s3_workspace.store.options()
    ws.table("m", rows=20)
    syncer = ws.syncer(ws.config(ws.spec("m")))
    assert syncer.sync_all()[0].outcome is TableOutcome.SYNCED
    ws.commit("m", 2, seed=3)
    assert syncer.sync_all()[0].outcome is TableOutcome.SYNCED
    m, target = ws.path("m"), ws.target("m")

    DeltaTable(target, storage_options=options).restore(0)  # the target's own first version
    rolled_back = syncer.sync_all()[0]
    assert rolled_back.outcome is TableOutcome.SYNCED, rolled_back.error
    assert any("was rolled back to an older state (RESTORE to version" in w for w in rolled_back.warnings)
    assert_merge_target_matches(m, target, ["id"], source_version(m), storage_options=options)

    keys = store.keys(target)
    assert keys, "nothing to lose"
    client = store.client("s3")
    for key in keys:
        client.delete_object(Bucket=store.bucket, Key=key)
    lost = syncer.sync_all()[0]
    assert lost.outcome is TableOutcome.SYNCED, lost.error
    assert any("was lost; rebuilt from the provider's snapshot at version" in w for w in lost.warnings)
    assert_merge_target_matches(m, target, ["id"], source_version(m), storage_options=options)
    assert syncer.sync_all()[0].outcome is TableOutcome.UP_TO_DATE


SNAPSHOT = [ins(1, id=i, name=f"n{i}", score=i) for i in range(1, 5)]
CHANGES = [
    pre(2, id=1, name="n1", score=1),
    post(2, id=1, name="one", score=10),
    ins(3, id=5, name="n5", score=5),
    pre(4, id=2, name="n2", score=2),
]


def _upload(local: Path, to: Location) -> Location:
    """A staged batch written locally, copied under ``to`` in the bucket (as the stager leaves it)."""
    where = to.make_empty()
    for file in sorted(local.glob("*.parquet")):
        pafs.copy_files(str(file), where.join(file.name).path, destination_filesystem=where.filesystem)
    return where


def test_history_mode_writes_the_same_history_to_s3_as_to_a_local_disk(s3_server: S3Store, tmp_path: Path) -> None:
    storage = StorageSection.model_validate(s3_server.storage())
    spark, base = get_spark(storage=storage), s3_server.prefix()
    local = str(tmp_path / "history")
    remote = f"{base}/history"
    batches = [write_batch(tmp_path / "b1", SNAPSHOT), write_batch(tmp_path / "b2", CHANGES, files=2)]
    staged = [_upload(b, locate(f"{base}/staging/{b.name}/data", storage)) for b in batches]
    for target, (snapshot, changes) in ((local, batches), (locate(remote, storage), staged)):
        bootstrap_history(spark, snapshot, target, keys=["id"], version=1, replace=True)
        apply_history(spark, changes, target, keys=["id"])
    remote_rows = read_rows(DeltaTable(remote, storage_options=s3_server.options())).to_pylist()
    local_rows = read_rows(DeltaTable(local)).to_pylist()
    assert sort_history(remote_rows, ["id"]) == sort_history(local_rows, ["id"])
    assert len(local_rows) == 6  # key 1 twice, 2 closed, 3, 4, 5


def test_configs_with_different_storage_settings_read_their_own_stores_in_one_process(s3_server: S3Store) -> None:
    """Issue 30: storage settings belong to a config, not to the process. Two stores (two moto
    servers) hold different tables at the same URI; each config's resources reach their own."""
    from support.s3 import s3_store

    from sharesync.pipelines.run.pass_resources import PassResources
    from sharesync.pipelines.targets.delta.format import DELTA
    from sharesync.sync.core.config import SharesyncConfig, SparkConfig

    uri = f"{s3_server.prefix()}/t"
    remote = SparkConfig(remote="sc://127.0.0.1:9")  # never started: only deltalake and pyarrow are asked
    with s3_store() as other:
        write_deltalake(uri, pa.table({"id": [1, 2, 3]}), storage_options=s3_server.options())
        write_deltalake(uri, pa.table({"id": [1, 2, 3, 4, 5]}), storage_options=other.options())
        write_deltalake(uri, pa.table({"id": [6]}), mode="append", storage_options=other.options())
        first, second = (
            PassResources(SharesyncConfig(profile="p.share", spark=remote, storage=s.storage()))
            for s in (s3_server, other)
        )

        assert DELTA.rows(first.locate(uri)).num_rows == 3  # type: ignore[union-attr]
        assert DELTA.rows(second.locate(uri)).num_rows == 6  # type: ignore[union-attr]
        assert [DELTA.identity(r.locate(uri)).version for r in (first, second)] == [0, 1]  # type: ignore[union-attr]
        assert {r.locate(uri).kind() for r in (first, second)} == {"directory"}  # pyarrow, with each one's keys
        assert DELTA.rows(first.locate(uri)).num_rows == 3  # type: ignore[union-attr]  # the second changed nothing


@pytest.fixture(scope="module")
def azurite() -> Iterator[AzuriteStore]:
    with azurite_store() as store:
        yield store


def test_rounds_with_targets_and_staging_on_azure(azurite: AzuriteStore, tmp_path: Path, start_server: object) -> None:
    provider = tmp_path / "provider"
    provider.mkdir()
    ws = AzureWorkspace(tmp_path, start_server(provider), azurite)  # type: ignore[operator]
    try:
        for seed, table in enumerate(MODES):
            ws.table(table, rows=20, seed=seed)
        syncer = ws.syncer(ws.config(*(ws.spec(t, mode) for t, mode in MODES.items())))
        first = {r.name: r.checkpoint_version for r in syncer.sync_all()}
        for round_ in range(2):
            for seed, table in enumerate(MODES):
                ws.commit(table, 3, seed=10 * round_ + seed)
            assert [r.outcome for r in syncer.sync_all()] == [TableOutcome.SYNCED] * 3
        m, a, s = (ws.path(t) for t in MODES)
        options = azurite.options()
        assert_merge_target_matches(m, ws.target("m"), ["id"], source_version(m), storage_options=options)
        assert_append_target_matches(
            a,
            ws.target("a"),
            bootstrap_version=first[ws.name("a")],
            end_version=source_version(a),
            storage_options=options,
        )
        assert_snapshot_target_matches(s, ws.target("s"), source_version(s), storage_options=options)
        assert [k for k in azurite.keys(f"{ws.base}/staging") if not k.endswith("/")] == []
    finally:
        ws.close()


class AzureWorkspace(Workspace):
    """Targets and staging in the azurite container, as ``abfss://`` URIs."""

    def __init__(self, root: Path, server: object, store: AzuriteStore) -> None:
        super().__init__(root, server)  # type: ignore[arg-type]
        self.store = store
        self.base = store.prefix()

    def target(self, table: str) -> str:
        return f"{self.base}/warehouse/{table}"

    def spec(self, table: str, mode: str = "merge", **extra: object) -> dict[str, object]:
        return {**super().spec(table, mode), "target": self.target(table), **extra}

    def raw_config(self, *tables: dict[str, object], **top: object) -> dict[str, object]:
        located = {"staging_dir": f"{self.base}/staging", "storage": self.store.storage()}
        return super().raw_config(*tables, **{**located, **top})
