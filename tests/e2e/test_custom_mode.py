"""A sync mode defined only here, registered and syncing a real table, with no change to the run.

docs/adding-a-mode-or-target-format.md walks through this mode: a keys-only audit log, whose
target gets, per batch, one row per change of a key — the key, its ``_change_type`` and its
``_commit_version`` — and nothing of the row's other columns. It follows append mode's planning
(a change feed, the snapshot as ``insert`` rows on a bootstrap), so its config says
``mode: append``; the registry handed to the syncer gives the table the audit log instead.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest
from deltalake import DeltaTable
from support.e2e import Workspace
from support.verify import source_version

from sharesync.pipelines.modes.base import Applied, BatchJob, BootstrapAt, TargetChanges
from sharesync.pipelines.modes.registry import ModeRegistry, Registered
from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.pipelines.targets.facts import ApplyStats
from sharesync.state import Checkpoint
from sharesync.sync.core.changefeed import CHANGE_TYPE, COMMIT_VERSION
from sharesync.sync.core.config import Mode, TableConfig
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.location import Location
from sharesync.sync.planning.sync_plan import BootstrapReason, VersionRange

pytestmark = pytest.mark.slow  # starts the embedded engine


@dataclass(frozen=True, kw_only=True)
class KeysLogged:
    """The audit log's account: key changes logged."""

    logged: int = 0

    def __add__(self, other: KeysLogged) -> KeysLogged:
        return KeysLogged(logged=self.logged + other.logged)

    def counts(self) -> dict[str, int]:
        return {"key_changes_logged": self.logged}

    def describe(self, *, compact: bool = False) -> str:
        return f"{self.logged} key changes logged"


class KeysAuditLog:
    """Each batch appends the keys it changed, with their change type and version."""

    nets_by_key = False  # every change of a key is logged, not its net change
    direct_snapshot = False  # a bootstrap is staged as change rows (``insert`` at its version)
    dated_snapshot = False
    keyed = False  # a key appears once per change
    copies_source = False
    current_flag: str | None = None
    high_water_columns: tuple[str, ...] = (COMMIT_VERSION,)
    keeps: str | None = "key audit log"

    def describe_table(self, table: TableConfig) -> str:
        return f"as an audit log of the changes to every {', '.join(table.keys)}"

    def no_changes(self) -> TargetChanges:
        return KeysLogged()

    def history_start(self, target: Location) -> int | None:
        return None

    def bootstrap(
        self, job: BatchJob, *, reason: BootstrapReason, checkpoint: Checkpoint | None, snapshot: BootstrapAt
    ) -> Applied:
        return self._log(job)

    def changes(self, job: BatchJob, *, batch: VersionRange, replay_from: int | None) -> Applied:
        return self._log(job)

    def _log(self, job: BatchJob) -> Applied:
        """Append the batch's key changes above the versions the log has (exactly once: a batch
        applied again after a crash before its checkpoint finds its versions there)."""
        from pyspark.sql import functions as F

        from sharesync.pipelines.jobs.staged import read_staged, staged_files
        from sharesync.pipelines.targets.delta.format import DELTA

        files = staged_files(job.staged)
        if not files:
            return Applied(ApplyStats(), KeysLogged())
        newest = DELTA.high_water_mark(job.target, COMMIT_VERSION)  # None: no log yet
        rows = read_staged(job.spark(), job.staged, files).select(*job.table.keys, CHANGE_TYPE, COMMIT_VERSION)
        rows = rows.where(F.col(COMMIT_VERSION) > (newest if newest is not None else -1))
        logged = rows.count()
        if logged:
            DELTA.writer.save(rows, job.target, mode="append", record=job.record)  # the format's writer, fenced
        return Applied(ApplyStats(rows_in_batch=logged, inserted=logged), KeysLogged(logged=logged))


def _audit_registry(*table_keys: str) -> ModeRegistry:
    audit = Registered(name="keys_audit", follows=Mode.APPEND, strategy=KeysAuditLog())
    return ModeRegistry([audit], tables=dict.fromkeys(table_keys, "keys_audit"))


def _expected(source: str, bootstrap: int, end: int) -> Counter[tuple[object, ...]]:
    """The snapshot's keys as inserts at the bootstrap's version, then every CDF row's key change."""
    table = DeltaTable(source)
    table.load_as_version(bootstrap)
    rows = Counter((r["id"], "insert", bootstrap) for r in read_rows(table, ["id"]).to_pylist())
    if bootstrap < end:
        import pyarrow as pa

        cdf = pa.RecordBatchReader.from_stream(
            DeltaTable(source).load_cdf(starting_version=bootstrap + 1, ending_version=end)
        ).read_all()
        rows.update(
            (r["id"], r[CHANGE_TYPE], int(r[COMMIT_VERSION]))
            for r in cdf.select(["id", CHANGE_TYPE, COMMIT_VERSION]).to_pylist()
        )
    return rows


def _logged(target: str) -> Counter[tuple[object, ...]]:
    rows = read_rows(DeltaTable(target)).to_pylist()
    return Counter((r["id"], r[CHANGE_TYPE], r[COMMIT_VERSION]) for r in rows)


def test_a_mode_defined_in_the_tests_syncs_a_table_through_the_registry(workspace: Workspace) -> None:
    workspace.table("a", rows=12, partitioned=False, seed=3)
    config = workspace.config(workspace.spec("a", "append", keys=["id"]))
    modes = _audit_registry(config.tables[0].key)
    source, target = str(workspace.path("a")), workspace.target("a")

    first = workspace.syncer(config, modes=modes).sync_table(workspace.name("a"))
    bootstrap = source_version(source)
    assert first.outcome is TableOutcome.SYNCED, first.error
    assert _logged(target) == _expected(source, bootstrap, bootstrap)
    assert DeltaTable(target).schema().to_arrow().names == ["id", CHANGE_TYPE, COMMIT_VERSION]  # keys only

    workspace.commit("a", 3, seed=31)
    second = workspace.syncer(config, modes=modes).sync_table(workspace.name("a"))
    assert second.outcome is TableOutcome.SYNCED, second.error
    assert _logged(target) == _expected(source, bootstrap, source_version(source))
    logged = sum(_expected(source, bootstrap, source_version(source)).values()) - 12
    assert second.changes.counts() == {"key_changes_logged": logged}
    assert second.changes.describe() == f"{logged} key changes logged"

    again = workspace.syncer(config, modes=modes).sync_table(workspace.name("a"))
    assert again.outcome is TableOutcome.UP_TO_DATE


def test_a_table_given_a_mode_whose_rules_its_config_does_not_follow_is_refused(workspace: Workspace) -> None:
    workspace.table("m", rows=3, partitioned=False)
    config = workspace.config(workspace.spec("m"))  # merge mode
    with pytest.raises(ConfigError, match=r"follows mode 'append' rules; set 'mode: append'"):
        workspace.syncer(config, modes=_audit_registry(config.tables[0].key))
    with pytest.raises(ConfigError, match=r"no mode named \['auditing'\] is registered"):
        ModeRegistry(tables={config.tables[0].key: "auditing"})
