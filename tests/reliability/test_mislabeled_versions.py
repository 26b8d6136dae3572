"""A provider whose answers are labelled with another version than was asked for (issue 40 §1.1).

The local sharing server answers time travel correctly but labels every answer with its latest
version (``label_version``), answers ``/changes`` past the range asked for
(``ignore_ending_version``), or ignores ``/metadata?version=`` (``ignore_metadata_version``).
Before, sharesync filed version 1's rows under the latest version, checkpointed it, and called
the table up to date from then on. Now each such answer fails its table with both versions
named, and nothing is written: no target commit, no checkpoint, no staged file. Once the
provider behaves, the next pass converges.
"""

from __future__ import annotations

import pytest
from support.reliability import Expectation, Site, assert_at_checkpoint, delta_version
from support.schema_changes import add_column

from sharesync.pipelines.run.results import BackfillRequest, TableOutcome, TableSyncResult
from sharesync.sync.core.timestamps import from_millis
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile

pytestmark = pytest.mark.slow


def _provider(site: Site) -> int:
    site.table("m", rows=30, seed=1)
    site.commit("m", 3, seed=2)
    return site.version("m")


def _refused(site: Site, result: TableSyncResult, wording: str) -> None:
    assert result.outcome is TableOutcome.FAILED, f"not refused: {result}"
    assert result.error is not None and wording in result.error, result.error
    assert "nothing was written" in result.error and "\n" not in result.error, result.error
    assert site.staged_files() == 0, "a refused pass left staged files"


@pytest.mark.parametrize("answered", ["sync", "async"])
def test_a_bootstrap_from_version_1_labelled_with_the_latest_version_writes_nothing(
    site: Site, answered: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The headline case: ``start: {version: 1}`` against a provider that labels time travel as latest,
    answering the snapshot query at once or as an asynchronous query's result."""
    latest = _provider(site)
    assert latest >= 3
    if answered == "async":
        monkeypatch.setenv("SHARESYNC_ASYNC_POLL_SECONDS", "0.01")
        site.server.queries.after_polls = 0  # pending until the first poll, which gets the files
    syncer = site.syncer(site.config(site.spec("m", start={"version": 1})))
    site.server.faults.label_version = latest

    for _ in range(2):  # the second pass does not call it up to date either
        (result,) = syncer.sync_all()
        _refused(site, result, f"answered version {latest} (Delta-Table-Version header) for a request of version 1")
        assert "does not honour time travel" in result.error  # type: ignore[operator]
        assert delta_version(site.target("m")) is None, "the target was written"
        assert site.checkpoint("m") is None, "a checkpoint was stored"
    assert site.server.queries.submissions == (2 if answered == "async" else 0)

    site.server.faults.label_version = None
    (result,) = syncer.sync_all()
    assert result.outcome is TableOutcome.SYNCED, result.error
    assert [b.start_version for b in result.batches][:1] == [1]  # version 1's snapshot, then the changes after it
    assert_at_checkpoint(site, Expectation("m", "merge"))


def test_a_full_refresh_backfill_labelled_with_the_latest_version_writes_nothing(site: Site) -> None:
    """Time travel for a backfill: the snapshot at the backfill's start, labelled as the latest."""
    latest = _provider(site)
    syncer = site.syncer(site.config(site.spec("m")))
    (synced,) = syncer.sync_all()
    assert synced.outcome is TableOutcome.SYNCED and synced.checkpoint_version == latest
    written = delta_version(site.target("m"))
    with SharingClient(load_profile(site.server.profile_path)) as client:  # when version 1 was committed
        stamp = max(f.timestamp or 0 for f in client.query(site.name("m"), version=1).files)  # type: ignore[union-attr]
    site.server.faults.label_version = latest

    result = syncer.backfill(site.name("m"), BackfillRequest(from_millis(stamp), full_refresh=True))

    _refused(site, result, f"answered version {latest} (Delta-Table-Version header) for a request of version 1")
    assert delta_version(site.target("m")) == written, "the target was written"
    checkpoint = site.checkpoint("m")
    assert checkpoint is not None and checkpoint.version <= latest  # moved back for the refresh at most
    site.server.faults.label_version = None
    (result,) = syncer.sync_all()
    assert result.outcome is TableOutcome.SYNCED, result.error
    assert_at_checkpoint(site, Expectation("m", "merge"))


def test_a_change_feed_past_the_batch_fails_it_without_advancing(site: Site) -> None:
    site.table("m", rows=30, seed=1)
    syncer = site.syncer(site.config(site.spec("m", max_versions_per_batch=1)))
    (synced,) = syncer.sync_all()
    before = synced.checkpoint_version
    assert before is not None
    site.commit("m", 3, seed=3)
    written = delta_version(site.target("m"))
    site.server.faults.ignore_ending_version = True

    (result,) = syncer.sync_all()

    asked = f"for a request of versions {before + 1}..{before + 1}"
    _refused(site, result, f"of version {before + 2} {asked}")
    assert delta_version(site.target("m")) == written, "the target was written"
    assert site.checkpoint("m").version == before  # type: ignore[union-attr]
    site.server.faults.ignore_ending_version = False
    (result,) = syncer.sync_all()
    assert result.outcome is TableOutcome.SYNCED and len(result.batches) == 3, result.error
    assert_at_checkpoint(site, Expectation("m", "merge"))


def test_an_ignored_metadata_version_repeats_the_ignored_column_warning_and_says_why(site: Site) -> None:
    """``on_new_column: ignore`` asks for the columns at the checkpoint to tell whether its warning
    is news; a provider answering its latest metadata instead (with the new column) made it silent."""
    site.table("m", rows=12, seed=1)
    syncer = site.syncer(site.config(site.spec("m", on_new_column="ignore")))
    (synced,) = syncer.sync_all()
    assert synced.outcome is TableOutcome.SYNCED, synced.error
    add_column(str(site.path("m")), 1)
    site.server.faults.ignore_metadata_version = True

    (result,) = syncer.sync_all()

    assert result.outcome is TableOutcome.SYNCED, result.error
    [warning] = [w for w in result.warnings if "on_new_column is 'ignore'" in w]
    assert "['note']" in warning, warning
    assert f"the provider ignored the version asked for (/metadata?version={synced.checkpoint_version})" in warning
