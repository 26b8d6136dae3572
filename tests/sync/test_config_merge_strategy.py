"""merge_strategy / rewrite_threshold resolve to the threshold ``apply_merge`` takes."""

from __future__ import annotations

from typing import Any

import pytest

from sharesync.sync.core.config import parse_config


def config(defaults: dict[str, Any], **table: Any) -> Any:
    raw = {
        "profile": "p.share",
        "defaults": defaults,
        "tables": [{"name": "s.c.t", "target": "/tmp/t", "keys": ["id"], **table}],
    }
    return parse_config(raw)


@pytest.mark.parametrize(
    ("defaults", "table", "expected"),
    [
        ({}, {}, 0.1),  # auto at 10 % of the target's rows
        ({"rewrite_threshold": 0.5}, {}, 0.5),
        ({"merge_strategy": "merge"}, {}, None),
        ({"merge_strategy": "merge"}, {"merge_strategy": "auto"}, 0.1),
        ({}, {"merge_strategy": "rewrite"}, 0.0),
        ({"rewrite_threshold": 0.3}, {"merge_strategy": "merge"}, None),
    ],
)
def test_the_table_setting_wins_over_the_defaults(
    defaults: dict[str, Any], table: dict[str, Any], expected: float | None
) -> None:
    cfg = config(defaults, **table)
    assert cfg.rewrite_threshold(cfg.tables[0]) == expected


def test_a_negative_threshold_is_refused() -> None:
    from sharesync.sync.core.errors import ConfigError

    with pytest.raises(ConfigError, match="defaults.rewrite_threshold"):
        config({"rewrite_threshold": -1})
