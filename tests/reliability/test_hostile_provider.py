"""A provider that lies (issue 31 §4): every answer is well formed, its meaning is wrong.

Each test syncs a merge, an append and a snapshot table through the syncer while the local
sharing server plays a broken or hostile provider (``tests/support/faults/hostile.py``). What
cannot be applied as sent fails each table with a message saying what the provider did, and
writes nothing — no target commit, no checkpoint move, no staged file; once the provider
behaves, the next pass converges. What the spec allows (lines in any order) is applied
correctly. What the protocol cannot tell from a correct answer (a version's files left out) is
caught afterwards by ``verify --full``, as docs/guarantees.md says.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.reliability import Expectation, Site, assert_at_checkpoint, delta_version

from sharesync.pipelines.commands.verification import verify_table
from sharesync.pipelines.run.results import TableOutcome, TableSyncResult
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.core.config import parse_config

pytestmark = pytest.mark.slow

MODES = {"m": "merge", "a": "append", "s": "snapshot"}


def _tables(site: Site, **spec: Any) -> tuple[Any, dict[str, Expectation]]:
    for seed, table in enumerate(MODES):
        site.table(table, rows=30, seed=seed)
    config = site.config(*(site.spec(t, mode, **spec) for t, mode in MODES.items()))
    return config, {t: Expectation(t, mode) for t, mode in MODES.items()}


def _converged(site: Site, results: list[TableSyncResult], expectations: dict[str, Expectation]) -> None:
    by_name = {r.name: r for r in results}
    for table, expect in expectations.items():
        result = by_name[site.name(table)]
        assert result.outcome is TableOutcome.SYNCED, f"{table}: {result.error}"
        if expect.mode == "append" and expect.bootstrap is None:
            expect.bootstrap = result.checkpoint_version
        assert_at_checkpoint(site, expect)


def _written(site: Site) -> dict[str, tuple[int | None, int | None]]:
    """Each target's Delta version and stored checkpoint version: what a failed pass must leave alone."""
    return {t: (delta_version(site.target(t)), (c.version if (c := site.checkpoint(t)) else None)) for t in MODES}


def _fails_cleanly(site: Site, results: list[TableSyncResult], before: dict[str, Any], wording: str) -> None:
    assert len(results) == len(MODES)
    for result in results:
        assert result.outcome is TableOutcome.FAILED, f"{result.name} was not refused"
        assert result.error is not None and wording in result.error, result.error
        assert "\n" not in result.error and "sig=" not in result.error, result.error
    assert _written(site) == before, "a refused pass wrote something"
    assert site.staged_files() == 0, "a refused pass left staged files"


def _commit_all(site: Site, seed: int) -> None:
    for offset, table in enumerate(MODES):
        site.commit(table, 3, seed=seed + offset)


def test_a_repeated_file_action_fails_each_table_and_writes_nothing(site: Site) -> None:
    config, expectations = _tables(site)
    syncer = site.syncer(config)
    _converged(site, syncer.sync_all(), expectations)
    _commit_all(site, seed=100)
    before = _written(site)

    site.server.faults.repeat_file_action = True
    _fails_cleanly(site, syncer.sync_all(), before, "would be applied twice; nothing was applied")

    site.server.faults.repeat_file_action = False
    _converged(site, syncer.sync_all(), expectations)


def test_versions_out_of_order_are_applied_in_version_order(site: Site) -> None:
    config, expectations = _tables(site, max_versions_per_batch=3)
    syncer = site.syncer(config)
    site.server.faults.reverse_file_actions = True  # the bootstraps' files, then every change batch
    for round_ in range(3):
        if round_:
            _commit_all(site, seed=200 * round_)
        _converged(site, syncer.sync_all(), expectations)


