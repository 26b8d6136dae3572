"""deploy/docker-compose.yml hangs together the way `docker compose config` would check it, and starts without Maven.

No container engine runs in CI, so these are the checks that need none: every image is built
here or pinned, every volume, variable and dependency refers to something that exists, and the
staging area is one volume at one path in sharesync and in the engine (the staging rule).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE_TEXT = (DEPLOY / "docker-compose.yml").read_text()
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_TEXT)
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
DEFAULT = {name: s for name, s in SERVICES.items() if not s.get("profiles")}
README = (DEPLOY / "README.md").read_text()
# ${VAR}, ${VAR:-default}, ${VAR-default}; `$${…}` is an escaped dollar for the container's shell.
VARIABLE = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


def interpolate(text: str) -> str:
    """What compose substitutes with no variable set: the defaults."""
    return VARIABLE.sub(lambda m: m.group(3) or "", text).replace("$$", "$")


def volume_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each short-syntax volume, after interpolation."""
    mounts = []
    for entry in service.get("volumes", []):
        source, target, *_ = interpolate(entry).split(":")
        mounts.append((source, target))
    return mounts


def is_named(source: str) -> bool:
    return not source.startswith((".", "/", "~"))


def test_compose_runs_postgres_sail_code_server_webserver_and_daemon() -> None:
    assert set(DEFAULT) == {"postgres", "spark-connect", "sharesync-code", "dagster-webserver", "dagster-daemon"}
    code = SERVICES["sharesync-code"]
    assert "sharesync.pipelines.dagster.definitions" in code["command"]
    assert code["command"][code["command"].index("-p") + 1] == "4000"  # workspace.yaml's port
    assert code["environment"]["SHARESYNC_STATE_STORE"].startswith("postgresql+psycopg://")
    workspace = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["grpc_server"]["host"] == "sharesync-code"
    engine = SERVICES["spark-connect"]
    assert "15002:15002" in engine["ports"]
    assert engine["command"] == ["sail", "spark", "server", "--ip", "0.0.0.0", "--port", "15002"]
    assert interpolate(engine["environment"]["SAIL_MODE"]) == "local-cluster"
    assert engine["image"] == code["image"]  # pysail is in the sharesync image


def test_the_default_profile_needs_no_maven() -> None:
    dockerfile = [line for line in (DEPLOY / "Dockerfile").read_text().splitlines() if not line.startswith("#")]
    text = json.dumps(DEFAULT).lower() + "\n".join(dockerfile).lower()

    for needle in ("--packages", "spark.jars.packages", "maven", "ivy"):
        assert needle not in text


def test_apache_spark_is_a_profile_running_the_projects_launcher_over_the_fetched_directory() -> None:
    """The profile starts what the tests start (deploy/spark/run.sh connect) from the directory
    deploy/spark/fetch.sh fills, mounted read-only: nothing downloads at start-up."""
    spark = SERVICES["apache-spark"]
    command = [interpolate(part) for part in spark["command"]]
    mounts = {target: source for source, target in volume_mounts(spark)}
    home = spark["environment"]["SHARESYNC_SPARK_HOME"]

    assert spark["profiles"] == ["apache-spark"]
    assert command[:3] == ["bash", "/opt/sharesync-spark-run.sh", "connect"]
    # deploy/spark/run.sh itself (a link to the one copy, in the Kubernetes component): Docker follows it.
    assert Path(os.path.normpath(DEPLOY / mounts["/opt/sharesync-spark-run.sh"])) == DEPLOY / "spark" / "run.sh"
    assert (DEPLOY / mounts[home]).resolve() == REPO / ".engines" / "spark"  # fetch.sh's default directory
    assert all(entry.endswith(":ro") for entry in spark["volumes"] if "sharesync-spark" in entry)
    text = json.dumps(spark) + (DEPLOY / "spark" / "run.sh").read_text()
    assert "--packages" not in text and "jars.packages" not in text


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_image_is_built_here_or_pinned(name: str) -> None:
    service = SERVICES[name]
    built = {s["image"] for s in SERVICES.values() if "build" in s}

    if "build" in service:
        context = DEPLOY / service["build"]["context"]
        dockerfile = context / service["build"]["dockerfile"]
        assert dockerfile.is_file()
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY ") and "--from" not in line:
                *sources, _ = line.split()[1:]
                assert all((context / source).exists() for source in sources), line
    else:
        image = service["image"]
        assert image in built or (":" in image and not image.endswith(":latest")), image


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_volume_is_declared_or_a_path_that_exists_or_is_documented(name: str) -> None:
    for source, _ in volume_mounts(SERVICES[name]):
        if is_named(source):
            assert source in COMPOSE["volumes"], source
        else:
            path = (DEPLOY / source).resolve()
            # deploy/config and deploy/jars are the user's: the README says what goes in them.
            assert path.exists() or f"{path.relative_to(REPO).as_posix()}/" in README, source


def test_every_declared_volume_is_used() -> None:
    used = {source for s in SERVICES.values() for source, _ in volume_mounts(s) if is_named(source)}

    assert used == set(COMPOSE["volumes"])


def test_every_variable_has_a_default_or_is_documented() -> None:
    variables = VARIABLE.findall(COMPOSE_TEXT)

    assert variables
    for name, operator, default in variables:
        assert (operator and default) or f"`{name}`" in README, name


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_depends_on_names_services_of_the_same_profile(name: str) -> None:
    for target in SERVICES[name].get("depends_on", {}):
        assert target in SERVICES
        # a default service waiting on a profiled one would not start with a plain `docker compose up`
        assert name not in DEFAULT or target in DEFAULT


def test_staging_is_one_volume_at_one_path_in_sharesync_and_in_every_engine() -> None:
    staging = SERVICES["sharesync-code"]["environment"]["SHARESYNC_STAGING_DIR"]
    (volume, path), *_ = [
        (source, target)
        for source, target in volume_mounts(SERVICES["sharesync-code"])
        if is_named(source) and staging.startswith(target + "/")
    ]

    for engine in ("spark-connect", "apache-spark"):
        assert (volume, path) in volume_mounts(SERVICES[engine])
