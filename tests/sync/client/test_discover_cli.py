"""``sharesync discover`` against the local server, and every way setup can be wrong (exit 2, one line).

A table that fails on its own (a reader feature sharesync cannot read, a provider error on that
table, a name that does not exist) is listed with its error and the command exits 1; tables with
deletion vectors or column mapping are answered in the delta format and listed with their reader
features (written by Sail, ``samples.build_feature_provider``).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from deltalake import DeltaTable
from support.faults import SharingServer

from sharesync.sync.cli.main import cli
from sharesync.sync.server.samples import build_feature_provider, create_sample_table, table_path


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("SHARESYNC_RETRY_TOTAL_SECONDS", "2")
    for name in ("SHARESYNC_PROFILE", "SHARESYNC_CONFIG", "SHARESYNC_STATE_STORE", "SHARESYNC_STAGING_DIR"):
        monkeypatch.delenv(name, raising=False)


def config_for(tmp_path: Path, profile: Path | dict[str, Any] | str) -> Path:
    if not isinstance(profile, Path):
        path = tmp_path / "provider.share"
        path.write_text(profile if isinstance(profile, str) else json.dumps(profile))
        profile = path
    config = tmp_path / "sharesync.yaml"
    config.write_text(f"profile: {profile}\n")
    return config


def run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(config), "discover", *args])


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.stdout == ""
    return lines[0]


def test_json_lists_every_table(sharing_server: SharingServer, tmp_path: Path) -> None:
    assert sharing_server.profile_path is not None
    result = run(config_for(tmp_path, sharing_server.profile_path), "--json")
    assert result.exit_code == 0, result.output
    tables = {t["name"]: t for t in json.loads(result.stdout)["tables"]}
    assert set(tables) == {
        "demo.sales.customers",
        "demo.sales.orders",
        "samples.all_types.no_cdf",
        "samples.all_types.partitioned",
        "samples.all_types.plain",
    }
    for name, entry in tables.items():
        share, schema, table = name.split(".")
        assert entry["version"] == DeltaTable(str(sharing_server.root / share / schema / table)).version()
    assert tables["samples.all_types.partitioned"]["partition_columns"] == ["region"]
    assert tables["samples.all_types.partitioned"]["cdf_enabled"] is True
    assert tables["samples.all_types.no_cdf"] == {
        **tables["samples.all_types.no_cdf"],
        "cdf_enabled": False,
        "partition_columns": [],
    }
    assert list(tables) == sorted(tables)
    for entry in tables.values():  # plain tables: answered in parquet, no reader features, no error
        assert entry["reader_features"] == [] and entry["error"] is None, entry


def test_named_tables_and_the_rich_table(sharing_server: SharingServer, tmp_path: Path) -> None:
    assert sharing_server.profile_path is not None
    result = run(config_for(tmp_path, sharing_server.profile_path), "demo.sales.orders", "samples.all_types.no_cdf")
    assert result.exit_code == 0, result.output
    assert "demo.sales.orders" in result.stdout and "samples.all_types.no_cdf" in result.stdout
    assert "region" in result.stdout and "demo.sales.customers" not in result.stdout
    assert "2 shared tables" in result.stdout


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def html_server() -> Iterator[str]:
    """A proxy-like endpoint that answers every request with an HTML 502 page."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/delta-sharing"
    server.shutdown()
    server.server_close()


def test_malformed_profile(tmp_path: Path) -> None:
    line = one_error_line(run(config_for(tmp_path, '{"shareCredentialsVersion": 1,')))
    assert "provider.share' is not valid JSON" in line


def test_unknown_profile_version(tmp_path: Path) -> None:
    profile = {"shareCredentialsVersion": 7, "endpoint": "https://x.example.com", "bearerToken": "t-123456"}
    assert "shareCredentialsVersion: 7 is not supported (supported: 1, 2); upgrade sharesync" in one_error_line(
        run(config_for(tmp_path, profile))
    )


def test_expired_token(sharing_server: SharingServer, tmp_path: Path) -> None:
    profile = {**sharing_server.profile(), "expirationTime": "2020-01-01T00:00:00Z"}
    line = one_error_line(run(config_for(tmp_path, profile)))
    assert "bearerToken expired at 2020-01-01T00:00:00+00:00; ask the provider for a new profile" in line


def test_wrong_token(sharing_server: SharingServer, tmp_path: Path) -> None:
    profile = {**sharing_server.profile(), "bearerToken": "not-the-token-42"}
    line = one_error_line(run(config_for(tmp_path, profile)))
    assert "list shares: HTTP 401" in line and "not-the-token-42" not in line


def test_unreachable_endpoint(tmp_path: Path) -> None:
    profile = {
        "shareCredentialsVersion": 1,
        "endpoint": f"http://127.0.0.1:{closed_port()}/ds",
        "bearerToken": "t-123456",
    }
    assert "list shares: connection refused (http://127.0.0.1:" in one_error_line(run(config_for(tmp_path, profile)))


def test_non_json_error_body(html_server: str, tmp_path: Path) -> None:
    profile = {"shareCredentialsVersion": 1, "endpoint": html_server, "bearerToken": "t-123456"}
    line = one_error_line(run(config_for(tmp_path, profile)))
    assert "list shares: HTTP 502: non-JSON error body: '<html><head><title>502 Bad Gateway" in line


