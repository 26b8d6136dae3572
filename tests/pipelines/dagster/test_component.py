"""``SharesyncComponent``: loaded from a ``defs.yaml`` as a dg project does, it builds the classic definitions.

The example project in ``deploy/dagster-project`` is copied, pointed at a test config, and
loaded with Dagster's own project loader (``load_from_defs_folder``) in-process; ``dg check
defs`` (dagster-dg-cli, a dev dependency) validates the example itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest
import yaml
from support.dagster_site import MERGE_TABLE, Site, materialization, materialize

from sharesync.pipelines.dagster.code_location import load_definitions
from sharesync.pipelines.dagster.component import SharesyncComponent
from sharesync.sync.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "deploy" / "dagster-project"
DEFS_YAML = Path("src/sharesync_project/defs/sharesync/defs.yaml")
DG = Path(sys.executable).parent / "dg"


@contextmanager
def _dagster_internals_quiet() -> Iterator[None]:
    """Dagster's component loader re-wraps asset checks through a beta parameter (its own warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        yield


def _shape(defs: dg.Definitions) -> dict[str, object]:
    """What a user sees of a code location: keys, checks, groups, pools, sensors, schedules."""
    with _dagster_internals_quiet():
        repo = defs.get_repository_def()
        graph = repo.asset_graph
    return {
        "assets": {node.key: (node.group_name, node.freshness_policy) for node in graph.asset_nodes},
        "checks": set(graph.asset_check_keys),
        "pools": {a.op.name: a.op.pool for a in repo.assets_defs_by_key.values() if a.is_executable},
        "sensors": {s.name for s in repo.sensor_defs},
        "schedules": {s.name for s in repo.schedule_defs},
    }


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A copy of the example project; its package is importable (as ``pip install -e`` would make it)."""
    root = tmp_path / "dagster-project"
    shutil.copytree(EXAMPLE, root)
    sys.path.insert(0, str(root / "src"))
    try:
        yield root
    finally:
        sys.path.remove(str(root / "src"))
        for name in [m for m in sys.modules if m.split(".")[0] == "sharesync_project"]:
            del sys.modules[name]


def _load(project: Path, **attributes: object) -> dg.Definitions:
    defs_yaml = project / DEFS_YAML
    document = yaml.safe_load(defs_yaml.read_text())
    document["attributes"] |= attributes
    defs_yaml.write_text(yaml.safe_dump(document))
    with _dagster_internals_quiet():
        defs = dg.load_from_defs_folder(path_within_project=project)
        defs.get_repository_def().asset_graph  # noqa: B018 - built here, where Dagster's own warning is quiet
    return defs


def test_the_component_from_yaml_builds_the_classic_definitions(
    site: Site, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.write_config(site.merge_spec(freshness_minutes=30, schedule="*/10 * * * *"), site.append_spec())
    monkeypatch.setenv("SHARESYNC_CONFIG", str(site.config_file))  # the example's defs.yaml reads it

    with _dagster_internals_quiet():
        from_yaml = dg.load_from_defs_folder(path_within_project=project)

    assert _shape(from_yaml) == _shape(load_definitions(site.config_file))
    assert len(_shape(from_yaml)["checks"]) == 10  # type: ignore[arg-type]  # 6 of the merge table, 4 of append


def test_overrides_rename_select_pool_and_retry(site: Site, project: Path) -> None:
    site.write_config()
    defs = _load(
        project,
        config_path=str(site.config_file),
        tables=["DG.sales.orders"],  # names match case-insensitively, as in the CLI
        asset_key_prefix=["warehouse", "shared"],
        group_name="sharesync",
        pool="sharesync",
        retry={"max_retries": 5, "delay_seconds": 1, "backoff": None, "jitter": None},
    )

    repo = defs.get_repository_def()
    key = dg.AssetKey(["warehouse", "shared", "dg", "sales", "orders"])
    assert {n.key for n in repo.asset_graph.asset_nodes} == {
        key,
        dg.AssetKey(["delta_sharing", "dg", "sales", "orders"]),
    }
    asset = repo.assets_defs_by_key[key]
    assert asset.group_names_by_key[key] == "sharesync"
    assert asset.op.pool == "sharesync"
    assert asset.op.retry_policy == dg.RetryPolicy(max_retries=5, delay=1)
    assert {k.asset_key for k in repo.asset_graph.asset_check_keys} == {key}


def test_a_bad_attribute_or_table_name_fails_at_load(site: Site, project: Path) -> None:
    site.write_config()
    with pytest.raises(Exception) as bad_retry:  # noqa: B017 - Dagster wraps the validation error in a tree
        _load(project, config_path=str(site.config_file), retry={"max_retries": -1})
    assert "greater than or equal to 0" in "".join(traceback.format_exception(bad_retry.value))
    with pytest.raises(ConfigError, match="no table 'dg.sales.nope'"):
        SharesyncComponent(config_path=str(site.config_file), tables=["dg.sales.nope"]).selected(site.config())


def test_relative_config_paths_start_at_the_defs_folder(tmp_path: Path) -> None:
    component = SharesyncComponent(config_path="conf/sharesync.yaml")
    assert component.resolved_config_path(tmp_path) == tmp_path / "conf" / "sharesync.yaml"


@pytest.mark.slow
def test_a_prefixed_component_asset_syncs(site: Site, project: Path) -> None:
    site.write_config()
    defs = _load(project, config_path=str(site.config_file), asset_key_prefix=["warehouse"])
    key = dg.AssetKey(["warehouse", "dg", "sales", MERGE_TABLE])

    with _dagster_internals_quiet():
        result = materialize(defs, dg.AssetSelection.assets(key))

    assert materialization(result, key)["source_version_to"] == site.source_version(MERGE_TABLE)
    assert all(e.passed for e in result.get_asset_check_evaluations())


@pytest.mark.skipif(not DG.exists(), reason="dagster-dg-cli is not installed (pip install -e '.[dev]')")
def test_dg_check_defs_passes_on_the_example_project(project: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "DAGSTER_HOME": str(project / ".dagster")}
    env.pop("SHARESYNC_CONFIG", None)  # the example's own sharesync.yaml
    (project / ".dagster").mkdir()
    done = subprocess.run(
        [str(DG), "check", "defs"], cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "All definitions loaded successfully" in done.stdout + done.stderr
