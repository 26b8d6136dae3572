"""``maintenance:`` (defaults or per table) resolves to the thresholds a sync and ``optimize`` use."""

from __future__ import annotations

from typing import Any

import pytest

from sharesync.pipelines.targets.health import MIB, Thresholds
from sharesync.sync.core.config import SharesyncConfig, parse_config
from sharesync.sync.core.errors import ConfigError


def config(defaults: dict[str, Any], **table: Any) -> SharesyncConfig:
    raw = {"profile": "p.share", "defaults": defaults, "tables": [{"name": "s.c.t", "target": "/tmp/t", "keys": ["id"], **table}]}
    return parse_config(raw)


def test_the_defaults_are_sharesync_optimize_s_and_compaction_after_a_batch_is_on() -> None:
    cfg = config({})
    settings = cfg.maintenance(cfg.tables[0])
    assert settings.compact == "auto"
    assert Thresholds.of(settings) == Thresholds() == Thresholds(0.10, 200, 32, 32 * MIB)


def test_a_table_s_section_replaces_the_defaults_whole() -> None:
    cfg = config({"maintenance": {"compact": "off", "files": 50}}, maintenance={"small_file_mib": 8})
    own = cfg.maintenance(cfg.tables[0])
    assert (own.compact, own.files, Thresholds.of(own).small_file_bytes) == ("auto", 200, 8 * MIB)
    plain = config({"maintenance": {"compact": "off", "files": 50}})
    assert (plain.maintenance(plain.tables[0]).compact, plain.maintenance(plain.tables[0]).files) == ("off", 50)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"deleted_ratio": 1.5}, r"maintenance\.deleted_ratio.*less than or equal to 1"),
        ({"compact": "nightly"}, r"maintenance\.compact.*'auto' or 'off'"),
        ({"small_files": 1}, r"maintenance\.small_files.*greater than or equal to 2"),
        ({"thresholds": {}}, r"maintenance\.thresholds"),
    ],
)
def test_a_bad_setting_names_its_path(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config({"maintenance": section})
