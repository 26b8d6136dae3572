"""deploy/kubernetes/: every manifest passes the Kubernetes API schema and refers only to what exists.

Schemas come from `kubernetes-validate` (shipped in the wheel, no network). On top of them, the
references a schema cannot see: selectors, Service ports, ConfigMaps, Secrets, claims and
service accounts, Sail's worker pods, and the staging rule (one ReadWriteMany volume at one path
in sharesync, the Sail driver and every Sail worker).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from support.manifests import KUBERNETES_VERSION, env_of, kustomize, mounts

from sharesync.sync.core.config import parse_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MANIFESTS = DEPLOY / "kubernetes"
KUSTOMIZATION: dict[str, Any] = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
FILES = sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")
DOCS: list[dict[str, Any]] = [doc for path in FILES for doc in yaml.safe_load_all(path.read_text()) if doc]
WORKLOADS = ("Deployment", "StatefulSet")
NAMESPACED = {"ConfigMap", "Deployment", "PersistentVolumeClaim", "Role", "RoleBinding", "Service"}
NAMESPACED |= {"ServiceAccount", "StatefulSet"}


def docs(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in DOCS if doc["kind"] == kind]


def named(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in docs(kind)}


def worker_template() -> dict[str, Any]:
    """Sail's worker pod template: JSON in the driver's environment, merged into every worker pod."""
    server = named("Deployment")["spark-connect"]["spec"]["template"]["spec"]["containers"][0]
    template: dict[str, Any] = json.loads(env_of(server)["SAIL_KUBERNETES__WORKER_POD_TEMPLATE"]["value"])
    return template


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    """(owner, pod spec) of every workload, and of Sail's worker pods."""
    for doc in DOCS:
        if doc["kind"] in WORKLOADS:
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]
    yield "sail-worker", worker_template()["spec"]


def user_provided() -> str:
    """The README section listing the objects users create themselves (the Secrets)."""
    readme = (DEPLOY / "README.md").read_text()
    return readme.split("### Secrets you create", 1)[1].split("\n#", 1)[0]


def test_kustomization_lists_every_manifest_and_sets_the_image_everywhere() -> None:
    images = {
        c["image"].split(":")[0]
        for _, spec in pod_specs()
        for c in spec["containers"]
        if "image" in c and not c["image"].startswith("postgres:")
    }

    assert sorted(KUSTOMIZATION["resources"]) == sorted(p.name for p in FILES)
    assert {i["name"] for i in KUSTOMIZATION["images"]} == images == {"sharesync"}
    # Read from sharesync's code server, which stays when the apache-spark component drops Sail.
    (replacement,) = KUSTOMIZATION["replacements"]
    assert replacement["source"]["name"] == "sharesync-code"
    assert replacement["targets"][0]["select"]["name"] == "spark-connect"
    assert "SAIL_KUBERNETES__IMAGE$]" in replacement["targets"][0]["fieldPaths"][0]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_manifest_passes_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)

    assert doc["metadata"]["name"]
    if doc["kind"] in NAMESPACED:
        assert doc["metadata"]["namespace"] == KUSTOMIZATION["namespace"]


def test_sails_worker_pod_template_passes_the_schema() -> None:
    pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "w"}, "template": worker_template()}

    kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)
    # Sail merges containers by name: the one it starts is called "worker".
    assert [c["name"] for c in worker_template()["spec"]["containers"]] == ["worker"]


@pytest.mark.parametrize("doc", [d for d in DOCS if d["kind"] in WORKLOADS], ids=lambda d: d["metadata"]["name"])
def test_workload_selectors_match_their_pod_templates(doc: dict[str, Any]) -> None:
    selector = doc["spec"]["selector"]["matchLabels"]
    labels = doc["spec"]["template"]["metadata"]["labels"]

    assert selector.items() <= labels.items()


@pytest.mark.parametrize("service", docs("Service"), ids=lambda d: d["metadata"]["name"])
def test_every_service_selects_one_workload_and_its_ports_exist(service: dict[str, Any]) -> None:
    selector = service["spec"]["selector"]
    (pod,) = [
        d["spec"]["template"]
        for d in DOCS
        if d["kind"] in WORKLOADS and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
    ]
    ports = [p for c in pod["spec"]["containers"] for p in c.get("ports", [])]

    for port in service["spec"]["ports"]:
        target = port.get("targetPort", port["port"])
        assert any(target in (p.get("name"), p["containerPort"]) for p in ports), target


def references() -> Iterator[tuple[str, str]]:
    """(kind, name) of every ConfigMap, Secret, claim and service account a manifest refers to."""
    for _, spec in pod_specs():
        if "serviceAccountName" in spec:
            yield "ServiceAccount", spec["serviceAccountName"]
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                yield "ConfigMap", volume["configMap"]["name"]
            if "secret" in volume:
                yield "Secret", volume["secret"]["secretName"]
            if "persistentVolumeClaim" in volume:
                yield "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]
        for container in spec["containers"]:
            for entry in container.get("env", []):
                source = entry.get("valueFrom", {})
                if "secretKeyRef" in source:
                    yield "Secret", source["secretKeyRef"]["name"]
                if "configMapKeyRef" in source:
                    yield "ConfigMap", source["configMapKeyRef"]["name"]
                if entry["name"] == "SAIL_KUBERNETES__WORKER_SERVICE_ACCOUNT_NAME":
                    yield "ServiceAccount", entry["value"]
    for binding in docs("RoleBinding"):
        yield binding["roleRef"]["kind"], binding["roleRef"]["name"]
        for subject in binding["subjects"]:
            yield subject["kind"], subject["name"]


