"""Bad input never half-runs: ``sharesync sync`` stops with one line that names the problem and
the fix, and writes nothing — no target, no checkpoint, no staged file (and, when the config
itself is wrong, not even a state database).

Config and profile mistakes found before any table is touched exit 2 with ``error: …`` on
stderr. Mistakes that only show against the shared table (a key it lacks, a filter on a column
it does not have) or against the target (not writable, not a Delta table, an incompatible
schema) fail that table: one ``error: <table>: …`` line, exit 2 for config mistakes and 1 for
the others. Every case here is listed in docs/troubleshooting.md's table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from support.cli_runner import CliResult
from support.reliability import Site, delta_version

# A case edits the raw config (and may prepare files) and returns it.
Setup = Callable[[Site, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    id: str
    setup: Setup
    code: int
    message: str  # a fragment of the one error line
    reaches_store: bool = False  # the failure shows only once the table is being synced


def _table(raw: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The raw config with its one table entry changed (a value of None removes the key)."""
    entry = {**raw["tables"][0], **changes}
    return {**raw, "tables": [{k: v for k, v in entry.items() if v is not None}]}


def _profile(site: Site, content: str | dict[str, Any]) -> str:
    path = site.root / "bad.share"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def _with_profile(content: Callable[[Site], str | dict[str, Any]]) -> Setup:
    return lambda site, raw: {**raw, "profile": _profile(site, content(site))}


def _good_profile(site: Site, **changes: Any) -> dict[str, Any]:
    return {**site.server.profile(), **changes}


def _deny_access(site: Site, raw: dict[str, Any]) -> dict[str, Any]:
    """The provider revoked the recipient's access: every call answers 403."""
    site.server.faults.error_rate, site.server.faults.error_status = 1.0, 403
    return raw


def _foreign_target(site: Site, raw: dict[str, Any], make: Callable[[Path], None]) -> dict[str, Any]:
    make(Path(site.target("t")))
    return raw


def _user_delta_table(path: Path) -> None:
    """A Delta table the user owns, not written by sharesync, that happens to sit at the target."""
    write_deltalake(str(path), pa.table({"id": ["a", "b"], "note": ["mine", "keep me"]}))


def _user_files(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "report.csv").write_text("id,total\n1,2\n", encoding="utf-8")


def _blocked_parent(site: Site, raw: dict[str, Any]) -> dict[str, Any]:
    blocker = site.root / "blocker"
    blocker.write_text("a file where the target's parent directory should be\n", encoding="utf-8")
    return _table(raw, target="blocker/t")


CONFIG_CASES = [
    Case(
        "unknown-top-level-field",
        lambda s, r: {**r, "stat_store": "sqlite:///x.db"},
        2,
        "stat_store: unknown field; check the spelling",
    ),
    Case("unknown-table-field", lambda s, r: _table(r, kyes=["id"]), 2, "tables[0].kyes: unknown field"),
    Case("merge-without-keys", lambda s, r: _table(r, keys=None), 2, "tables[0]: mode 'merge' needs 'keys'"),
    Case(
        "declarative-freshness-too-short",
        lambda s, r: {**_table(r, freshness_minutes=1.5), "automation": "declarative"},
        2,
        "tables[0].freshness_minutes: 1.5 minutes is too short for 'automation: declarative'",
    ),
    Case(
        "merge-strategy-unknown",
        lambda s, r: _table(r, merge_strategy="upsert"),
        2,
        "tables[0].merge_strategy: Input should be 'auto', 'merge' or 'rewrite'",
    ),
    Case(
        "merge-strategy-outside-merge-mode",
        lambda s, r: _table(r, mode="append", keys=None, merge_strategy="rewrite"),
        2,
        "tables[0]: 'merge_strategy' only applies to mode 'merge'",
    ),
    Case(
        "keys-not-in-the-schema",
        lambda s, r: _table(r, keys=["order_id"]),
        2,
        "tables[rel.s.t].keys: ['order_id'] not in the shared table's columns",
        reaches_store=True,
    ),
    Case(
        "columns-not-in-the-schema",
        lambda s, r: _table(r, columns=["id", "colour"]),
        2,
        "tables[rel.s.t].columns: ['colour'] not in the shared table's columns",
        reaches_store=True,
    ),
    Case(
        "where-unknown-column",
        lambda s, r: _table(r, where=[{"col": "colour", "op": "eq", "val": "red"}]),
        2,
        """where[0] {"col": "colour", "op": "eq", "val": "red"}: no column 'colour' in the table""",
        reaches_store=True,
    ),
    Case(
        "where-unknown-op",
        lambda s, r: _table(r, where=[{"col": "qty", "op": "between", "val": 1}]),
        2,
        "tables[0].where[0].op: Input should be",
    ),
    Case(
        "where-wrong-value-type",
        lambda s, r: _table(r, where=[{"col": "qty", "op": "gt", "val": "many"}]),
        2,
        "column 'qty' is integer, so 'val' must be a whole number, e.g. 42 (got 'many')",
        reaches_store=True,
    ),
    Case(
        "where-empty-in",
        lambda s, r: _table(r, where=[{"col": "region", "op": "in", "val": []}]),
        2,
        "op 'in' needs 'val' to be a non-empty list",
    ),
    Case(
        "bad-cron",
        lambda s, r: _table(r, schedule="every 5 minutes"),
        2,
        "'every 5 minutes' is not a valid cron expression",
    ),
    Case("bad-start-timestamp", lambda s, r: _table(r, start={"timestamp": "yesterday"}), 2, "tables[0].start"),
    Case(
        "start-timestamp-in-seconds",
        lambda s, r: _table(r, start={"timestamp": 1704067200}),
        2,
        "would be epoch milliseconds, i.e. 1970-01-20",
    ),
    Case(
        "keys-twice-in-two-cases", lambda s, r: _table(r, keys=["id", "ID"]), 2, "tables[0].keys: lists a column twice"
    ),
    Case("empty-target", lambda s, r: _table(r, target=""), 2, "tables[0].target"),
    Case(
        "no-tables",
        lambda s, r: {**r, "tables": []},
        2,
        "tables: no table listed and no include: pattern, so there is nothing to sync; add tables",
    ),
    Case(
        "duplicate-table-names",
        lambda s, r: {**r, "tables": [*r["tables"], {**r["tables"][0], "target": "wh/x"}]},
        2,
        "table 'rel.s.t' is listed twice",
    ),
    Case(
        "two-tables-one-target",
        lambda s, r: {**r, "tables": [*r["tables"], {**r["tables"][0], "name": "rel.s.other"}]},
        2,
        "share the target",
    ),
    Case(  # the same directory, spelled relative with "./" and absolute
        "two-tables-one-target-spelled-apart",
        lambda s, r: {
            **r,
            "tables": [
                {**r["tables"][0], "target": f"./{r['tables'][0]['target']}"},
                {**r["tables"][0], "name": "rel.s.other", "target": str(s.root / r["tables"][0]["target"])},
            ],
        },
        2,
        "share the target",
    ),
]

