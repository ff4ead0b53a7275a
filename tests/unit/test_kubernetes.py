"""deploy/kubernetes, checked without a cluster: every overlay renders (`kubectl kustomize`, the Kustomize kubectl
ships), every object validates strictly against the Kubernetes API schema of the version we target
(kubernetes-validate), the KEDA objects against the fields KEDA's ScaledObject CRD defines, and the rendered
objects follow the policy: PodSecurity `restricted`-style settings on every container, resources everywhere, the
MCP server isolated, the Compose file's images, only setting names the code reads, and a ScaledObject that scales
the worker on the round queues the code uses (agent.queue.keys)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]  # ships no type information
import pytest
import yaml
from pydantic import AliasChoices

from agent.queue.keys import RQ_QUEUE_KEYS
from agent.settings import Settings
from tests.support.procs import REPO

KUSTOMIZE = REPO / "deploy" / "kubernetes"
OVERLAYS = ("gpu", "cpu", "keda")
KUBERNETES_VERSION = "1.32.0"  # the oldest minor the docs support; kubernetes-validate ships its schema
WORKLOADS = ("Deployment", "StatefulSet")
# Variables the images read that are not the agent's Settings: the MCP server's and Ollama's own, each named in
# docs/configuration.md (its MCP server and Ollama tables), and the container basics.
MCP_AND_OLLAMA = {
    "MCP_HOST", "MCP_PORT", "MCP_ALLOWED_HOSTS", "MCP_TOKEN_FILE", "MCP_REQUIRE_IDENTITY", "DATA_DIR", "FILES_ROOT",
    "OLLAMA_HOST", "OLLAMA_MODELS", "OLLAMA_KEEP_ALIVE", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL",
    "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_NO_CLOUD", "OLLAMA_NOPRUNE", "HOME", "TZ",
}  # fmt: skip
# What KEDA's ScaledObject CRD (keda.sh/v1alpha1) allows in the fields used here, written from its documented spec;
# `additionalProperties: false` so a misspelt field (minReplicas) fails here, not on the cluster.
SCALED_OBJECT_SPEC = {
    "type": "object",
    "required": ["scaleTargetRef", "triggers"],
    "additionalProperties": False,
    "properties": {
        "scaleTargetRef": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {n: {"type": "string"} for n in ("apiVersion", "kind", "name", "envSourceContainerName")},
        },
        **{n: {"type": "integer", "minimum": 0} for n in ("pollingInterval", "cooldownPeriod", "minReplicaCount",
                                                          "maxReplicaCount", "idleReplicaCount")},
        "advanced": {"type": "object"},
        "fallback": {"type": "object"},
        "triggers": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["type", "metadata"],
                "additionalProperties": False,
                "properties": {
                    "type": {"type": "string"},
                    "name": {"type": "string"},
                    "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                    "authenticationRef": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "kind": {"type": "string"}},
                    },
                },
            },
        },
    },
}  # fmt: skip
TRIGGER_AUTHENTICATION_SPEC = {
    "type": "object",
    "properties": {
        "secretTargetRef": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["parameter", "name", "key"],
                "additionalProperties": False,
                "properties": {n: {"type": "string"} for n in ("parameter", "name", "key")},
            },
        },
    },
}


@cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with its built-in Kustomize) is needed: it renders deploy/kubernetes"
    out = subprocess.run(
        [kubectl, "kustomize", str(KUSTOMIZE / "overlays" / overlay)], capture_output=True, text=True, check=True
    ).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def of_kind(overlay: str, *kinds: str) -> list[dict[str, Any]]:
    return [o for o in rendered(overlay) if o["kind"] in kinds]


def containers(overlay: str) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(workload name, its Pod spec, one container), init containers included."""
    for workload in of_kind(overlay, *WORKLOADS):
        pod = workload["spec"]["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            yield workload["metadata"]["name"], pod, container


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_strictly_against_the_kubernetes_api(overlay: str) -> None:
    core = [o for o in rendered(overlay) if not o["apiVersion"].startswith("keda.sh/")]
    assert {"Deployment", "StatefulSet", "Service", "NetworkPolicy", "PodDisruptionBudget"} <= {o["kind"] for o in core}
    for obj in core:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_keda_objects_validate_against_kedas_fields() -> None:
    (scaled,) = of_kind("keda", "ScaledObject")
    (auth,) = of_kind("keda", "TriggerAuthentication")
    jsonschema.validate(scaled["spec"], SCALED_OBJECT_SPEC)
    jsonschema.validate(auth["spec"], TRIGGER_AUTHENTICATION_SPEC)
    with pytest.raises(jsonschema.ValidationError):  # the schema would catch a misspelt field
        jsonschema.validate({**scaled["spec"], "minReplicas": 1}, SCALED_OBJECT_SPEC)


def test_keda_scales_the_worker_deployment_on_the_round_queues_the_code_uses() -> None:
    (scaled,) = of_kind("keda", "ScaledObject")
    (worker,) = [d for d in of_kind("keda", "Deployment") if d["metadata"]["name"] == "agent-worker"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    assert scaled["metadata"]["namespace"] == worker["metadata"]["namespace"]
    triggers = scaled["spec"]["triggers"]
    assert {t["type"] for t in triggers} == {"redis"}
    assert sorted(t["metadata"]["listName"] for t in triggers) == sorted(RQ_QUEUE_KEYS)
    assert {t["metadata"]["username"] for t in triggers} == {"keda"}  # the read-only user, never api or a worker's
    (auth,) = of_kind("keda", "TriggerAuthentication")
    assert {t["authenticationRef"]["name"] for t in triggers} == {auth["metadata"]["name"]}
    assert auth["spec"]["secretTargetRef"] == [
        {"parameter": "password", "name": "local-agent-redis", "key": "keda.password"}
    ]
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > Settings.model_fields["round_timeout_seconds"].default  # a scale-down lets the round finish


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_runs_restricted_with_requests_and_limits(overlay: str) -> None:
    seen = 0
    for name, pod, container in containers(overlay):
        where = f"{overlay}: {name}/{container['name']}"
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert pod.get("automountServiceAccountToken") is False, where
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False, where
        assert security["readOnlyRootFilesystem"] is True, where
        assert security["capabilities"] == {"drop": ["ALL"]}, where
        assert not security.get("privileged"), where
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]), where
        assert {"cpu", "memory"} <= set(container["resources"]["limits"]), where
        seen += 1
    assert seen >= 6