def test_every_reference_is_defined_here_or_created_by_the_user() -> None:
    missing = sorted({(kind, name) for kind, name in references() if name not in named(kind)})

    assert missing == [("Secret", "sharesync-postgres"), ("Secret", "sharesync-profile")]
    assert all(f"`{name}`" in user_provided() for _, name in missing)


@pytest.mark.parametrize("owner,spec", list(pod_specs()), ids=[owner for owner, _ in pod_specs()])
def test_every_mount_names_a_volume_and_every_env_reference_an_earlier_variable(
    owner: str, spec: dict[str, Any]
) -> None:
    statefulset = named("StatefulSet").get(owner, {}).get("spec", {})
    volumes = {v["name"] for v in spec.get("volumes", [])}
    volumes |= {t["metadata"]["name"] for t in statefulset.get("volumeClaimTemplates", [])}

    for container in spec["containers"]:
        assert {m["name"] for m in container.get("volumeMounts", [])} <= volumes
        earlier: set[str] = set()
        for entry in container.get("env", []):
            # Kubernetes expands $(VAR) only from variables defined above it in the same container.
            assert set(re.findall(r"\$\(([A-Z0-9_]+)\)", entry.get("value", ""))) <= earlier, entry["name"]
            earlier.add(entry["name"])


def test_staging_is_one_read_write_many_claim_at_one_path_in_sharesync_the_driver_and_the_workers() -> None:
    code = named("Deployment")["sharesync-code"]["spec"]["template"]["spec"]
    staging = env_of(code["containers"][0])["SHARESYNC_STAGING_DIR"]["value"]
    ((path, claim),) = [(p, c) for p, c in mounts(code, "code-server").items() if staging.startswith(p + "/")]
    driver = named("Deployment")["spark-connect"]["spec"]["template"]["spec"]

    assert mounts(driver, "server")[path] == claim
    assert mounts(worker_template()["spec"], "worker")[path] == claim
    assert "ReadWriteMany" in named("PersistentVolumeClaim")[claim]["spec"]["accessModes"]


def test_sail_runs_in_kubernetes_cluster_mode_and_may_manage_its_worker_pods() -> None:
    driver = named("Deployment")["spark-connect"]["spec"]["template"]["spec"]
    env = env_of(driver["containers"][0])
    (binding,) = [b for b in docs("RoleBinding") if b["subjects"][0]["name"] == driver["serviceAccountName"]]
    rules = named("Role")[binding["roleRef"]["name"]]["rules"]
    worker_account = named("ServiceAccount")[env["SAIL_KUBERNETES__WORKER_SERVICE_ACCOUNT_NAME"]["value"]]

    assert driver["containers"][0]["command"][:3] == ["sail", "spark", "server"]
    assert env["SAIL_MODE"]["value"] == "kubernetes-cluster"
    assert env["SAIL_KUBERNETES__IMAGE"]["value"] == driver["containers"][0]["image"]
    assert env["SAIL_KUBERNETES__DRIVER_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert any("pods" in r["resources"] and {"get", "create", "delete"} <= set(r["verbs"]) for r in rules)
    assert worker_account.get("automountServiceAccountToken") is False


def test_the_example_config_is_valid_and_reaches_the_engine_and_the_profile() -> None:
    config = parse_config(yaml.safe_load(named("ConfigMap")["sharesync-config"]["data"]["sharesync.yaml"]))
    code = named("Deployment")["sharesync-code"]["spec"]["template"]["spec"]
    (secret_mount,) = [
        m["mountPath"]
        for m in code["containers"][0]["volumeMounts"]
        if m["name"] in {v["name"] for v in code["volumes"] if "secret" in v}
    ]
    host, port = (config.spark.remote or "").removeprefix("sc://").split(":")
    engine = named("Service")[host]

    assert int(port) in [p["port"] for p in engine["spec"]["ports"]]
    assert engine["spec"]["selector"]["app.kubernetes.io/component"] == "spark-connect"
    assert config.profile.parent == Path(secret_mount)


def test_postgres_creates_the_same_databases_as_the_compose_deployment() -> None:
    sql = named("ConfigMap")["postgres-initdb"]["data"]["10-sharesync.sql"]

    assert sql == (DEPLOY / "initdb.sql").read_text()


def test_kustomize_gives_sail_workers_the_image_set_once(tmp_path: Path) -> None:
    """Rendered by kubectl's kustomize when installed: an image set in `images:` reaches the driver,
    sharesync and SAIL_KUBERNETES__IMAGE alike."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(MANIFESTS, copy)
    text = (copy / "kustomization.yaml").read_text()
    (copy / "kustomization.yaml").write_text(
        text.replace("newName: sharesync ", "newName: registry.example.com/sharesync ")
    )
    rendered = kustomize(copy)
    if rendered is None:
        pytest.skip("kubectl is not installed")
    driver = next(d for d in rendered if d["kind"] == "Deployment" and d["metadata"]["name"] == "spark-connect")
    server = driver["spec"]["template"]["spec"]["containers"][0]
    images = {
        c["image"]
        for d in rendered
        if d["kind"] in WORKLOADS
        for c in d["spec"]["template"]["spec"]["containers"]
        if not c["image"].startswith("postgres:")
    }

    assert images == {"registry.example.com/sharesync:latest"}
    assert (
        server["image"] == env_of(server)["SAIL_KUBERNETES__IMAGE"]["value"] == "registry.example.com/sharesync:latest"
    )
    assert {(d["kind"], d["metadata"]["name"]) for d in rendered} == {(d["kind"], d["metadata"]["name"]) for d in DOCS}
