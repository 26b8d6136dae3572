"""deploy/kubernetes/apache-spark/: Apache Spark + Delta instead of Sail, checked as test_kubernetes.py
checks the base — API schemas (kubernetes-validate, offline) and the references a schema cannot see.

The component is composed here as kustomize composes it (the base's objects, less the ones its
patches delete, plus its own and its generated ConfigMaps); when kubectl is installed, its built-in
kustomize renders the README's one-line switch and must give the same objects. The cluster mirrors
tests/support/spark_server.py: `run.sh master`, workers, `run.sh connect --master spark://…`,
all from the engine directory deploy/spark/fetch.sh fills, on a volume mounted read-only.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from support.manifests import KUBERNETES_VERSION, env_of, kustomize, load, mounts

from sharesync.sync.core.config import parse_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BASE = DEPLOY / "kubernetes"
COMPONENT = BASE / "apache-spark"
BASE_KUSTOMIZATION: dict[str, Any] = yaml.safe_load((BASE / "kustomization.yaml").read_text())
KUSTOMIZATION: dict[str, Any] = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
NAMESPACE = BASE_KUSTOMIZATION["namespace"]
# The README's switch: these two lines of ../kustomization.yaml, uncommented.
SWITCH = "# components:\n#   - apache-spark\n"

BASE_DOCS = [doc for name in BASE_KUSTOMIZATION["resources"] for doc in load(BASE / name)]
OWN = [doc for name in KUSTOMIZATION["resources"] for doc in load(COMPONENT / name)]
GENERATED = [
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": generator["name"], "namespace": NAMESPACE},
        "data": {name: (COMPONENT / name).read_text() for name in generator["files"]},
    }
    for generator in KUSTOMIZATION["configMapGenerator"]
]
DELETED = {
    (patch["kind"], patch["metadata"]["name"])
    for patch in (yaml.safe_load(p["patch"]) for p in KUSTOMIZATION["patches"])
    if patch.get("$patch") == "delete"
}
DOCS = [d for d in BASE_DOCS if (d["kind"], d["metadata"]["name"]) not in DELETED] + OWN + GENERATED
WORKLOADS = ("Deployment", "StatefulSet", "Job")
SPARK_IMAGE = "eclipse-temurin:17-jre"


def named(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in DOCS if doc["kind"] == kind}


def pod(name: str, kind: str = "Deployment") -> dict[str, Any]:
    spec: dict[str, Any] = named(kind)[name]["spec"]["template"]["spec"]
    return spec


def spark_pods() -> dict[str, dict[str, Any]]:
    """name → pod spec of every workload running run.sh (the component's Deployments)."""
    return {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in OWN if d["kind"] == "Deployment"}


def run_sh(spec: dict[str, Any]) -> tuple[str, list[str]]:
    """(role, arguments after it) of the pod's run.sh command."""
    (container,) = spec["containers"]
    command = container["command"]
    assert command[0] == "bash" and command[1].endswith("/run.sh"), command
    return command[2], command[3:]


def options(arguments: list[str]) -> dict[str, str]:
    return dict(zip(arguments[::2], arguments[1::2], strict=True))


def accepted(role: str) -> set[str]:
    """The options run.sh's `case` branch for this role parses."""
    script = (DEPLOY / "spark" / "run.sh").read_text()
    branch = script.split(f"\n  {role})\n", 1)[1].split("\n    ;;\n", 1)[0]
    return set(re.findall(r"^\s+(--[a-z-]+)\)", branch, flags=re.MULTILINE))


def claim_volumes(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v["persistentVolumeClaim"] for v in spec["volumes"] if "persistentVolumeClaim" in v}


def test_the_component_is_switched_on_by_uncommenting_two_lines_and_lists_its_files() -> None:
    files = sorted(p.name for p in COMPONENT.glob("*.yaml") if p.name != "kustomization.yaml")

    assert SWITCH in (BASE / "kustomization.yaml").read_text()
    assert KUSTOMIZATION["kind"] == "Component"
    assert sorted(KUSTOMIZATION["resources"]) == files


@pytest.mark.parametrize("name", ["run.sh", "fetch.sh", "pom.xml"])
def test_the_scripts_in_the_config_maps_are_the_projects_own(name: str) -> None:
    """kustomize loads no file outside the component (nor a link leading out of it), so the one copy
    of each script lives here and deploy/spark/'s are relative links to it: one source, no drift."""
    generated = {file for generator in KUSTOMIZATION["configMapGenerator"] for file in generator["files"]}
    link = DEPLOY / "spark" / name

    assert generated == {"run.sh", "fetch.sh", "pom.xml"}
    assert not (COMPONENT / name).is_symlink()
    assert link.is_symlink() and os.readlink(link) == f"../kubernetes/apache-spark/{name}"
    assert link.resolve() == (COMPONENT / name).resolve()


@pytest.mark.parametrize("doc", OWN + GENERATED, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_manifest_passes_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)

    assert doc["metadata"]["namespace"] == NAMESPACE
    if doc in OWN:
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "sharesync"


def test_sail_goes_and_the_spark_connect_service_selects_the_spark_driver() -> None:
    sail = {(d["kind"], d["metadata"]["name"]) for d in load(BASE / "sail.yaml")}
    service = named("Service")["spark-connect"]
    selected = [
        d["metadata"]["name"]
        for d in DOCS
        if d["kind"] in WORKLOADS
        and service["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
    ]
    (server,) = pod("spark-driver")["containers"]
    role, arguments = run_sh(pod("spark-driver"))
    (port,) = service["spec"]["ports"]
    (container_port,) = [p for p in server["ports"] if p["name"] == port["targetPort"]]
    config = parse_config(yaml.safe_load(named("ConfigMap")["sharesync-config"]["data"]["sharesync.yaml"]))

    assert DELETED == sail - {("Service", "spark-connect")}
    assert not any(c.get("command", [""])[0] == "sail" for spec in spark_pods().values() for c in spec["containers"])
    assert selected == ["spark-driver"]
    assert role == "connect"
    assert int(options(arguments)["--port"]) == container_port["containerPort"] == port["port"] == 15002
    assert config.spark.remote == "sc://spark-connect:15002"


def test_a_master_workers_and_a_connect_server_against_the_master_as_the_tests_start_them() -> None:
    master = named("Service")["spark-master"]
    roles = {name: run_sh(spec) for name, spec in spark_pods().items()}
    master_port = int(options(roles["spark-master"][1])["--port"])
    url = f"spark://{master['metadata']['name']}:{master_port}"
    worker_role, worker_arguments = roles["spark-worker"]

    assert {name: role for name, (role, _) in roles.items()} == {
        "spark-master": "master",
        "spark-worker": "worker",
        "spark-driver": "connect",
    }
    assert (
        master["spec"]["selector"].items()
        <= named("Deployment")["spark-master"]["spec"]["template"]["metadata"]["labels"].items()
    )
    assert master_port in [p["port"] for p in master["spec"]["ports"]]
    assert worker_arguments[0] == options(roles["spark-driver"][1])["--master"] == url
    assert named("Deployment")["spark-worker"]["spec"]["replicas"] >= 2
    # The executors ask for no more memory than a worker offers.
    executor = options(roles["spark-driver"][1])["--conf"]
    assert executor == "spark.executor.memory=5g"
    assert int(options(worker_arguments[1:])["--memory"].removesuffix("g")) >= 5


@pytest.mark.parametrize("name", sorted(spark_pods()))
def test_run_sh_gets_only_options_it_parses_and_an_address_other_pods_reach(name: str) -> None:
    """run.sh defaults to loopback. The master and the workers advertise their --host to each other
    (so: the pod IP); the Connect server on 0.0.0.0 advertises the pod's address itself."""
    spec = spark_pods()[name]
    (container,) = spec["containers"]
    role, arguments = run_sh(spec)
    given = options(arguments[1:] if role == "worker" else arguments)
    env = env_of(container)
    variables = set(re.findall(r"\$\(([A-Z0-9_]+)\)", " ".join(container["command"])))

    assert set(given) <= accepted(role)
    if role == "connect":
        assert given["--host"] == "0.0.0.0"
    else:
        assert given["--host"] == "$(POD_IP)"
        assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert variables <= set(env)  # Kubernetes expands $(VAR) in a command only from the container's env
    assert "--packages" not in container["command"] and "jars.packages" not in " ".join(container["command"])


@pytest.mark.parametrize("name", sorted(spark_pods()))
def test_every_spark_pod_runs_the_launcher_from_the_config_map_over_the_read_only_engine_volume(name: str) -> None:
    spec = spark_pods()[name]
    (container,) = spec["containers"]
    (wait,) = spec["initContainers"]
    home = env_of(container)["SHARESYNC_SPARK_HOME"]["value"]
    claims = claim_volumes(spec)
    config_maps = {v["name"]: v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v}
    mounted = {m["mountPath"]: m for m in container["volumeMounts"]}
    script_dir = container["command"][1].rsplit("/", 1)[0]

    assert container["image"] == wait["image"] == SPARK_IMAGE
    assert config_maps[mounted[script_dir]["name"]] == "sharesync-spark-run"
    assert claims[mounted[home]["name"]] == {"claimName": "sharesync-spark-engine", "readOnly": True}
    # Mounted read-only by every container of the pod (the Job alone writes it).
    engine_mounts = [m for c in (container, wait) for m in c["volumeMounts"] if m["mountPath"] == home]
    assert len(engine_mounts) == 2 and all(m["readOnly"] is True for m in engine_mounts)
    # Pods wait for the Job's stamp instead of failing on an empty volume.
    assert f"{home}/.complete" in wait["command"][-1]
    assert mounts(spec | {"containers": [wait]}, "wait-for-engine") == {home: "sharesync-spark-engine"}


def test_the_compose_profile_runs_the_same_image_and_launcher_over_the_same_directory() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]["apache-spark"]
    (container,) = pod("spark-driver")["containers"]

    assert compose["image"] == SPARK_IMAGE
    assert compose["environment"]["SHARESYNC_SPARK_HOME"] == env_of(container)["SHARESYNC_SPARK_HOME"]["value"]
    assert compose["command"][2:3] == container["command"][2:3] == ["connect"]


def test_the_job_fills_the_engine_volume_once_with_fetch_sh() -> None:
    spec = pod("spark-engine-fetch", "Job")
    (container,) = spec["containers"]
    home = env_of(container)["SHARESYNC_SPARK_HOME"]["value"]
    script = container["command"][-1]
    config_maps = {v["name"]: v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v}
    (fetch_mount,) = [m for m in container["volumeMounts"] if m["name"] in config_maps]
    engine = named("PersistentVolumeClaim")["sharesync-spark-engine"]
    homes = {env_of(s["containers"][0])["SHARESYNC_SPARK_HOME"]["value"] for s in spark_pods().values()}

    assert mounts(spec, "fetch") == {home: "sharesync-spark-engine"}
    assert not any(m.get("readOnly") for m in container["volumeMounts"] if m["mountPath"] == home)
    assert set(named("ConfigMap")[config_maps[fetch_mount["name"]]]["data"]) == {"fetch.sh", "pom.xml"}
    # fetch.sh reads pom.xml beside itself: both are copied out of the mount, then run on the volume.
    assert f"cp {fetch_mount['mountPath']}/fetch.sh {fetch_mount['mountPath']}/pom.xml /tmp/fetch/" in script
    assert 'bash /tmp/fetch/fetch.sh "$SHARESYNC_SPARK_HOME"' in script
    assert homes == {home}
    assert engine["spec"]["accessModes"] == ["ReadWriteMany"]
    assert spec["restartPolicy"] == "Never"


def test_staging_is_one_claim_at_one_path_in_sharesync_the_spark_driver_and_every_worker() -> None:
    code = pod("sharesync-code")
    staging = env_of(code["containers"][0])["SHARESYNC_STAGING_DIR"]["value"]
    ((path, claim),) = [(p, c) for p, c in mounts(code, "code-server").items() if staging.startswith(p + "/")]

    assert mounts(pod("spark-driver"), "server")[path] == claim
    assert mounts(pod("spark-worker"), "worker")[path] == claim
    assert "ReadWriteMany" in named("PersistentVolumeClaim")[claim]["spec"]["accessModes"]


def test_every_reference_is_defined_here_or_created_by_the_user() -> None:
    referred = set()
    for doc in DOCS:
        if doc["kind"] not in WORKLOADS:
            continue
        spec = doc["spec"]["template"]["spec"]
        if "serviceAccountName" in spec:
            referred.add(("ServiceAccount", spec["serviceAccountName"]))
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                referred.add(("ConfigMap", volume["configMap"]["name"]))
            if "secret" in volume:
                referred.add(("Secret", volume["secret"]["secretName"]))
            if "persistentVolumeClaim" in volume:
                referred.add(("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]))
        for container in spec["containers"] + spec.get("initContainers", []):
            for entry in container.get("env", []):
                if "secretKeyRef" in entry.get("valueFrom", {}):
                    referred.add(("Secret", entry["valueFrom"]["secretKeyRef"]["name"]))
            mounted = {v["name"] for v in spec.get("volumes", [])}
            mounted |= {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}
            assert {m["name"] for m in container.get("volumeMounts", [])} <= mounted, doc["metadata"]["name"]

    missing = sorted((kind, name) for kind, name in referred if name not in named(kind))
    assert missing == [("Secret", "sharesync-postgres"), ("Secret", "sharesync-profile")]


def test_kustomize_renders_the_switch_into_the_same_objects(tmp_path: Path) -> None:
    """kubectl's kustomize, when installed, on a copy of deploy/kubernetes with the switch flipped:
    the objects composed above, generated ConfigMaps hash-suffixed and referred to by that name."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(BASE, copy)
    text = (copy / "kustomization.yaml").read_text()
    (copy / "kustomization.yaml").write_text(text.replace(SWITCH, SWITCH.replace("# ", "").replace("#", "")))
    rendered = kustomize(copy)
    if rendered is None:
        pytest.skip("kubectl is not installed")
    generated = {d["metadata"]["name"] for d in GENERATED}
    suffixed = {d["metadata"]["name"] for d in rendered if d["kind"] == "ConfigMap"} - set(named("ConfigMap"))

    def identity(doc: dict[str, Any]) -> tuple[str, str]:
        name = doc["metadata"]["name"]
        base = name.rsplit("-", 1)[0]
        return doc["kind"], base if doc["kind"] == "ConfigMap" and base in generated else name

    assert sorted(map(identity, rendered)) == sorted(map(identity, DOCS))
    assert {name.rsplit("-", 1)[0] for name in suffixed} == generated
    for doc in rendered:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        if doc["kind"] in WORKLOADS:
            for volume in doc["spec"]["template"]["spec"].get("volumes", []):
                name = volume.get("configMap", {}).get("name")
                assert name is None or name in suffixed | set(named("ConfigMap")), name