@pytest.fixture
def forbidden_port() -> Iterator[socket.socket]:
    """A loopback listener standing for a metadata service: it must never see a connection."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    yield listener
    listener.close()


def test_file_urls_aimed_at_another_loopback_port_fail_each_table_and_reach_nothing(
    site: Site, forbidden_port: socket.socket
) -> None:
    config, _ = _tables(site)
    syncer = site.syncer(config)
    before = _written(site)
    host, port = forbidden_port.getsockname()
    site.server.faults.file_url_origin = f"http://{host}:{port}"

    _fails_cleanly(site, syncer.sync_all(), before, f"it points at 127.0.0.1:{port}, a loopback address")
    with pytest.raises(BlockingIOError):  # no connection is waiting: nothing ever connected
        forbidden_port.accept()


def test_allow_private_file_urls_lets_a_provider_serve_files_from_another_private_origin(site: Site) -> None:
    """``localhost:<port>`` is the server itself under another origin: refused by default, fetched
    (and synced) once the config says this provider serves files from private addresses."""
    site.server.faults.file_url_origin = site.server.base_url.replace("127.0.0.1", "localhost")
    for table in MODES:
        site.table(table, rows=30, seed=7)
    specs = [site.spec(t, mode) for t, mode in MODES.items()]
    before = _written(site)
    _fails_cleanly(site, site.syncer(site.config(*specs)).sync_all(), before, "a loopback address")

    trusting = site.syncer(site.config(*specs, allow_private_file_urls=True))
    _converged(site, trusting.sync_all(), {t: Expectation(t, mode) for t, mode in MODES.items()})


def test_a_provider_that_drips_fails_each_table_at_the_deadline_and_writes_nothing(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARESYNC_HTTP_DEADLINE_SECONDS", "1")
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "1")
    config, expectations = _tables(site)
    syncer = site.syncer(config)
    _converged(site, syncer.sync_all(), expectations)
    _commit_all(site, seed=300)
    before = _written(site)

    site.server.faults.drip_seconds = 0.02  # one byte per 20 ms: every answer outlives the 1 s bound
    _fails_cleanly(site, syncer.sync_all(), before, "not complete after 1 s")

    site.server.faults.drip_seconds = 0
    _converged(site, syncer.sync_all(), expectations)


def test_a_provider_under_its_rate_floor_fails_each_table_at_once_and_writes_nothing(site: Site) -> None:
    """The floor is the provider's own setting (a 0.3 s window here instead of 30 s); the deadline stays 600 s."""
    for seed, table in enumerate(MODES):
        site.table(table, rows=30, seed=seed)
    raw = site.raw_config(*(site.spec(t, mode) for t, mode in MODES.items()))
    raw["providers"] = {"default": {"profile": raw.pop("profile"), "min_rate_seconds": 0.3}}
    site.write_raw(raw)
    config = parse_config(raw, base_dir=site.root, source=str(site.config_file))
    syncer = site.syncer(config)
    expectations = {t: Expectation(t, mode) for t, mode in MODES.items()}
    _converged(site, syncer.sync_all(), expectations)
    _commit_all(site, seed=500)
    before = _written(site)

    site.server.faults.drip_seconds = 0.01  # about 100 B/s
    _fails_cleanly(site, syncer.sync_all(), before, "under the floor of 1 KiB/s for 0.3 s; abandoned, not retried")

    site.server.faults.drip_seconds = 0
    _converged(site, syncer.sync_all(), expectations)


def test_a_table_version_that_goes_backwards_is_rebootstrapped_with_a_warning(site: Site) -> None:
    """The provider restored the table (same table id) from a copy older than our checkpoint: merge
    and snapshot targets re-bootstrap; the append log, which the provider cannot rebuild, is kept:
    refused, nothing written, naming the ways on (issue 40)."""
    config, expectations = _tables(site)
    syncer = site.syncer(config)
    for table in MODES:
        shutil.copytree(site.path(table), site.root / f"old-{table}")
    _commit_all(site, seed=400)
    _converged(site, syncer.sync_all(), expectations)
    ahead = {t: site.checkpoint(t) for t in MODES}
    for table in MODES:
        shutil.rmtree(site.path(table))
        shutil.copytree(site.root / f"old-{table}", site.path(table))
        assert site.version(table) < ahead[table].version  # type: ignore[union-attr]

    log_before = _written(site)["a"]
    results = {r.name: r for r in syncer.sync_all()}
    refused = results[site.name("a")]
    assert refused.outcome is TableOutcome.FAILED and refused.error is not None, refused
    assert "rewound" in refused.error and "--discard-target" in refused.error, refused.error
    assert _written(site)["a"] == log_before, "a refused append log was written"
    assert any("is behind our checkpoint" in w for w in results[site.name("m")].warnings), results

    assert "passes" not in refused.error  # waiting is no way on: a rewound table keeps its id
    assert all(site.checkpoint(t).table_id == ahead[t].table_id for t in MODES)  # type: ignore[union-attr]


