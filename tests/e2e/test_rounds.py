"""Bootstrap, then rounds of random provider commits: every mode's target matches the source.

Appends, updates, range deletes, merges (with deletes) and whole-partition deletes, on
partitioned and unpartitioned tables with nulls in every column and every primitive type.
Small ``max_versions_per_batch`` makes each sync run several batches. The rounds run on every
engine (embedded Sail, Apache Spark + Delta, and both as two-worker clusters), and once more with
the targets and the staging directory in an S3 bucket (moto's server on loopback).
"""

from __future__ import annotations

import itertools

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from support.e2e import Workspace
from support.engines import SAIL, SAIL_CLUSTER, SPARK, SPARK_CLUSTER, on_both_engines
from support.s3 import S3Workspace
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
)

from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.targets.delta.rows import read_rows

ROUNDS = 3
# The two-worker clusters change where jobs run, and object storage where files live, not what a
# round does: two rounds of changes after the bootstrap show every mode's jobs there (each cluster
# round costs a minute on 2 cores). Two, not one: the seeds of the first two rounds include a
# provider delete, which the soft-delete table must show flagged.
CLUSTER_ROUNDS = S3_ROUNDS = 2
COMMITS_PER_ROUND = 4


# Embedded Sail and Apache Spark local[2] on both layouts; each engine as a two-worker cluster on
# the partitioned one (the clusters change where jobs run, not what the layout does).
@pytest.mark.parametrize(
    ("engine", "partitioned"),
    [(SAIL, True), (SAIL, False), (SPARK, True), (SPARK, False), (SAIL_CLUSTER, True), (SPARK_CLUSTER, True)],
    ids=["sail-partitioned", "sail-unpartitioned", "spark-partitioned", "spark-unpartitioned",
         "sail-cluster-partitioned", "spark-cluster-partitioned"],
    indirect=["engine"],
)  # fmt: skip
@pytest.mark.timeout(900)  # a two-worker cluster on 2 shared cores: minutes, not seconds
def test_random_rounds_keep_every_mode_in_sync(workspace: Workspace, partitioned: bool, engine: str) -> None:
    _rounds(workspace, partitioned, rounds=CLUSTER_ROUNDS if engine in (SAIL_CLUSTER, SPARK_CLUSTER) else ROUNDS)


@on_both_engines  # Apache Spark through S3A (hadoop-aws), Sail through its own object store client
def test_random_rounds_with_targets_and_staging_in_s3(s3_workspace: S3Workspace, engine: str) -> None:
    store = s3_workspace.store
    _rounds(s3_workspace, partitioned=True, rounds=S3_ROUNDS, storage_options=store.options())
    # No staged object is left (pyarrow keeps the emptied parents as "directory/" markers, as a
    # local disk keeps empty directories).
    assert [k for k in store.keys(f"{s3_workspace.base}/staging") if not k.endswith("/")] == []
    commits = store.commits(s3_workspace.base)
    # Sail commits with a conditional put (If-None-Match: *); Delta on Spark's default S3 log store
    # puts plainly and relies on one writer per table — the lease gives it that (docs/engines.md).
    assert commits and all(condition == ("*" if engine == SAIL else None) for _, condition in commits), commits


def _rounds(
    workspace: Workspace,
    partitioned: bool,
    *,
    rounds: int,
    storage_options: dict[str, str] | None = None,
) -> None:
    options = {"storage_options": storage_options}
    for seed, table in enumerate(("m", "a", "s", "d")):
        workspace.table(table, rows=40, partitioned=partitioned, seed=seed)
    config = workspace.config(
        workspace.spec("m", "merge", max_versions_per_batch=2),
        workspace.spec("a", "append", max_versions_per_batch=3),
        workspace.spec("s", "snapshot"),
        workspace.spec("d", "merge", soft_delete=True),
    )
    syncer = workspace.syncer(config)
    bootstrap: dict[str, int] = {}

    for round_ in range(rounds + 1):
        if round_:
            for offset, table in enumerate(("m", "a", "s", "d")):
                workspace.commit(table, COMMITS_PER_ROUND, seed=100 * round_ + offset + (0 if partitioned else 50))
        results = {r.name: r for r in syncer.sync_all()}
        for table in ("m", "a", "s", "d"):
            result = results[workspace.name(table)]
            assert result.outcome is TableOutcome.SYNCED, result.error
            assert result.checkpoint_version == source_version(workspace.path(table))
            bootstrap.setdefault(table, result.checkpoint_version)

        m, a, s = (workspace.path(t) for t in ("m", "a", "s"))
        assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m), **options)
        assert_append_target_matches(
            a, workspace.target("a"), bootstrap_version=bootstrap["a"], end_version=source_version(a), **options
        )
        assert_snapshot_target_matches(s, workspace.target("s"), source_version(s), **options)
        d = workspace.path("d")
        assert_merge_target_matches(d, workspace.target("d"), ["id"], source_version(d), soft_delete=True, **options)

        if round_:
            merge_batches = results[workspace.name("m")].batches
            assert [b.end_version - b.start_version + 1 for b in merge_batches] == [2, 2]
            append_batches = results[workspace.name("a")].batches
            assert [b.end_version - b.start_version + 1 for b in append_batches] == [3, 1]

    # Every batch was its own run, and the checkpoint moved after each: contiguous, succeeded.
    runs = sorted(syncer.resources.store.runs_for(workspace.name("m"), limit=100), key=lambda r: r.id)
    assert all(r.status.value == "succeeded" for r in runs)
    assert runs[0].start_version == runs[0].end_version == 0  # the bootstrap
    for before, after in itertools.pairwise(runs):
        assert after.start_version == before.end_version + 1
        assert after.end_version - after.start_version + 1 <= 2
    assert runs[-1].end_version == source_version(m)
    # Soft deletes keep the rows the provider deleted, flagged.
    target = DeltaTable(workspace.target("d"), storage_options=storage_options)
    flagged = read_rows(target).filter(pc.field("_sharesync_deleted"))
    assert flagged.num_rows > 0