def test_unknown_table(sharing_server: SharingServer, tmp_path: Path) -> None:
    """A name that does not exist is that table's failure: listed, its error on stderr, exit 1."""
    assert sharing_server.profile_path is not None
    config = config_for(tmp_path, sharing_server.profile_path)
    result = run(config, "samples.all_types.nope", "demo.sales.orders", "--json")
    assert result.exit_code == 1, (result.output, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: samples.all_types.nope: ")
    assert "metadata of samples.all_types.nope: HTTP 404 RESOURCE_DOES_NOT_EXIST" in line
    tables = {t["name"]: t for t in json.loads(result.stdout)["tables"]}
    assert tables["demo.sales.orders"]["error"] is None and tables["demo.sales.orders"]["version"] is not None
    assert tables["samples.all_types.nope"]["version"] is None
    assert tables["samples.all_types.nope"]["error"] == line.removeprefix("error: samples.all_types.nope: ")


def test_a_name_that_is_not_three_parts(sharing_server: SharingServer, tmp_path: Path) -> None:
    assert sharing_server.profile_path is not None
    result = run(config_for(tmp_path, sharing_server.profile_path), "just_a_table")
    assert result.exit_code == 2 and "'just_a_table' is not 'share.schema.table'" in result.stderr


def test_missing_config(tmp_path: Path) -> None:
    assert "config file" in one_error_line(run(tmp_path / "nope.yaml"))


def test_missing_profile(tmp_path: Path) -> None:
    assert "profile file" in one_error_line(run(config_for(tmp_path, tmp_path / "missing.share")))


# ---------------------------------------------------------------- modern and failing tables

VARIANT_PROTOCOL = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["variantType"],
                    "writerFeatures": ["variantType"]}  # fmt: skip


def _commit(table: Path, version: int, *actions: dict[str, Any]) -> None:
    lines = [{"commitInfo": {"timestamp": 1_700_000_000_000 + version}}, *actions]
    log = table / "_delta_log" / f"{version:020d}.json"
    log.write_text("".join(json.dumps(a) + "\n" for a in lines), encoding="utf-8")


@pytest.fixture(scope="module")
def mixed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharingServer]:
    """``features.modern.{dv,cm,dv_cm}`` (Sail), a plain table, and two tables that fail on their own:
    ``features.modern.variant`` needs a reader feature sharesync lacks (a crafted protocol commit),
    ``samples.all_types.broken`` has a corrupt commit (the server answers its metadata with a 500)."""
    root = tmp_path_factory.mktemp("mixed")
    build_feature_provider(root, commits=2)
    create_sample_table(table_path(root, "samples", "all_types", "plain"), rows=5, partitioned=False, seed=2)
    variant = create_sample_table(table_path(root, "features", "modern", "variant"), rows=5, partitioned=False, seed=3)
    _commit(variant, 1, {"protocol": VARIANT_PROTOCOL})
    broken = create_sample_table(table_path(root, "samples", "all_types", "broken"), rows=5, partitioned=False, seed=4)
    (broken / "_delta_log" / f"{1:020d}.json").write_text('{"commitInfo": {}}\n{not json\n', encoding="utf-8")
    with SharingServer(root) as server:
        server.write_profile(root.parent / f"{root.name}.share")
        yield server


FAILING = {
    "features.modern.variant": "table features.modern.variant uses Delta reader feature(s) variantType, "
    "which sharesync cannot read",
    "samples.all_types.broken": "metadata of samples.all_types.broken: HTTP 500",
}


def _error_lines(result: Result) -> dict[str, str]:
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith("error: ") for line in lines), result.stderr
    return dict(line.removeprefix("error: ").split(": ", 1) for line in lines)


def test_every_table_is_listed_with_reader_features_and_failures(mixed_server: SharingServer, tmp_path: Path) -> None:
    assert mixed_server.profile_path is not None
    result = run(config_for(tmp_path, mixed_server.profile_path), "--json")
    assert result.exit_code == 1, (result.output, result.stderr)
    tables = {t["name"]: t for t in json.loads(result.stdout)["tables"]}
    assert list(tables) == sorted(tables)
    assert {name: t["reader_features"] for name, t in tables.items() if t["error"] is None} == {
        "features.modern.cm": ["columnMapping"],
        "features.modern.dv": ["deletionVectors"],
        "features.modern.dv_cm": ["columnMapping", "deletionVectors"],
        "samples.all_types.plain": [],
    }
    for name in ("cm", "dv", "dv_cm"):
        entry = tables[f"features.modern.{name}"]
        assert entry["version"] == 2 and entry["cdf_enabled"] is True
    assert tables["features.modern.cm"]["partition_columns"] == ["region"]
    errors = _error_lines(result)
    assert set(errors) == set(FAILING) == {name for name, t in tables.items() if t["error"] is not None}
    for name, expected in FAILING.items():
        assert tables[name]["error"].startswith(expected), tables[name]
        assert errors[name] == tables[name]["error"]
        assert tables[name] | {"error": None} == {
            "name": name,
            "version": None,
            "cdf_enabled": None,
            "partition_columns": [],
            "reader_features": [],
            "error": None,
            "provider": "default",
            "description": None,
        }
    assert "(supported: columnMapping, deletionVectors" in tables["features.modern.variant"]["error"]
    assert mixed_server.token not in result.stdout + result.stderr


def test_the_rich_listing_marks_failing_tables(mixed_server: SharingServer, tmp_path: Path) -> None:
    assert mixed_server.profile_path is not None
    result = run(config_for(tmp_path, mixed_server.profile_path))
    assert result.exit_code == 1, (result.output, result.stderr)
    assert "6 shared tables, 2 failed" in result.stdout
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines() if line.strip().count(".") >= 2}
    assert rows["features.modern.dv"] == ["2", "yes", "—", "deletionVectors"]
    assert rows["samples.all_types.plain"] == ["0", "yes", "—", "—"]
    for name in FAILING:
        assert rows[name][0] == "failed", rows
    assert "HTTP 500" not in result.stdout  # errors go to stderr, each on one line
    assert set(_error_lines(result)) == set(FAILING)
