"""The key-uniqueness and schema-drift checks: pure verdicts, the key scan on real Delta tables, and both
checks on a synced target that is then tampered with (a planted duplicate) or outgrown (a new provider column)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from support.dagster_site import APPEND_TABLE, MERGE_TABLE, Site, check_results, materialize

from sharesync.pipelines.dagster.checks import build_check_specs, routine_check_keys
from sharesync.pipelines.dagster.target_checks import (
    FULL_VERIFY,
    IS_CURRENT,
    KEYS_UNIQUE,
    SCHEMA_DRIFT,
    duplicate_keys,
    keys_unique_verdict,
    schema_verdict,
)
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.core.location import locate
from sharesync.sync.core.table_config import BreakingChangePolicy, NewColumnPolicy

ORDERS = "sharesync/dg/sales/orders"
WARN, ERROR = dg.AssetCheckSeverity.WARN, dg.AssetCheckSeverity.ERROR
IGNORE, REBUILD = NewColumnPolicy.IGNORE, BreakingChangePolicy.REBUILD


# ---------------------------------------------------------------- verdicts


def test_keys_unique_verdicts() -> None:
    assert keys_unique_verdict(["id"], None).description.startswith("skipped")  # type: ignore[union-attr]
    unique = keys_unique_verdict(["id"], (0, []))
    assert unique.passed and unique.metadata["duplicate_keys"].value == 0
    twice = keys_unique_verdict(["id", "region"], (7, ["3, eu", "4, us"]))
    assert not twice.passed and twice.severity == ERROR
    assert "(3, eu); (4, us) …" in (twice.description or "") and "--full-refresh" in (twice.description or "")


def test_schema_verdicts() -> None:
    provider = [("id", "long"), ("qty", "long"), ("note", "string")]
    same = schema_verdict(
        5, provider, [("id", "long"), ("qty", "long"), ("note", "string"), ("_sharesync_version", "long")], None
    )
    assert same.passed, same.description

    drifted = schema_verdict(5, provider, [("id", "long"), ("qty", "integer"), ("old", "string")], None)
    assert not drifted.passed and drifted.severity == WARN
    assert drifted.metadata["not_in_target"].value == "note string"
    assert drifted.metadata["type_changed"].value == "qty integer -> long"
    assert drifted.metadata["only_in_target"].value == "old string"

    chosen = schema_verdict(
        5, provider, [("ID", "long"), ("_change_type", "string")], ["id"]
    )  # `columns: []`, keys [id]
    assert chosen.passed, chosen.description
    assert schema_verdict(5, provider, None, None).description.startswith("skipped")  # type: ignore[union-attr]

    ignoring = schema_verdict(5, provider, [("id", "long"), ("qty", "long")], None, policy=(IGNORE, REBUILD))
    assert ignoring.passed and ignoring.metadata["ignored"].value == "note string"  # on_new_column: ignore
    retyped = schema_verdict(5, provider, [("id", "long"), ("qty", "integer")], None, policy=(IGNORE, REBUILD))
    assert not retyped.passed and "rebuild the target" in (retyped.description or "")


def test_only_keyed_modes_get_the_blocking_uniqueness_check(site: Site) -> None:
    site.write_config()
    config = site.config()
    specs = {t.mode.value: {s.name: s for s in build_check_specs(config, t)} for t in config.tables}
    assert specs["merge"][KEYS_UNIQUE].blocking
    assert KEYS_UNIQUE not in specs["append"]
    assert SCHEMA_DRIFT in specs["merge"] and SCHEMA_DRIFT in specs["append"]


# ---------------------------------------------------------------- the key scan


def test_duplicate_keys_counts_current_rows_only_in_history_mode(tmp_path: Path) -> None:
    path = str(tmp_path / "history")
    rows = pa.table(
        {"id": [1, 1, 2, 3, 3], "v": ["a", "b", "c", "d", "e"], IS_CURRENT: [False, True, True, True, True]}
    )
    write_deltalake(path, rows)

    assert duplicate_keys(locate(path), ["id"], current_only=True) == (1, ["3"])  # 1 has one current image
    every = duplicate_keys(locate(path), ["id"], current_only=False)
    assert every is not None and (every[0], sorted(every[1])) == (2, ["1", "3"])
    assert duplicate_keys(locate(tmp_path / "missing"), ["id"], current_only=False) is None
    assert duplicate_keys(locate(path), ["ID"], current_only=True) == (1, ["3"])  # config keys match in any case


# ---------------------------------------------------------------- on real targets


@pytest.mark.slow
def test_a_planted_duplicate_key_fails_the_blocking_check(site: Site) -> None:
    site.write_config(site.merge_spec(), site.append_spec())
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    synced = check_results(materialize(defs, dg.AssetSelection.assets(key, site.key(APPEND_TABLE))))
    assert synced[(ORDERS, KEYS_UNIQUE)].passed and synced[(ORDERS, SCHEMA_DRIFT)].passed
    assert synced[("sharesync/dg/sales/events", SCHEMA_DRIFT)].passed  # append: the change columns are sharesync's

    target = DeltaTable(site.target(MERGE_TABLE))
    current = read_rows(target)
    write_deltalake(site.target(MERGE_TABLE), current.filter(pc.equal(current["id"], current["id"][0])), mode="append")

    run = materialize(defs, dg.AssetSelection.checks_for_assets(key), raise_on_error=False)
    assert not run.success  # blocking, with ERROR severity: the run fails (and would hold back downstream assets)
    unique = check_results(run)[(ORDERS, KEYS_UNIQUE)]
    assert not unique.passed and unique.severity == ERROR
    assert unique.metadata["duplicate_keys"].value == 1


@pytest.mark.slow
def test_a_new_provider_column_warns_until_the_next_sync_adds_it(site: Site) -> None:
    site.write_config(site.merge_spec())
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    materialize(defs, dg.AssetSelection.assets(key).without_checks())

    source = DeltaTable(str(site.source_path(MERGE_TABLE))).to_pyarrow_table()
    row = source.slice(0, 1).set_column(0, "id", pa.array([10_000], source.schema.field("id").type))
    write_deltalake(
        str(site.source_path(MERGE_TABLE)),
        row.append_column("discount", pa.array([0.5])),
        mode="append",
        schema_mode="merge",
    )

    before = check_results(materialize(defs, dg.AssetSelection.checks_for_assets(key)))[(ORDERS, SCHEMA_DRIFT)]
    assert not before.passed and before.severity == WARN
    assert before.metadata["not_in_target"].value == "discount double"

    after = check_results(materialize(defs, dg.AssetSelection.assets(key)))[(ORDERS, SCHEMA_DRIFT)]
    assert after.passed, after.description


def test_full_verification_is_optional_and_never_part_of_a_sync_run(site: Site) -> None:
    site.write_config(site.merge_spec(), site.append_spec(), verify_check=True)
    config = site.config()
    orders, events = config.tables
    assert FULL_VERIFY in {s.name for s in build_check_specs(config, orders)}
    assert FULL_VERIFY not in {s.name for s in build_check_specs(config, events)}  # a change log: identity only
    assert FULL_VERIFY not in {k.name for k in routine_check_keys(config, orders)}
    site.write_config(site.merge_spec())
    assert FULL_VERIFY not in {s.name for s in build_check_specs(site.config(), site.config().tables[0])}


@pytest.mark.slow
def test_full_verification_finds_a_row_deleted_from_the_target(site: Site) -> None:
    site.write_config(site.merge_spec(), verify_check=True)
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    verify = dg.AssetSelection.checks(dg.AssetCheckKey(key, FULL_VERIFY))
    synced = check_results(materialize(defs, dg.AssetSelection.assets(key).without_checks() | verify))
    assert synced[(ORDERS, FULL_VERIFY)].passed, synced[(ORDERS, FULL_VERIFY)].description

    target = DeltaTable(site.target(MERGE_TABLE))
    gone = read_rows(target, ["id"])["id"][0].as_py()
    target.delete(f"id = {gone}")  # a row lost behind sharesync's back

    found = check_results(materialize(defs, verify))[(ORDERS, FULL_VERIFY)]
    assert not found.passed and found.severity == WARN
    assert found.metadata["missing_keys"].value == 1 and f"missing ({gone},)" in (found.description or "")
