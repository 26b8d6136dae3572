"""A provider whose ``metaData`` leaves ``configuration`` out (issue 40 §1.2).

``configuration`` is optional in the protocol and an independent Java server sends none: whether
the table has a change data feed is then unknown, not off. sharesync asks for the changes; only
the server's refusal (its error code) says there are none. Before, every new version
re-bootstrapped, and an append target received the whole snapshot again as inserts.
The local server leaves it out with its hostile knob ``omit_configuration``.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from support.e2e import Workspace
from support.verify import assert_append_target_matches, source_version

from sharesync.pipelines.run.results import TableOutcome
from sharesync.sync.core.errors import ChangeFeedRequired

pytestmark = pytest.mark.slow  # starts the embedded engine


def test_an_append_log_over_several_versions_holds_every_change_row_once(workspace: Workspace) -> None:
    workspace.server.faults.omit_configuration = True
    workspace.table("a", rows=30, partitioned=False, seed=4)
    syncer = workspace.syncer(workspace.config(workspace.spec("a", "append", max_versions_per_batch=2)))
    assert syncer.resources.client_for("default").metadata(workspace.name("a")).metadata.configuration is None  # the knob works
    first = syncer.sync_table(workspace.name("a"))
    assert first.outcome is TableOutcome.SYNCED and first.checkpoint_version is not None

    for round_ in range(4):
        workspace.commit("a", 2, seed=40 + round_)
        result = syncer.sync_table(workspace.name("a"))
        assert result.outcome is TableOutcome.SYNCED, result.error
        assert {b.kind for b in result.batches} == {"changes"}, result.batches  # never a snapshot again
        assert not result.warnings, result.warnings

    a = workspace.path("a")
    assert_append_target_matches(
        a, workspace.target("a"), bootstrap_version=first.checkpoint_version, end_version=source_version(a)
    )


@pytest.mark.parametrize("mode", ["append", "history"])
def test_a_refused_feed_fails_an_append_or_history_table_and_writes_nothing(workspace: Workspace, mode: str) -> None:
    workspace.server.faults.omit_configuration = True
    workspace.table("n", rows=20, cdf=False, partitioned=False, seed=5)
    spec = workspace.spec("n", mode, **({"keys": ["id"]} if mode == "history" else {}))
    syncer = workspace.syncer(workspace.config(spec))
    assert syncer.sync_table(workspace.name("n")).outcome is TableOutcome.SYNCED  # a first sync is a snapshot
    target_version = DeltaTable(workspace.target("n")).version()
    checkpoint = syncer.resources.store.get_checkpoint(workspace.name("n"))
    workspace.commit("n", 2, seed=50)

    with pytest.raises(ChangeFeedRequired) as refused:
        syncer.sync_table(workspace.name("n"))

    error = str(refused.value)
    assert "the provider refused the table's change data feed" in error, error
    assert "cdf is not enabled on table" in error and "nothing was written" in error, error
    assert f"'{mode}' mode keeps a" in error and "'mode: merge'" in error, error
    assert DeltaTable(workspace.target("n")).version() == target_version
    assert syncer.resources.store.get_checkpoint(workspace.name("n")) == checkpoint


def test_a_refused_feed_rebootstraps_a_merge_table_saying_so(workspace: Workspace) -> None:
    workspace.server.faults.omit_configuration = True
    workspace.table("m", rows=20, cdf=False, partitioned=False, seed=6)
    syncer = workspace.syncer(workspace.config(workspace.spec("m")))
    syncer.sync_table(workspace.name("m"))
    workspace.commit("m", 2, seed=60)

    result = syncer.sync_table(workspace.name("m"))

    assert result.outcome is TableOutcome.SYNCED, result.error
    assert [b.kind for b in result.batches] == ["bootstrap"]
    assert any("refused the table's change data feed (cdf is not enabled" in w for w in result.warnings)
    assert result.checkpoint_version == source_version(workspace.path("m"))
