"""``SHARESYNC_STATE_STORE``, ``SHARESYNC_STAGING_DIR`` and ``SHARESYNC_PROFILE`` win over the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharesync.sync.core.config import ENV_OVERRIDES, env_overrides, load_config


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ENV_OVERRIDES.values():
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "conf" / "sharesync.yaml"
    path.parent.mkdir()
    path.write_text(
        "profile: file.share\nstate_store: sqlite:///file.db\nstaging_dir: file-staging\n", encoding="utf-8"
    )
    return path


def test_without_variables_the_file_counts(config_file: Path) -> None:
    config = load_config(config_file)
    base = config_file.parent
    assert config.profile == base / "file.share"
    assert config.state_store == f"sqlite:///{base.resolve() / 'file.db'}"
    assert config.staging_dir == base / "file-staging"


def test_variables_override_the_file_and_resolve_like_it(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARESYNC_STATE_STORE", "postgresql://u@db:5432/sharesync")
    monkeypatch.setenv("SHARESYNC_STAGING_DIR", "/shared/staging")
    monkeypatch.setenv("SHARESYNC_PROFILE", "other.share")

    config = load_config(config_file)

    assert config.state_store == "postgresql://u@db:5432/sharesync"
    assert config.staging_dir == Path("/shared/staging")
    assert config.profile == config_file.parent / "other.share"  # relative to the config, as in the file


def test_an_empty_variable_overrides_nothing(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARESYNC_STATE_STORE", "")
    assert load_config(config_file).state_store.endswith("/file.db")


def test_a_variable_supplies_a_field_the_file_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sharesync.yaml"
    path.write_text("tables: []\n", encoding="utf-8")
    monkeypatch.setenv("SHARESYNC_PROFILE", "/etc/sharesync/provider.share")
    assert load_config(path).profile == Path("/etc/sharesync/provider.share")


def test_env_overrides_reads_only_its_variables() -> None:
    environ = {"SHARESYNC_STATE_STORE": "sqlite:///x.db", "SHARESYNC_PROFILE": "", "SHARESYNC_OTHER": "y"}
    assert env_overrides(environ) == {"state_store": "sqlite:///x.db"}