def test_a_change_feed_that_omits_a_version_is_caught_by_verify_full(site: Site) -> None:
    """The documented gap (docs/guarantees.md, "Untrusted provider input"): the protocol cannot tell
    a version whose files were left out from one that changed no data, so the sync applies the
    answer as complete; ``verify --full`` finds the rows it lost."""
    site.table("m", rows=30, seed=1)
    syncer = site.syncer(site.config(site.spec("m")))
    _converged(site, syncer.sync_all(), {"m": Expectation("m", "merge")})
    site.append("m", 1, seed=5, rows=4)  # four new keys in one version ...
    site.server.faults.omit_version = site.version("m")  # ... which the provider leaves out
    site.append("m", 1, seed=6, rows=2)

    (result,) = syncer.sync_all()
    assert result.outcome is TableOutcome.SYNCED and result.checkpoint_version == site.version("m")

    found = verify_table(syncer.resources, syncer.table(site.name("m")), full=True)
    assert not found.ok and found.comparison is not None
    assert found.comparison.missing_keys == 4 and found.comparison.extra_keys == 0, found.lines()


HOSTILE_REGIONS = ["../../../escape", "/etc/cron.d/x", "..", "a/../../b", "C:\\win", "%2e%2e%2f", "~root", "é 😀"]


def test_odd_table_names_and_partition_values_stay_data_never_paths(site: Site) -> None:
    """A table named with spaces, URL-special characters and non-ASCII, partitioned by values shaped like
    paths: the target holds the values as data, and nothing is written outside the target,
    staging and state directories (nor above the test's directory, where "../" would lead)."""
    name = "odd name + &=☃"
    rows = pa.table({"id": list(range(len(HOSTILE_REGIONS))), "region": HOSTILE_REGIONS})
    write_deltalake(str(site.path(name)), rows, partition_by=["region"],
                    configuration={"delta.enableChangeDataFeed": "true"})  # fmt: skip
    syncer = site.syncer(site.config(site.spec(name, target="warehouse/odd")))
    before = set(site.root.rglob("*"))
    more = pa.table({"id": [100, 101], "region": ["../../../escape", "\x00nul"]})
    for round_ in range(2):
        if round_:
            write_deltalake(str(site.path(name)), more, partition_by=["region"], mode="append")
        results = syncer.sync_all()
        assert all(r.outcome is TableOutcome.SYNCED for r in results), [r.error for r in results]

    ids, regions = rows["id"].to_pylist() + more["id"].to_pylist(), HOSTILE_REGIONS + more["region"].to_pylist()
    expected = sorted(zip(ids, regions, strict=True))
    held = read_rows(DeltaTable(str(site.root / "warehouse" / "odd")), ["id", "region"])
    assert sorted(zip(held["id"].to_pylist(), held["region"].to_pylist(), strict=True)) == expected
    allowed = [site.root / d for d in ("warehouse", "staging", "state", "provider")]
    new = [p for p in site.root.rglob("*") if p not in before and p.is_file()]
    assert new and all(any(d in p.parents for d in allowed) for p in new), [
        str(p) for p in new if not any(d in p.parents for d in allowed)
    ]
    assert site.staged_files() == 0
    assert not list(site.root.parent.rglob("escape*")) and not (site.root.parent / "b").exists()