PROFILE_CASES = [
    Case(
        "profile-missing",
        lambda s, r: {**r, "profile": str(s.root / "nowhere.share")},
        2,
        "nowhere.share' not found; download the profile",
    ),
    Case(
        "profile-bad-json",
        _with_profile(lambda s: '{"shareCredentialsVersion": 1, "endpoint": '),
        2,
        "is not valid JSON",
    ),
    Case(
        "profile-unsupported-version",
        _with_profile(lambda s: _good_profile(s, shareCredentialsVersion=3)),
        2,
        "shareCredentialsVersion: 3 is not supported (supported: 1, 2); upgrade sharesync",
    ),
    Case(
        "profile-unsupported-type",
        _with_profile(lambda s: _good_profile(s, shareCredentialsVersion=2, type="kerberos")),
        2,
        "type: 'kerberos' is not supported",
    ),
    Case(
        "profile-expired-token",
        _with_profile(lambda s: _good_profile(s, expirationTime=(datetime.now(UTC) - timedelta(days=1)).isoformat())),
        2,
        "the profile's bearerToken expired at",
    ),
    Case(
        "profile-wrong-token",
        _with_profile(lambda s: _good_profile(s, bearerToken="not-the-right-token")),
        1,
        "HTTP 401 UNAUTHENTICATED: The bearer token is incorrect (check the profile's bearerToken)",
        reaches_store=True,
    ),
    Case(
        "profile-no-access",
        lambda s, r: _deny_access(s, r),
        1,
        "HTTP 403 PERMISSION_DENIED: injected fault: the recipient has no access to this share",
        reaches_store=True,
    ),
]

TARGET_CASES = [
    Case("target-parent-is-a-file", _blocked_parent, 1, "is a file, not a directory", reaches_store=True),
    Case(  # /proc: writable by its mode bits for root, yet nothing can be created there
        "target-under-proc",
        lambda s, r: _table(r, target="/proc/sharesync-target/t"),
        1,
        "target '/proc/sharesync-target/t' is not writable ('/proc' denies write access to this user); "
        "fix its permissions or choose another path",
        reaches_store=True,
    ),
    Case(
        "target-not-a-delta-table",
        lambda s, r: _foreign_target(s, r, _user_files),
        1,
        "exists and is not a Delta table (no _delta_log)",
        reaches_store=True,
    ),
    Case(
        "target-someone-elses-delta-table",
        lambda s, r: _foreign_target(s, r, _user_delta_table),
        1,
        "was not written by sharesync",
        reaches_store=True,
    ),
]


