"""``providers:``: several providers in one config, ``profile:`` as the one-provider short form (issue 33 §1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sharesync.sync.core.config import parse_config
from sharesync.sync.core.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_env_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHARESYNC_PROFILE", raising=False)


def table(name: str, target: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "target": target, "mode": "append", **extra}


def test_profile_alone_is_the_default_provider_and_keys_stay_bare(tmp_path: Path) -> None:
    config = parse_config({"profile": "p.share", "tables": [table("s.d.t", "w/t")]}, base_dir=tmp_path)
    assert list(config.all_providers()) == ["default"]
    assert config.provider("default").profile == tmp_path / "p.share"
    [only] = config.tables
    assert (only.provider, only.key) == ("default", "s.d.t")
    assert config.table("s.d.t") is only


def test_the_same_shared_table_from_two_providers_is_two_tables(tmp_path: Path) -> None:
    raw = {
        "profile": "vendor.share",
        "providers": {"partner": {"profile": "partner.share", "retry_max_attempts": 2, "download_concurrency": 3}},
        "tables": [table("s.d.t", "w/vendor"), table("s.d.t", "w/partner", provider="partner")],
    }
    config = parse_config(raw, base_dir=tmp_path)
    vendor, partner = config.tables
    assert [vendor.key, partner.key] == ["s.d.t", "partner/s.d.t"]
    assert config.table("partner/s.d.t") is partner and config.table("PARTNER/S.D.T") is partner
    assert config.provider("partner").profile == tmp_path / "partner.share"
    assert config.concurrency(partner) == 3 and config.concurrency(vendor) == config.defaults.download_concurrency


def test_providers_without_profile(tmp_path: Path) -> None:
    raw = {"providers": {"a": {"profile": "a.share"}, "b": {"profile": "b.share"}}, "tables": []}
    assert list(parse_config(raw, base_dir=tmp_path).all_providers()) == ["a", "b"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"tables": []}, "profile: required field is missing (or list several under 'providers:')"),
        (
            {"profile": "p.share", "providers": {"default": {"profile": "q.share"}}},
            "providers.default: 'profile:' already is the provider 'default'; remove one of them",
        ),
        (
            {"profile": "p.share", "tables": [table("s.d.t", "w/t", provider="nope")]},
            "tables[0].provider: 'nope' is not a provider of this config (known: default)",
        ),
        ({"providers": {"a b": {"profile": "x.share"}}}, "provider name 'a b' may use only letters, digits"),
        ({"providers": {"a": {"profile": "x.share", "retries": 2}}}, "providers.a.retries: unknown field"),
        (
            {
                "profile": "p.share",
                "providers": {"a": {"profile": "a.share"}},
                "tables": [table("s.d.t", "w/1", provider="a"), table("S.D.T", "w/2", provider="a")],
            },
            "table 'a/S.D.T' is listed twice",
        ),
    ],
)
def test_mistakes_name_the_field_and_the_fix(raw: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, base_dir=tmp_path)
    assert message in str(caught.value)
