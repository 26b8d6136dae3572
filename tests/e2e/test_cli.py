"""The ``sharesync`` command end to end: demo, preview, status, reset, exit codes, bad input."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    source_version,
)

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import open_store
from sharesync.sync.server.samples import sample_rows

STATUS_KEYS = {
    "name",
    "target",
    "mode",
    "checkpoint_version",
    "source_version",
    "lag_versions",
    "last_sync_at",
    "last_status",
    "last_error",
    "last_warning",
    "provider",
    "provider_error",
    "provider_name",  # which provider of the config shares it (issue 33)
    "removed_at_provider",  # a pattern's table the pass does not sync (issue 43 §3) …
    "needs_keys",
    "missing_keys",
    "note",  # … and why
}


def test_demo_works_from_a_fresh_directory(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    directory = tmp_path / "demo"
    run = cli("demo", "--dir", str(directory))

    assert run.code == 0, run.err
    for step in ("1. The provider's tables", "2. First sync", "4. Second sync", "5. Status", "Try next"):
        assert step in run.out
    assert "demo.sales.orders" in run.out and "demo.…" not in run.out  # names are never cut
    # Fits 80 columns, paths included, as a user's would read (`~/demo`): the test's temporary
    # directory is longer, and longer still on a pytest-xdist worker.
    assert max(len(line) for line in run.out.replace(str(directory), "~/demo").splitlines()) <= 80
    store = open_store(f"sqlite:///{directory / '.sharesync' / 'state.db'}")
    provider = directory / "provider" / "demo" / "sales"
    orders = store.get_checkpoint("demo.sales.orders")
    assert orders is not None and orders.version == source_version(provider / "orders")
    assert_merge_target_matches(provider / "orders", directory / "warehouse" / "orders", ["id"], orders.version)
    runs = sorted(store.runs_for("demo.sales.customers"), key=lambda r: r.id)
    assert_append_target_matches(
        provider / "customers",
        directory / "warehouse" / "customers_changes",
        bootstrap_version=runs[0].start_version,
        end_version=source_version(provider / "customers"),
    )
    assert "lag 0" in run.out
    assert (directory / "provider.share").stat().st_mode & 0o777 == 0o600  # the profile holds a token


def test_status_json_before_and_after_the_first_sync_and_reset(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    workspace.table("m", rows=8)
    workspace.table("a", rows=8, seed=1)
    workspace.config(workspace.spec("m"), workspace.spec("a", "append"))
    config = ("--config", str(workspace.config_file))

    before = json.loads(cli(*config, "status", "--json").out)
    assert [t["name"] for t in before["tables"]] == [workspace.name("m"), workspace.name("a")]
    for row in before["tables"]:
        assert set(row) == STATUS_KEYS
        assert row["checkpoint_version"] is None and row["lag_versions"] is None and row["last_status"] is None
        assert row["source_version"] == 0 and row["last_sync_at"] is None
    assert before["tables"][0]["mode"] == "merge" and before["tables"][0]["target"] == workspace.target("m")

    assert cli(*config, "sync").code == 0
    workspace.commit("m", 2, seed=1)
    after = {t["name"]: t for t in json.loads(cli(*config, "status", "--json").out)["tables"]}
    m = after[workspace.name("m")]
    assert (m["checkpoint_version"], m["source_version"], m["lag_versions"]) == (0, 2, 2)
    assert m["last_status"] == "succeeded" and m["last_error"] is None and m["last_sync_at"] is not None

    text = cli(*config, "status")
    assert text.code == 0 and workspace.name("m") in text.out and max(map(len, text.out.splitlines())) <= 80

    reset = cli(*config, "reset", workspace.name("m"))
    assert reset.code == 0 and "checkpoint at version 0 removed" in reset.out
    assert "no checkpoint" in cli(*config, "reset", workspace.name("m")).out
    assert json.loads(cli(*config, "status", "--json").out)["tables"][0]["checkpoint_version"] is None
    synced = cli(*config, "sync", workspace.name("m"))
    assert synced.code == 0 and "0..2" not in synced.out  # bootstrapped at 2, not replayed from 0
    assert "resumes from there" not in synced.out + synced.err  # forgotten on purpose, not lost
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], 2)


def test_sync_exit_codes(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    workspace.table("m", rows=8)
    config = ("--config", str(workspace.config_file))
    workspace.config(workspace.spec("m"))
    assert cli(*config, "sync").code == 0
    assert cli(*config, "sync").code == 0  # nothing new is fine too

    # A table the provider does not share fails that table only: exit 1, the other synced.
    workspace.commit("m", 1, seed=2)
    workspace.config(workspace.spec("m"), workspace.spec("missing"))
    run = cli(*config, "sync")
    assert run.code == 1
    assert any(line.startswith(f"error: {workspace.name('missing')}:") for line in run.err.splitlines())
    assert "error:" not in run.out  # the results table stays on stdout, errors go to stderr
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], 1)

    # A key the shared table lacks is a config error (exit 2), named, and the other table still syncs.
    workspace.commit("m", 1, seed=3)
    workspace.table("k", rows=5, seed=4)
    workspace.config(workspace.spec("m"), workspace.spec("k", keys=["nope"]))
    run = cli(*config, "sync")
    assert run.code == 2
    line = next(x for x in run.err.splitlines() if x.startswith(f"error: {workspace.name('k')}:"))
    assert "keys" in line and "'nope'" in line
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], 2)


def test_the_results_say_what_each_mode_did(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    for seed, table in enumerate(("m", "a", "s")):
        workspace.table(table, rows=12, seed=50 + seed)
    workspace.config(workspace.spec("m"), workspace.spec("a", "append"), workspace.spec("s", "snapshot"))
    config = ("--config", str(workspace.config_file))
    assert cli(*config, "sync").code == 0
    for seed, table in enumerate(("m", "a", "s")):
        workspace.commit(table, 4, seed=60 + seed)

    run = cli(*config, "sync")

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    row = {t: next(i for i, x in enumerate(lines) if x.lstrip().startswith(workspace.name(t))) for t in ("m", "a", "s")}
    assert re.search(r"\+\d+ ~\d+ -\d+ keys", lines[row["m"]]), run.out
    # Append mode: the change rows appended, by type, exactly as the provider's change feed has them.
    a = workspace.path("a")
    cdf = DeltaTable(str(a)).load_cdf(starting_version=1, ending_version=source_version(a))
    kinds = Counter(pa.RecordBatchReader.from_stream(cdf).read_all().column("_change_type").to_pylist())
    upd = kinds["update_preimage"] + kinds["update_postimage"]
    by_type = " ".join(f"{n} {k}" for k, n in (("ins", kinds["insert"]), ("upd", upd), ("del", kinds["delete"])) if n)
    assert f"{kinds.total()} rows appended" in lines[row["a"]] and by_type in lines[row["a"] + 1], run.out
    snapshot = read_rows(DeltaTable(str(workspace.path("s")))).num_rows
    assert f"{snapshot} rows written" in lines[row["s"]], run.out
    assert "ins ~upd" not in run.out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("sync", "e2e.s.nope"), ["no table 'e2e.s.nope'", "e2e.s.m"]),
        (("reset", "nope"), ["no table 'nope'"]),
        (("backfill", "e2e.s.m", "--from", "last tuesday"), ["--from"]),
        (("preview", "e2e.s.m", "--where", "{bad json"), ["--where", "JSON"]),
        (("preview", "e2e.s.m", "--where", '[{"col": "nope", "op": "eq", "val": 1}]'), ["nope"]),
        (("preview", "e2e.s.m", "--where", '[{"col": "qty", "op": "eq", "val": "x"}]'), ["qty"]),
    ],
    ids=[
        "sync-unknown-table",
        "reset-unknown-table",
        "backfill-bad-from",
        "where-not-json",
        "where-unknown-column",
        "where-wrong-type",
    ],
)
def test_bad_input_exits_2_with_one_line(
    workspace: Workspace, cli: Callable[..., CliResult], args: tuple[str, ...], words: list[str]
) -> None:
    workspace.table("m", rows=5)
    workspace.config(workspace.spec("m"))
    run = cli("--config", str(workspace.config_file), *args)
    assert run.code == 2
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), run.err
    assert all(word in lines[0] for word in words), lines[0]
    assert "Traceback" not in run.err


def test_a_config_error_names_the_field(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    config = tmp_path / "sharesync.yaml"
    config.write_text("profile: p.share\ntables:\n  - name: a.b.c\n    target: t\n    mode: merge\n", encoding="utf-8")
    run = cli("--config", str(config), "sync")
    assert run.code == 2 and "tables[0]" in run.err and "keys" in run.err


def test_preview_returns_matching_rows_and_downloads_only_what_it_needs(
    workspace: Workspace, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import random

    from sharesync.sync.predicates import Predicate
    from sharesync.sync.protocol.client import SharingClient
    from sharesync.sync.protocol.profile import load_profile
    from sharesync.sync.staging.first_rows import preview

    path = workspace.table("p", rows=10, partitioned=False)
    for i in range(12):  # one file per append: 13 files, ids in disjoint ranges
        write_deltalake(
            str(path), sample_rows(random.Random(i), list(range(100 + 10 * i, 105 + 10 * i))), mode="append"
        )
    config = workspace.config(workspace.spec("p"))
    source = read_rows(DeltaTable(str(path))).to_pylist()
    by_id = {r["id"]: r for r in source}

    with SharingClient(load_profile(config.profile)) as client:
        first = preview(client, workspace.name("p"), limit=3)
        assert first.table.num_rows == 3 and first.files_downloaded == 1  # the server's limitHint: 1 file
        for row in first.table.to_pylist():
            assert row == by_id[row["id"]]

        # A filter on a non-partition column: the limit cannot be left to the server (it counts
        # rows before filtering), so files come in small rounds until enough rows match.
        matching = [Predicate(col="qty", op="is_not_null"), Predicate(col="name", op="neq", val="x")]
        some = preview(client, workspace.name("p"), limit=12, where=matching)
        assert some.table.num_rows == 12 and some.files_listed == 13
        assert some.files_downloaded < some.files_listed
        for row in some.table.to_pylist():
            assert row == by_id[row["id"]] and row["qty"] is not None and row["name"] != "x"

        where = [Predicate(col="id", op="gte", val=200), Predicate(col="qty", op="neq", val=0)]
        filtered = preview(client, workspace.name("p"), limit=100, where=where)
        expected = {r["id"] for r in source if r["id"] >= 200 and r["qty"] is not None and r["qty"] != 0}
        assert {r["id"] for r in filtered.table.to_pylist()} == expected
        assert filtered.files_pruned >= 10  # stats prove most files hold no id >= 200
        assert filtered.files_downloaded == filtered.files_listed - filtered.files_pruned

    run = cli("--config", str(workspace.config_file), "preview", workspace.name("p"), "--limit", "2", "--json")
    assert run.code == 0, run.err
    rows = [json.loads(line) for line in run.out.splitlines()]
    assert len(rows) == 2 and all(r["id"] in by_id for r in rows)
    text = cli("--config", str(workspace.config_file), "preview", workspace.name("p"), "--limit", "2")
    assert text.code == 0 and "2 rows; files: 1 listed, 0 pruned by stats, 1 downloaded" in text.out

    # The config from $SHARESYNC_CONFIG (another working directory, no --config); time travel.
    monkeypatch.setenv("SHARESYNC_CONFIG", str(workspace.config_file))
    monkeypatch.chdir(tmp_path)
    old = cli("preview", workspace.name("p"), "--version", "0", "--limit", "100", "--json")
    assert old.code == 0, old.err
    at_zero = read_rows(DeltaTable(str(path), version=0)).to_pylist()
    assert sorted(json.loads(line)["id"] for line in old.out.splitlines()) == sorted(r["id"] for r in at_zero)
    assert len(at_zero) == 10 < len(source)
