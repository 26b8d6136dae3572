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


def test_token_expiry_warnings_name_each_provider(tmp_path: Path) -> None:
    """``status``'s warnings (one per provider whose token expires within a week or whose profile
    is unreadable); the one-provider wording is unchanged."""
    import json
    from datetime import UTC, datetime, timedelta

    from sharesync.pipelines.commands.status import token_warnings

    def profile(name: str, days: float) -> str:
        expires = (datetime.now(UTC) + timedelta(days=days)).isoformat()
        body = {"shareCredentialsVersion": 1, "endpoint": "https://x.example/ds", "bearerToken": "t0k3n-value"}
        (tmp_path / name).write_text(json.dumps({**body, "expirationTime": expires}), encoding="utf-8")
        return name

    raw = {
        "profile": profile("v.share", 3),
        "providers": {"p": {"profile": profile("p.share", 30)}, "gone": {"profile": "missing.share"}},
    }
    warnings = token_warnings(parse_config(raw, base_dir=tmp_path))
    assert len(warnings) == 2
    assert warnings[0].startswith("provider 'default': the profile's token expires at ")
    assert warnings[1].startswith("provider 'gone': profile file ")
    alone = parse_config({"profile": profile("v.share", 3)}, base_dir=tmp_path)
    [only] = token_warnings(alone)
    assert only.startswith("the profile's token expires at ") and "t0k3n" not in only


def test_each_providers_client_has_its_own_retry_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from sharesync.pipelines.run.clients import make_client

    monkeypatch.delenv("SHARESYNC_RETRY_MAX_ATTEMPTS", raising=False)
    body = {"shareCredentialsVersion": 1, "endpoint": "https://x.example/ds", "bearerToken": "t0k3n-value"}
    (tmp_path / "a.share").write_text(json.dumps(body), encoding="utf-8")
    raw = {
        "profile": "a.share",
        "providers": {"gentle": {"profile": "a.share", "retry_max_attempts": 2, "retry_total_seconds": 9}},
    }
    config = parse_config(raw, base_dir=tmp_path)
    with make_client(config, "gentle") as gentle, make_client(config, "default") as default:
        assert (gentle.retry.max_attempts, gentle.retry.total_seconds) == (2, 9)
        assert (default.retry.max_attempts, default.retry.total_seconds) == (8, 120)


def test_each_providers_client_has_its_own_rate_floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from sharesync.pipelines.run.clients import make_client

    monkeypatch.setenv("SHARESYNC_HTTP_MIN_RATE_SECONDS", "45")  # every provider's, unless its own says otherwise
    body = {"shareCredentialsVersion": 1, "endpoint": "https://x.example/ds", "bearerToken": "t0k3n-value"}
    (tmp_path / "a.share").write_text(json.dumps(body), encoding="utf-8")
    raw = {
        "profile": "a.share",
        "providers": {"slow": {"profile": "a.share", "min_rate_bytes_per_second": 0, "min_rate_seconds": 120}},
    }
    config = parse_config(raw, base_dir=tmp_path)
    with make_client(config, "slow") as slow, make_client(config, "default") as default:
        assert (slow.timeouts.floor_rate, slow.timeouts.floor_seconds) == (0, 120)  # 0: no floor
        assert (default.timeouts.floor_rate, default.timeouts.floor_seconds) == (1024, 45)
        assert slow.provider == "slow" and slow.retry.subject == "provider slow (https://x.example)"
