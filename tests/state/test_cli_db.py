"""``sharesync db``: migrations on demand, and bad input as exit 2 with one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support.state import read_only

from sharesync.state import open_store
from sharesync.state.database import dispose_databases
from sharesync.state.revisions import VERSION_TABLE
from sharesync.sync.cli.main import main


def sharesync(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    code = exited.value.code
    return (code if isinstance(code, int) else 0 if code is None else 1), out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_upgrade_then_current(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new/state.db"
    code, out, _ = sharesync(capsys, "db", "current", "--url", url)
    assert code == 0 and "empty" in out
    assert not (tmp_path / "new").exists()  # looking does not create anything

    code, out, _ = sharesync(capsys, "db", "upgrade", "--url", url)
    assert code == 0 and "upgraded from empty to revision 0005 (head)" in out
    code, out, _ = sharesync(capsys, "db", "upgrade", "--url", url)
    assert code == 0 and "already at revision 0005" in out
    code, out, _ = sharesync(capsys, "db", "current", "--url", url)
    assert code == 0 and "revision 0005 (head)" in out


def test_current_reports_a_pending_upgrade(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from sharesync.state import upgrade

    url = f"sqlite:///{tmp_path}/state.db"
    upgrade(url, "0001")
    code, out, _ = sharesync(capsys, "db", "current", "--url", url)
    assert code == 0 and "revision 0001 (head is 0005; run 'sharesync db upgrade')" in out


def test_url_comes_from_the_config_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SHARESYNC_STATE_STORE", raising=False)
    config = tmp_path / "conf" / "sharesync.yaml"
    config.parent.mkdir()
    config.write_text("profile: provider.share\nstate_store: sqlite:///state/from-config.db\n")
    code, _, err = sharesync(capsys, "--config", str(config), "db", "upgrade")
    assert code == 0, err
    assert (tmp_path / "conf" / "state" / "from-config.db").exists()  # relative to the config file


def test_url_comes_from_the_environment_without_a_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHARESYNC_CONFIG", raising=False)
    monkeypatch.setenv("SHARESYNC_STATE_STORE", f"sqlite:///{tmp_path}/env.db")
    code, _, err = sharesync(capsys, "db", "upgrade")
    assert code == 0, err
    assert (tmp_path / "env.db").exists()


def test_no_url_anywhere_says_where_to_put_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHARESYNC_CONFIG", raising=False)
    monkeypatch.delenv("SHARESYNC_STATE_STORE", raising=False)
    code, _, err = sharesync(capsys, "db", "current")
    assert code == 2 and "--url" in one_error_line(err) and "SHARESYNC_STATE_STORE" in err


@pytest.mark.parametrize("command", ["upgrade", "current"])
def test_unreachable_postgres_is_one_line_with_host_and_port_and_no_password(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, _, err = sharesync(capsys, "db", command, "--url", "postgresql://u:secretpw@127.0.0.1:1/db")
    line = one_error_line(err)
    assert code == 2
    assert "host 127.0.0.1 port 1" in line and "secretpw" not in err


def test_unknown_scheme_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = sharesync(capsys, "db", "upgrade", "--url", "mysql://u:secretpw@db/x")
    assert code == 2 and "unsupported database 'mysql'" in one_error_line(err) and "secretpw" not in err


def test_read_only_file_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    open_store(f"sqlite:///{path}")
    dispose_databases()
    with read_only(path):
        code, _, err = sharesync(capsys, "db", "upgrade", "--url", f"sqlite:///{path}")
    assert code == 2 and "read-only" in one_error_line(err)


def test_schema_from_a_newer_sharesync_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    open_store(url)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '0099'"))
    engine.dispose()
    for command in ("current", "upgrade"):
        code, _, err = sharesync(capsys, "db", command, "--url", url)
        assert code == 2 and "newer sharesync" in one_error_line(err)