def test_only_the_gpu_overlays_worker_asks_for_a_gpu_on_gpu_nodes() -> None:
    def worker(overlay: str) -> dict[str, Any]:
        (found,) = [d for d in of_kind(overlay, "Deployment") if d["metadata"]["name"] == "agent-worker"]
        return dict(found["spec"]["template"]["spec"])

    gpu = worker("gpu")
    ollama = next(c for c in gpu["containers"] if c["name"] == "ollama")
    assert ollama["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert gpu["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in gpu["tolerations"])
    cpu = worker("cpu")
    assert not any("nvidia.com/gpu" in c["resources"]["limits"] for c in cpu["containers"])
    assert "nodeSelector" not in cpu


def test_the_mcp_server_takes_ingress_from_agent_api_only_and_has_no_egress() -> None:
    (policy,) = of_kind("gpu", "NetworkPolicy")
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "mcp-server"}
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"] and spec["egress"] == []
    (rule,) = spec["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "agent-api"}}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8001}]


def test_agent_api_has_two_replicas_probes_and_a_disruption_budget() -> None:
    (api,) = [d for d in of_kind("gpu", "Deployment") if d["metadata"]["name"] == "agent-api"]
    assert api["spec"]["replicas"] == 2
    (container,) = api["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    (pdb,) = of_kind("gpu", "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == api["spec"]["selector"]["matchLabels"]


def compose_images() -> set[str]:
    out = subprocess.run(
        ["docker", "compose", "config", "--images"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if out.returncode == 0:
        return set(out.stdout.split())
    # No compose plugin here: the defaults written in the file are what `config` would resolve.
    text = (REPO / "docker-compose.yml").read_text()
    return set(re.findall(r"\$\{[A-Z_]+_IMAGE:-([^}]+)\}", text))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_the_compose_files_pinned_ones(overlay: str) -> None:
    images = {c["image"] for _, _, c in containers(overlay)}
    assert not any(i.endswith(":latest") or ":" not in i for i in images), images
    assert images <= compose_images() | {"redis:7.4.2-bookworm"}, images - compose_images()


def env_name(field: str, alias: object) -> str:
    """The variable a Settings field is read from: its first alias (MODEL_NAME), else its own name."""
    return (alias.choices[0] if isinstance(alias, AliasChoices) else field).__str__().upper()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_setting_is_one_the_code_reads(overlay: str) -> None:
    settings = {env_name(name, field.validation_alias) for name, field in Settings.model_fields.items()}
    names = set(MCP_AND_OLLAMA)
    for config in of_kind(overlay, "ConfigMap"):
        if config["metadata"]["name"] == "local-agent-settings":
            names_in = set(config["data"])
            assert names_in <= settings | {"TZ"}, names_in - settings
    for _, _, container in containers(overlay):
        for env in container.get("env", []):
            assert env["name"] in settings | names, f"{container['name']}: {env['name']} is read by nothing"


def test_nothing_secret_is_in_a_config_map_or_in_the_repository() -> None:
    for config in of_kind("keda", "ConfigMap"):
        for key in config["data"]:
            secretish = any(word in key.upper() for word in ("PASSWORD", "TOKEN", "SECRET", "KEY"))
            assert not secretish or key.endswith("_FILE"), key  # a file's path, never the secret
    assert not of_kind("keda", "Secret")  # generated by scripts/k8s-secrets into the cluster, never committed
    for workload in of_kind("keda", *WORKLOADS):
        for volume in workload["spec"]["template"]["spec"].get("volumes", []):
            if "secret" in volume:
                assert volume["secret"]["secretName"].startswith("local-agent-"), volume


def test_the_docs_name_every_overlay() -> None:
    docs = (REPO / "docs" / "kubernetes.md").read_text()
    assert all(f"overlays/{overlay}" in docs for overlay in OVERLAYS)


def test_every_secret_the_manifests_mount_is_one_k8s_secrets_writes(tmp_path: Path) -> None:
    out = tmp_path / "secrets.yaml"
    done = subprocess.run([str(REPO / "scripts/k8s-secrets"), str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (out.stat().st_mode & 0o077) == 0  # the operator's copy: readable by them alone
    written = {s["metadata"]["name"]: s for s in yaml.safe_load_all(out.read_text())}
    for secret in written.values():
        kubernetes_validate.validate(secret, KUBERNETES_VERSION, strict=True)
        assert all(value.strip() for value in secret["stringData"].values()), secret["metadata"]["name"]
    wanted: dict[str, set[str]] = {}
    for workload in of_kind("keda", *WORKLOADS):
        for volume in workload["spec"]["template"]["spec"].get("volumes", []):
            if "secret" in volume:
                keys = {item["key"] for item in volume["secret"].get("items", [])}
                wanted.setdefault(volume["secret"]["secretName"], set()).update(keys)
    (auth,) = of_kind("keda", "TriggerAuthentication")
    for ref in auth["spec"]["secretTargetRef"]:
        wanted.setdefault(ref["name"], set()).add(ref["key"])
    for name, keys in wanted.items():
        assert name in written, f"{name} is mounted but scripts/k8s-secrets does not write it"
        assert keys <= set(written[name]["stringData"]), (name, keys)
    assert "admin" in written["local-agent-keys"]["stringData"]["keys.yaml"]
    assert "API key" in done.stderr  # shown once, on the terminal: not in the file beside the hashes
