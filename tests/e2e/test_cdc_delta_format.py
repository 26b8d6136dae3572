"""Change-data files of a table the server answers in the delta response format.

Delta logs every ``cdc`` action with ``dataChange: false``, and the delta response format passes
actions on as logged. The provider table is written by deltalake with change data feed on and
the ``timestampNtz`` reader feature (reader version 3), so the local server, like the reference
server, answers it in the delta format only; deltalake's UPDATE, DELETE and MERGE commits write
cdc files. Their rows — update pre- and post-images, the deleted rows alone — are the changes of
their versions, not the whole files those commits rewrote.
"""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable, TableFeatures
from support.e2e import Workspace
from support.engines import on_both_engines
from support.verify import assert_append_target_matches, assert_merge_target_matches, source_version

from sharesync.pipelines.run.results import TableOutcome
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile

pytestmark = on_both_engines  # embedded Sail and Apache Spark + Delta


def _delta_format_table(workspace: Workspace, name: str, seed: int) -> Path:
    path = workspace.table(name, rows=40, seed=seed)
    features = [TableFeatures.TimestampWithoutTimezone, TableFeatures.ChangeDataFeed]
    DeltaTable(str(path)).alter.add_feature(features, allow_protocol_versions_increase=True)
    return path


def _cdc_actions(path: Path) -> list[dict[str, object]]:
    lines = [json.loads(line) for log in sorted((path / "_delta_log").glob("*.json")) for line in log.open()]
    return [line["cdc"] for line in lines if "cdc" in line]


def test_cdc_files_in_the_delta_format_are_their_versions_change_rows(workspace: Workspace) -> None:
    appended, merged = _delta_format_table(workspace, "a", seed=21), _delta_format_table(workspace, "m", seed=22)
    config = workspace.config(workspace.spec("a", "append"), workspace.spec("m"))
    workspace.syncer(config).sync_all()  # bootstraps at version 1 (the feature commit)
    workspace.commit("a", 6, seed=23)
    workspace.commit("m", 6, seed=24)
    logged = _cdc_actions(appended)
    assert logged and all(action["dataChange"] is False for action in logged)  # what this test is about
    with SharingClient(load_profile(Path(str(config.profile)))) as client:
        answer = client.changes(workspace.name("a"), starting_version=2)
    assert answer.response_format == "delta"

    results = workspace.syncer(config).sync_all()
    assert {r.outcome for r in results} == {TableOutcome.SYNCED}
    assert_append_target_matches(
        appended, workspace.target("a"), bootstrap_version=1, end_version=source_version(appended)
    )
    assert_merge_target_matches(merged, workspace.target("m"), ["id"], source_version(merged))