@pytest.mark.parametrize(
    "case",
    # Target cases get as far as the engine (they download, then the job checks the target).
    [*CONFIG_CASES, *PROFILE_CASES, *(pytest.param(c, marks=pytest.mark.slow) for c in TARGET_CASES)],
    ids=lambda c: c.id,
)
def test_bad_input_stops_with_one_clear_line_and_writes_nothing(
    site: Site, cli: Callable[..., CliResult], case: Case
) -> None:
    site.table("t", rows=10)
    raw = case.setup(site, site.raw_config(site.spec("t")))
    config_file = site.write_raw(raw)
    target_before = _tree(site.root / "warehouse")
    foreign_before = delta_version(site.target("t"))

    result = cli("--config", str(config_file), "sync")

    assert result.code == case.code, (result.code, result.out, result.err)
    errors = [line for line in (result.out + result.err).splitlines() if line.startswith("error:")]
    assert len(errors) == 1, f"expected one error line, got:\n{result.out}{result.err}"
    assert case.message in errors[0], errors[0]
    assert "Traceback" not in result.out + result.err
    # Nothing written: no target (a foreign one untouched), no checkpoint, no staged file.
    assert _tree(site.root / "warehouse") == target_before
    assert delta_version(site.target("t")) == foreign_before
    assert site.staged_files() == 0
    if case.reaches_store:
        # Every attempt that got as far as the table is on record for 'status': failed, same message.
        store = site.store()
        assert store.list_checkpoints() == []
        runs = store.runs_for(site.name("t"))
        assert [r.status.value for r in runs] == ["failed"] and case.message in (runs[0].error or ""), runs
    else:
        assert not site.state_db.exists(), "the state database was created although the input was refused"


@pytest.mark.slow
def test_a_target_without_write_permission_fails_the_table(site: Site, cli: Callable[..., CliResult]) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write anywhere; the parent-is-a-file case covers unwritable targets here")
    site.table("t", rows=10)
    locked = site.root / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = cli("--config", str(site.write_raw(site.raw_config(site.spec("t", target="locked/t")))), "sync")
    finally:
        locked.chmod(0o755)
    assert result.code == 1
    assert "is not writable" in result.err
    assert not (locked / "t").exists()


@pytest.mark.slow
def test_a_target_whose_schema_no_longer_fits_fails_the_table_and_keeps_the_target(
    site: Site, cli: Callable[..., CliResult]
) -> None:
    """A target sharesync wrote, whose column the provider later turned into another type."""
    site.table("t", rows=10)
    config_file = site.write_raw(site.raw_config(site.spec("t", mode="snapshot")))
    assert cli("--config", str(config_file), "sync").code == 0
    version, checkpoint = delta_version(site.target("t")), site.checkpoint("t")
    # The provider replaces the table's schema: 'qty' becomes a string.
    import random

    from sharesync.sync.server.samples import sample_rows

    rows = sample_rows(random.Random(3), [1, 2, 3])
    changed = rows.set_column(rows.schema.get_field_index("qty"), "qty", pa.array(["1", "2", "3"]))
    write_deltalake(str(site.path("t")), changed, mode="overwrite", schema_mode="overwrite")

    result = cli("--config", str(config_file), "sync")

    assert result.code == 1, result.out
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "qty" in errors[0] and "sharesync reset" in errors[0], result.err
    assert delta_version(site.target("t")) == version
    assert site.checkpoint("t") == checkpoint


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.mark.parametrize("case", [c for c in PROFILE_CASES if not c.reaches_store], ids=lambda c: c.id)
def test_status_with_a_bad_profile_stops_before_creating_the_state_database(
    site: Site, cli: Callable[..., CliResult], case: Case
) -> None:
    """As docs/troubleshooting.md says: profile mistakes stop before the state store is opened."""
    site.table("t", rows=10)
    config_file = site.write_raw(case.setup(site, site.raw_config(site.spec("t"))))

    result = cli("--config", str(config_file), "status")

    assert result.code == case.code, (result.code, result.out, result.err)
    errors = [line for line in result.err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: ") and case.message in errors[0], result.err
    assert not site.state_db.exists(), "status created the state database although the profile was refused"


def test_malformed_yaml_names_the_file_and_the_line_on_one_line(site: Site, cli: Callable[..., CliResult]) -> None:
    config_file = site.root / "sharesync.yaml"
    config_file.write_text(
        f"profile: {site.server.profile_path}\ntables:\n  - name: {site.name('t')}\n   target: warehouse/t\n",
        encoding="utf-8",
    )

    result = cli("--config", str(config_file), "sync")

    assert result.code == 2, (result.out, result.err)
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert lines == [
        f"error: config file '{config_file}' is not valid YAML: line 4, column 4: did not find expected '-' "
        "indicator (while parsing a block collection at line 3); check the indentation and quoting there"
    ]
    assert not site.state_db.exists()


def test_a_profile_others_can_read_is_warned_about_once_on_stderr(site: Site) -> None:
    """``status`` reads the profile twice (before the state store, then for token warnings): one line."""
    site.table("t", rows=10)
    site.config(site.spec("t"))
    profile = site.server.profile_path
    assert profile is not None and profile.stat().st_mode & 0o777 == 0o600  # as sharesync writes it
    profile.chmod(0o644)

    status = site.run_cli("status")

    assert status.returncode == 0, status.stderr
    warnings = [line for line in status.stderr.splitlines() if "chmod 600" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        f"profile file '{profile}' is readable by other users (mode 0644) and holds a secret; run 'chmod 600 {profile}'"
    ), status.stderr
