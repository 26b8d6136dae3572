"""What a provider says about its data (issue 43 §2), over real HTTP from the local server.

A share's ``displayName``, ``comment`` and ``properties`` come from its ``_share.json``; a table's
description is its Delta log's own (written by deltalake). The provider is not trusted: its
words reach ``discover`` one line each, without control or format characters, bounded, and
rich markup in them is printed as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support.faults import SharingServer

from sharesync.sync.cli.main import cli
from sharesync.sync.core.provider_text import TEXT_CHARS, bounded_properties, one_line
from sharesync.sync.core.redact import register_secret
from sharesync.sync.server.samples import create_sample_table, table_path

HOSTILE = "Orders\nerror: forged line \x1b[31mred\x1b[0m [bold]markup[/bold] \u202eevil\u202c " + "x" * 900
SHARE = {
    "displayName": "Sales\x1b]0;title\x07 Share",
    "comment": "Daily orders.\r\nSecond line",
    "properties": {"owner": "sales-team", "note\n": "a\x00b"},
}


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("SHARESYNC_RETRY_TOTAL_SECONDS", "2")
    for name in ("SHARESYNC_PROFILE", "SHARESYNC_CONFIG", "SHARESYNC_STATE_STORE", "SHARESYNC_STAGING_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_one_line_removes_what_could_forge_or_drive_a_terminal() -> None:
    shown = one_line(HOSTILE)
    assert shown is not None and len(shown) == TEXT_CHARS and shown.endswith("…")
    assert all(c.isprintable() for c in shown) and "\u202e" not in shown
    assert shown.startswith("Orders error: forged line [31mred [0m [bold]markup[/bold] evil x")
    assert one_line(" \n\t ") is None and one_line(None) is None
    register_secret("s3cr3t-provider-token")
    assert one_line("token s3cr3t-provider-token here") == "token *** here"


def test_properties_are_bounded_like_the_protocol_says() -> None:
    many = {f"k{i:03d}": "v" * 2000 for i in range(80)}
    shown = bounded_properties(many)
    assert len(shown) == 50 and all(len(v) == 1000 for v in shown.values())
    assert bounded_properties({"a\nb": "c\x1bd", " ": "dropped"}) == {"a b": "c d"}


@pytest.fixture(scope="module")
def wordy_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharingServer]:
    root = tmp_path_factory.mktemp("wordy")
    create_sample_table(table_path(root, "sales", "s", "orders"), rows=3, partitioned=False, description=HOSTILE)
    create_sample_table(table_path(root, "sales", "s", "plain"), rows=3, partitioned=False)
    (root / "sales" / "_share.json").write_text(json.dumps(SHARE), encoding="utf-8")
    with SharingServer(root) as server:
        server.write_profile(root.parent / f"{root.name}.share")
        yield server


def _discover(server: SharingServer, tmp_path: Path, *args: str) -> Result:
    config = tmp_path / "sharesync.yaml"
    config.write_text(f"profile: {server.profile_path}\n", encoding="utf-8")
    return CliRunner().invoke(cli, ["--config", str(config), "discover", *args])


def test_discover_json_carries_the_provider_words_made_safe(wordy_server: SharingServer, tmp_path: Path) -> None:
    result = _discover(wordy_server, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    tables = {t["name"]: t for t in answer["tables"]}
    assert tables["sales.s.orders"]["description"] == one_line(HOSTILE)
    assert tables["sales.s.plain"]["description"] is None
    assert answer["shares"] == [
        {
            "provider": "default",
            "name": "sales",
            "display_name": "Sales ]0;title Share",
            "comment": "Daily orders. Second line",
            "properties": {"note": "a b", "owner": "sales-team"},
        }
    ]


def test_discover_text_shows_them_on_one_line_each(wordy_server: SharingServer, tmp_path: Path) -> None:
    result = _discover(wordy_server, tmp_path)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "error: forged" not in out.replace("Orders error: forged", "")  # never a line of its own
    assert max(len(line) for line in out.splitlines() if not line.startswith("share ")) <= 80  # the table
    share_lines = [line for line in out.splitlines() if line.startswith("share ")]
    assert share_lines == ["share sales: Sales ]0;title Share — Daily orders. Second line — note=a b, owner=sales-team"]
    row = next(line for line in out.splitlines() if line.startswith(" sales.s.orders"))
    assert "Orders error: forg" in row and row.rstrip().endswith("…")  # cut to its cell, on its row


def test_named_tables_get_their_share_words_too(wordy_server: SharingServer, tmp_path: Path) -> None:
    result = _discover(wordy_server, tmp_path, "sales.s.plain", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["shares"][0]["display_name"] == "Sales ]0;title Share"


def test_one_unreachable_provider_is_an_error_line_and_exit_1_the_others_listed(
    wordy_server: SharingServer, tmp_path: Path
) -> None:
    """docs/commands.md: "a provider that cannot be listed is an error line and exit 1, the
    others are still listed" (issue 40 §3)."""
    gone = tmp_path / "gone.share"
    gone.write_text(
        json.dumps(
            {
                "shareCredentialsVersion": 1,
                "endpoint": f"http://127.0.0.1:{_closed_port()}/ds",
                "bearerToken": "t-123456",
            }
        ),
        encoding="utf-8",
    )
    refused = tmp_path / "refused.share"
    refused.write_text(json.dumps({**wordy_server.profile(), "bearerToken": "not-the-token-42"}), encoding="utf-8")
    config = tmp_path / "sharesync.yaml"
    config.write_text(
        f"providers:\n  live: {{profile: {wordy_server.profile_path}}}\n  gone: {{profile: {gone}}}\n"
        f"  beta: {{profile: {refused}}}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["--config", str(config), "discover", "--json"])
    assert result.exit_code == 1, (result.output, result.stderr)
    assert {t["provider"] for t in json.loads(result.stdout)["tables"]} == {"live"}
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 2, errors
    assert errors[0].startswith("error: provider 'gone': list shares: connection refused"), errors
    assert errors[1].startswith(f"error: provider 'beta' ({refused}): list shares: HTTP 401"), errors
    assert "not-the-token-42" not in result.stderr


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
