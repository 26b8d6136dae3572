"""Kubernetes manifests as tests/deploy reads them: the parts of a pod spec the checks look at, and
``kubectl kustomize`` (built into kubectl, offline) when kubectl is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

# The oldest Kubernetes minor still commonly run; the manifests use nothing newer.
KUBERNETES_VERSION = "1.30"


def load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in container.get("env", [])}


def mounts(spec: dict[str, Any], container: str) -> dict[str, str]:
    """mount path → claim name, for the claims a container of this pod mounts."""
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v
    }
    (found,) = [c for c in spec["containers"] if c["name"] == container]
    return {m["mountPath"]: claims[m["name"]] for m in found["volumeMounts"] if m["name"] in claims}


def kustomize(directory: Path) -> list[dict[str, Any]] | None:
    """``kubectl kustomize DIRECTORY`` parsed, or None without kubectl."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    done = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]
