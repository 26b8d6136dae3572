"""The one owner of a pass's resources: made on first use, all closed by ``close()``, refused after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sharesync.pipelines.jobs.session import SparkEngine
from sharesync.pipelines.run.pass_resources import PassResources
from sharesync.sync.core.config import SharesyncConfig, parse_config


class _RecordingEngine(SparkEngine):
    """A Spark engine that never starts a session and remembers whether its owner closed it."""

    closed = False

    def close(self) -> None:
        self.closed = True


def _config(tmp_path: Path) -> SharesyncConfig:
    profile = tmp_path / "p.share"  # read, never reached: no request is made
    profile.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": "http://127.0.0.1:9/", "bearerToken": "t"}))
    return parse_config({"profile": str(profile), "state_store": f"sqlite:///{tmp_path}/state.db"}, base_dir=tmp_path)


def test_closing_ends_what_they_made_and_later_use_is_refused(tmp_path: Path) -> None:
    with PassResources(_config(tmp_path)) as resources:
        client = resources.client_for("default")
        assert resources.client_for("default") is client  # one per provider, made once
        resources.store.list_checkpoints()

    assert client._client.is_closed  # the httpx pool of the client they made
    for use in (
        lambda: resources.client_for("default"),
        lambda: resources.store,
        lambda: resources.budget,
        resources.spark,
    ):
        with pytest.raises(RuntimeError, match="these sync resources are closed"):
            use()
    with pytest.raises(RuntimeError, match="closed"), resources:
        pass  # not reopened either
    resources.close()  # closing twice is fine


def test_what_was_given_stays_its_givers_to_close(tmp_path: Path) -> None:
    config = _config(tmp_path)
    given, made = _RecordingEngine(config.spark, config.storage), _RecordingEngine(config.spark, config.storage)
    with PassResources(config, engine=given):
        pass
    assert not given.closed  # a ``sync --every`` process's engine outlives each pass

    own = PassResources(config)
    own._engine = made  # the one it would have made itself
    own.close()
    assert made.closed
