"""Deployment files, checked offline: every YAML parses, the Kubernetes manifests match the API schemas
(kubernetes_validate, strict), and the conventions of STYLE.md point 15 hold for every service."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from croupier_cli.deployment import DEPENDENCIES, PUBLIC_SERVICE_HOSTS
from croupier_platform.grpc_server import DEAD_LETTERS_HEALTH, DEPENDENCIES_HEALTH, LIVENESS_HEALTH

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "infra" / "k8s"
BASE = K8S / "base"
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "infra" / "docker" / "Dockerfile"

SERVICES = ("shuffler", "dealer", "game", "wallet", "commission")
# The browser gateway (`croupier serve gateway`): HTTP in, gRPC out to the public services' hosts.
GATEWAY = "gateway"
HTTP_PORT = 8080
AUTOSCALED = ("game", "wallet")
TOPICS = ("croupier.round-events", "croupier.ledger-events", "croupier.shoe-reveals", "croupier.seat-events")
GRPC_PORT = 50051
INTERNAL_PORT = 50052  # the services call each other here, over mTLS
HEALTH_PORT = 50053  # plaintext grpc.health.v1 for the kubelet's probes
TLS_DIR = "/etc/croupier/tls"
JWKS_DIR = "/etc/croupier/jwks"
UID = 10001
# The oldest Kubernetes minor these manifests promise to work on (gRPC probes are GA since 1.27).
KUBERNETES_VERSION = "1.30"
SECRET_NAMES = ("DATABASE_URL",)
# The dev secret and dev mode never reach a cluster: the operator's JWKS and mTLS do.
DEV_ONLY = ("CROUPIER_TOKEN_SECRET", "CROUPIER_DEV_MODE")
SHARED_SETTINGS = (
    "PORT",
    "KAFKA_BOOTSTRAP_SERVERS",
    "SHUFFLER_SERVICE_ADDR",
    "DEALER_SERVICE_ADDR",
    "GAME_SERVICE_ADDR",
    "WALLET_SERVICE_ADDR",
    "COMMISSION_SERVICE_ADDR",
)
CUSTOM_RESOURCES = {"kafka.strimzi.io/v1beta2": {"KafkaTopic"}, "monitoring.coreos.com/v1": {"PrometheusRule"}}


def load_all(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def k8s_files() -> list[Path]:
    return sorted(K8S.rglob("*.yaml")) + sorted(K8S.rglob("*.yml"))


def manifests() -> list[tuple[Path, dict[str, Any]]]:
    """The base's objects (infra/k8s/components/ hold kustomize Components: patches, checked rendered)."""
    return [(path, doc) for path in sorted(BASE.glob("*.yaml")) if path.name != "kustomization.yaml" for doc in load_all(path)]


def objects(kind: str) -> dict[str, dict[str, Any]]:
    found = {doc["metadata"]["name"]: doc for _, doc in manifests() if doc["kind"] == kind}
    assert found, f"no {kind} in infra/k8s"
    return found


def pod_specs() -> dict[str, dict[str, Any]]:
    """Every pod template: Deployments by name, the migration Job as job/<name>."""
    specs = {name: d["spec"]["template"]["spec"] for name, d in objects("Deployment").items()}
    specs.update({f"job/{name}": j["spec"]["template"]["spec"] for name, j in objects("Job").items()})
    return specs


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec["containers"] + spec.get("initContainers", [])


def grpc_port(container: dict[str, Any], name: str = "grpc") -> int:
    (port,) = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == name]
    return port


# ---------------------------------------------------------------------------------------------
# Kubernetes: parse and validate
# ---------------------------------------------------------------------------------------------


def test_every_yaml_file_parses() -> None:
    paths = [*k8s_files(), COMPOSE]
    assert len(paths) > 3
    for path in paths:
        assert load_all(path), f"{path} is empty"


@pytest.mark.parametrize(
    ("path", "doc"),
    [pytest.param(p, d, id=f"{p.relative_to(K8S)}:{d.get('kind')}/{d.get('metadata', {}).get('name')}") for p, d in manifests()],
)
def test_manifest_matches_the_kubernetes_schema(path: Path, doc: dict[str, Any]) -> None:
    if doc.get("kind") in CUSTOM_RESOURCES.get(doc.get("apiVersion", ""), ()):
        pytest.skip("a custom resource: checked by hand below")
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_an_unknown_field_fails_validation() -> None:
    """The guard on the test above: strict validation rejects a typo rather than ignoring it."""
    deployment = yaml.safe_load((BASE / "game.yaml").read_text().split("---")[-1])
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest_in_base() -> None:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    on_disk = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == on_disk


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_the_kustomization_renders() -> None:
    rendered = subprocess.run(["kubectl", "kustomize", str(BASE)], capture_output=True, text=True, timeout=60, check=True)
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    assert len(docs) == len(manifests())
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "croupier"
        if doc["kind"] not in CUSTOM_RESOURCES.get(doc["apiVersion"], ()):
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


# ---------------------------------------------------------------------------------------------
# Kubernetes: the conventions
# ---------------------------------------------------------------------------------------------


def test_each_service_file_holds_one_deployment_service_and_serviceaccount() -> None:
    for svc in SERVICES:
        docs = load_all(BASE / f"{svc}.yaml")
        assert sorted(d["kind"] for d in docs) == ["Deployment", "Service", "ServiceAccount"], svc
        assert {d["metadata"]["name"] for d in docs} == {svc}


def service_deployments() -> dict[str, dict[str, Any]]:
    """The five services' Deployments (the gateway's is checked on its own)."""
    return {name: d for name, d in objects("Deployment").items() if name != GATEWAY}


def test_every_deployment_has_a_grpc_service_selecting_it() -> None:
    services = objects("Service")
    deployments = service_deployments()
    assert set(objects("Deployment")) == {*SERVICES, GATEWAY}
    for name, deployment in deployments.items():
        service = services[name]
        selector = service["spec"]["selector"]
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= pod_labels.items(), name
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items(), name
        ports = {port["name"]: port for port in service["spec"]["ports"]}
        assert set(ports) == {"grpc", "grpc-internal"}, name
        for port_name, number in (("grpc", GRPC_PORT), ("grpc-internal", INTERNAL_PORT)):
            assert ports[port_name]["port"] == number and ports[port_name]["targetPort"] == port_name, name


def test_every_deployment_runs_its_service_from_the_one_image() -> None:
    for name, deployment in service_deployments().items():
        spec = deployment["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        assert container["image"] == "croupier", name
        assert container["args"] == [name]
        assert "command" not in container, "the image's ENTRYPOINT is `croupier serve`"
        assert spec["serviceAccountName"] == name
        assert spec["automountServiceAccountToken"] is False
        assert grpc_port(container) == GRPC_PORT
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        assert env["OTEL_SERVICE_NAME"] == f"croupier-{name}"


@pytest.mark.parametrize("probe", ["livenessProbe", "readinessProbe", "startupProbe"])
def test_every_deployment_probes_grpc_health_on_the_plaintext_health_port(probe: str) -> None:
    """The kubelet's gRPC probes speak no TLS: they ask HEALTH_PORT, which serves health only."""
    (configmap,) = objects("ConfigMap").values()
    assert configmap["data"]["HEALTH_PORT"] == str(HEALTH_PORT)
    for name, deployment in service_deployments().items():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            assert container[probe]["grpc"]["port"] == grpc_port(container, "grpc-health") == HEALTH_PORT, f"{name} {probe}"
            assert set(container[probe]) - {"grpc"} <= {
                "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold", "successThreshold",
            }


def test_readiness_asks_the_overall_health_and_liveness_only_whether_the_process_answers() -> None:
    """Readiness is "can serve players now" (docs/operations.md): "" turns NOT_SERVING while the store is
    unreachable, so the pod becomes unready, never restarted (liveness and startup ask LIVENESS_HEALTH, which
    no dependency turns NOT_SERVING). No probe asks the degraded entries (a broker outage, dead letters): the
    services serve through those, and a probe on them would take every pod out of service."""
    for name, deployment in service_deployments().items():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            assert container["readinessProbe"]["grpc"].get("service", "") == "", f"{name} readiness"
            for probe in ("livenessProbe", "startupProbe"):
                assert container[probe]["grpc"]["service"] == LIVENESS_HEALTH, f"{name} {probe}"
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                assert container[probe]["grpc"].get("service", "") not in (DEPENDENCIES_HEALTH, DEAD_LETTERS_HEALTH), f"{name} {probe}"


def test_every_container_has_requests_and_limits() -> None:
    for name, spec in pod_specs().items():
        for container in containers(spec):
            resources = container["resources"]
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources[bound]), f"{name}: {bound}"


def test_every_pod_runs_locked_down() -> None:
    for name, spec in pod_specs().items():
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == UID, name
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", name
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"), name
        for container in containers(spec):
            ctx = container["securityContext"]
            assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] == UID, name
            assert ctx["readOnlyRootFilesystem"] is True, name
            assert ctx["allowPrivilegeEscalation"] is False, name
            assert ctx.get("privileged", False) is False, name
            assert ctx["capabilities"]["drop"] == ["ALL"] and not ctx["capabilities"].get("add"), name
            assert ctx["seccompProfile"]["type"] == "RuntimeDefault", name
            # A read-only root needs a writable /tmp: an emptyDir.
            (tmp,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
            (volume,) = [v for v in spec["volumes"] if v["name"] == tmp["name"]]
            assert "emptyDir" in volume, name


def test_settings_come_from_the_configmap_and_secrets_from_the_secret() -> None:
    (configmap,) = objects("ConfigMap").values()
    assert configmap["metadata"]["name"] == "croupier-config"
    assert set(SHARED_SETTINGS) <= set(configmap["data"])
    assert not set(SECRET_NAMES) & set(configmap["data"]), "secrets never go in the ConfigMap"
    assert configmap["data"]["PORT"] == str(GRPC_PORT)
    for svc in SERVICES:
        assert configmap["data"][f"{svc.upper()}_SERVICE_ADDR"] == f"{svc}:{INTERNAL_PORT}", "the callee's mTLS port"
    for name, deployment in service_deployments().items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        sources = container["envFrom"]
        assert {"configMapRef": {"name": "croupier-config"}} in sources, name
        assert {"secretRef": {"name": "croupier-secrets"}} in sources, name
    assert not [d for _, d in manifests() if d["kind"] == "Secret"], "no Secret is committed; overlays provide it"


def test_autoscalers_for_game_and_wallet() -> None:
    hpas = objects("HorizontalPodAutoscaler")
    assert set(hpas) == set(AUTOSCALED)
    deployments = objects("Deployment")
    for name, hpa in hpas.items():
        assert hpa["apiVersion"] == "autoscaling/v2"
        spec = hpa["spec"]
        assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 10)
        (metric,) = spec["metrics"]
        assert metric["type"] == "Resource" and metric["resource"]["name"] == "cpu"
        assert metric["resource"]["target"] == {"type": "Utilization", "averageUtilization": 70}
        assert "replicas" not in deployments[name]["spec"], f"{name}: the HPA owns the replica count"


def test_the_migration_job_runs_croupier_migrate() -> None:
    (job,) = objects("Job").values()
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"
    (container,) = spec["containers"]
    assert container["image"] == "croupier"
    assert container["command"] == ["croupier", "migrate"]
    (database_url,) = [e for e in container["env"] if e["name"] == "DATABASE_URL"]
    assert database_url["valueFrom"]["secretKeyRef"]["name"] == "croupier-secrets"


def test_the_declared_topics_are_the_ones_the_code_uses() -> None:
    from croupier_platform.bus import TOPIC_BY_STREAM_TYPE, dead_letter_topic

    assert set(TOPIC_BY_STREAM_TYPE.values()) == set(TOPICS)
    assert all(dead_letter_topic(topic) == f"{topic}.dlq" for topic in TOPICS)


def test_kafka_topics_are_strimzi_resources_for_every_topic_and_its_dlq() -> None:
    docs = load_all(BASE / "topics.yaml")
    wanted = {name for topic in TOPICS for name in (topic, f"{topic}.dlq")}
    assert {d["spec"]["topicName"] for d in docs} == wanted
    names = [d["metadata"]["name"] for d in docs]
    assert len(names) == len(set(names))
    for doc in docs:
        assert doc["apiVersion"] == "kafka.strimzi.io/v1beta2"
        assert doc["kind"] == "KafkaTopic"
        assert set(doc) <= {"apiVersion", "kind", "metadata", "spec"}
        name = doc["metadata"]["name"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63, name
        assert doc["metadata"]["labels"]["strimzi.io/cluster"] == "croupier"
        spec = doc["spec"]
        assert set(spec) <= {"topicName", "partitions", "replicas", "config"}
        assert isinstance(spec["partitions"], int) and spec["partitions"] >= 1
        assert isinstance(spec["replicas"], int) and spec["replicas"] >= 3
        assert spec["config"]["min.insync.replicas"] < spec["replicas"]
    # Strimzi's bootstrap Service is <cluster>-kafka-bootstrap: the ConfigMap must point at this cluster.
    (configmap,) = objects("ConfigMap").values()
    assert configmap["data"]["KAFKA_BOOTSTRAP_SERVERS"].startswith("croupier-kafka-bootstrap:")


# ---------------------------------------------------------------------------------------------
# Kubernetes: disruption budgets, network policies, headless Services (issue 14, item 9)
# ---------------------------------------------------------------------------------------------

PUBLIC = ("game", "wallet")
MIGRATE = "croupier-migrate"
METRICS_PORT = 9464
POSTGRESQL_PORT = 5432
KAFKA_PORT = 9092
INGRESS_NAMESPACE_LABEL = {"croupier.dev/ingress": "true"}
# Every distributed process talks to Kafka: shuffler, wallet, game relay an outbox; shuffler, wallet,
# commission consume; the dealer does neither, but its readiness probes the broker and it reads the
# dead-letter topics (cli/src/croupier_cli/hosting.py), so without Kafka it is never ready.
KAFKA_CLIENTS = frozenset(SERVICES)


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) applied to a pod's labels."""
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return True  # {} selects every pod
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def pod_labels() -> dict[str, dict[str, str]]:
    """Every pod template's labels, by app.kubernetes.io/name (the Deployments' and the Job's)."""
    templates = [d["spec"]["template"] for kind in ("Deployment", "Job") for d in objects(kind).values()]
    labels = {t["metadata"]["labels"]["app.kubernetes.io/name"]: t["metadata"]["labels"] for t in templates}
    assert set(labels) == {*SERVICES, GATEWAY, MIGRATE}
    return labels


def policies_for(pod: str, direction: str) -> list[dict[str, Any]]:
    """The NetworkPolicies that select `pod` and restrict `direction` ("Ingress" or "Egress")."""
    labels = pod_labels()[pod]
    return [
        p for p in objects("NetworkPolicy").values()
        if direction in p["spec"]["policyTypes"] and selects(p["spec"]["podSelector"], labels)
    ]


def allowed(pod: str, direction: str) -> list[tuple[dict[str, Any], set[Any]]]:
    """(peer, ports) for every peer a policy lets `pod` talk to in `direction`; ports by number or name."""
    key, peers = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    found = []
    for policy in policies_for(pod, direction):
        for rule in policy["spec"].get(key, []):
            assert rule.get(peers), f"{policy['metadata']['name']}: a rule without peers allows every peer"
            assert rule.get("ports"), f"{policy['metadata']['name']}: a rule without ports allows every port"
            ports = {p["port"] for p in rule["ports"]}
            found += [(peer, ports) for peer in rule[peers]]
    return found


def croupier_pods(peer: dict[str, Any]) -> set[str]:
    """The Croupier pods (of this namespace) a peer stands for; none for a namespace or ipBlock peer."""
    if "podSelector" not in peer or "namespaceSelector" in peer or "ipBlock" in peer:
        return set()
    return {name for name, labels in pod_labels().items() if selects(peer["podSelector"], labels)}


def grpc_peers(pod: str, direction: str) -> set[str]:
    """The Croupier pods `pod` exchanges gRPC with; between services only on the internal (mTLS) port
    (the browser gateway is no service: a client of the public port, like any other)."""
    peers = set()
    for peer, ports in allowed(pod, direction):
        services = croupier_pods(peer) & set(SERVICES)
        assert not (pod in SERVICES and services and ports & {"grpc", GRPC_PORT}), f"{pod}: services call each other on the internal port"
        if ports & {"grpc-internal", INTERNAL_PORT}:
            peers |= croupier_pods(peer)
    return peers


def callers_of(service: str) -> set[str]:
    """The services that call `service` over gRPC (DEPENDENCIES), on its internal port."""
    return {caller for caller, callees in DEPENDENCIES.items() if service in callees}


def public_peers(pod: str, direction: str) -> set[str]:
    """The Croupier pods `pod` exchanges gRPC with on the public (TLS) port: the gateway and its hosts."""
    return {name for peer, ports in allowed(pod, direction) if ports & {"grpc", GRPC_PORT} for name in croupier_pods(peer)}


def test_the_call_graph_is_the_one_the_services_use() -> None:
    """DEPENDENCIES (which addresses `croupier serve SERVICE` opens channels to) is what the code reads."""
    for svc in SERVICES:
        source = " ".join(p.read_text() for p in (ROOT / "services" / svc / "src").rglob("*.py"))
        used = set(re.findall(r"(?:channels(?:\[|\.get\()|channel_to\(\s*[\w.]*channels,)\s*[\"'](\w+)[\"']", source))
        assert used == set(DEPENDENCIES[svc]), svc


def test_every_deployment_has_a_disruption_budget_selecting_its_pods() -> None:
    pdbs = objects("PodDisruptionBudget")
    labels = pod_labels()
    for name, deployment in objects("Deployment").items():
        (pdb,) = [p for p in pdbs.values() if selects(p["spec"]["selector"], labels[name])]
        assert {n for n, lab in labels.items() if selects(pdb["spec"]["selector"], lab)} == {name}, "its pods only"
        spec = pdb["spec"]
        replicas = deployment["spec"].get("replicas") or objects("HorizontalPodAutoscaler")[name]["spec"]["minReplicas"]
        assert replicas >= 2, name
        # One pod at a time, whatever the HPA scaled to (see pdb.yaml for why not minAvailable: 1).
        assert spec == {**spec, "maxUnavailable": 1} and "minAvailable" not in spec, name
        assert spec["unhealthyPodEvictionPolicy"] == "AlwaysAllow", name


def test_every_pod_is_selected_by_a_default_deny_policy() -> None:
    deny_all = [
        p for p in objects("NetworkPolicy").values()
        if set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"} and not p["spec"].get("ingress") and not p["spec"].get("egress")
    ]
    assert deny_all
    for name, labels in pod_labels().items():
        assert any(selects(p["spec"]["podSelector"], labels) for p in deny_all), name


def test_every_policy_selects_some_pod_and_names_both_directions_it_restricts() -> None:
    labels = pod_labels()
    for name, policy in objects("NetworkPolicy").items():
        spec = policy["spec"]
        assert any(selects(spec["podSelector"], lab) for lab in labels.values()), name
        assert spec["podSelector"], f"{name}: the whole namespace holds Strimzi's pods too; select Croupier's"
        assert set(spec["policyTypes"]) >= {t for t, k in (("Ingress", "ingress"), ("Egress", "egress")) if k in spec}, name


@pytest.mark.parametrize("service", [s for s in SERVICES if s not in PUBLIC])
def test_an_internal_service_takes_grpc_only_from_its_callers(service: str) -> None:
    assert callers_of(service), f"{service}: nobody calls it"
    assert grpc_peers(service, "Ingress") == callers_of(service)
    for peer, ports in allowed(service, "Ingress"):
        assert croupier_pods(peer) or ports == {"metrics"}, f"{service}: only Prometheus from outside, on metrics"


@pytest.mark.parametrize("service", PUBLIC)
def test_a_public_service_takes_grpc_from_its_callers_and_the_ingress_namespace(service: str) -> None:
    assert grpc_peers(service, "Ingress") == callers_of(service)
    outside = [peer for peer, ports in allowed(service, "Ingress") if ports & {"grpc", GRPC_PORT} and not croupier_pods(peer)]
    assert outside == [{"namespaceSelector": {"matchLabels": INGRESS_NAMESPACE_LABEL}}], service


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_reaches_over_grpc_exactly_the_services_it_calls(service: str) -> None:
    assert grpc_peers(service, "Egress") == set(DEPENDENCIES[service])


def test_only_prometheus_reaches_the_metrics_port_of_every_service() -> None:
    for name, deployment in service_deployments().items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        (metrics,) = [p for p in container["ports"] if p["name"] == "metrics"]
        assert metrics["containerPort"] == METRICS_PORT, name
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["METRICS_PORT"] == str(METRICS_PORT), name
        scrapers = [peer for peer, ports in allowed(name, "Ingress") if ports & {"metrics", METRICS_PORT}]
        assert scrapers == [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            }
        ], name


def _reach(port: int) -> set[str]:
    return {pod for pod in pod_labels() if any(port in ports for _, ports in allowed(pod, "Egress"))}


def test_postgresql_egress_only_for_the_services_with_a_schema_and_the_migration() -> None:
    with_schema = {p.name for p in (ROOT / "migrations").iterdir() if (p / "versions").is_dir()}
    assert with_schema == set(SERVICES), "every service has a schema: all five need the store"
    assert _reach(POSTGRESQL_PORT) == {*with_schema, MIGRATE}


def test_kafka_egress_only_for_the_services_and_to_the_strimzi_cluster_of_the_topics() -> None:
    assert _reach(KAFKA_PORT) == KAFKA_CLIENTS, "not the migration Job"
    (cluster,) = {d["metadata"]["labels"]["strimzi.io/cluster"] for d in load_all(BASE / "topics.yaml")}
    for pod in KAFKA_CLIENTS:
        peers = [peer for peer, ports in allowed(pod, "Egress") if KAFKA_PORT in ports]
        assert peers == [{"podSelector": {"matchLabels": {"strimzi.io/cluster": cluster, "strimzi.io/kind": "Kafka"}}}]


def test_every_pod_resolves_names_through_kube_dns_and_nothing_else_leaves() -> None:
    dns = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    for pod in pod_labels():
        egress = allowed(pod, "Egress")
        assert (dns, {53}) in egress, pod
        policy_ports = [
            p for policy in policies_for(pod, "Egress") for rule in policy["spec"].get("egress", []) for p in rule["ports"]
            if p["port"] == 53
        ]
        assert {p["protocol"] for p in policy_ports} == {"UDP", "TCP"}, pod
        # DNS, PostgreSQL, Kafka and the gRPC callees (the gateway: the public port): nothing else.
        callees = {GRPC_PORT} if pod == GATEWAY else {INTERNAL_PORT}
        assert {port for _, ports in egress for port in ports} <= {53, POSTGRESQL_PORT, KAFKA_PORT, *callees}, pod


def test_the_settings_are_production_ones_that_a_service_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the ConfigMap (and the Secret's DATABASE_URL) give a service passes the check that
    refuses a half-secured one: the operator's JWKS, TLS and mTLS, no dev secret."""
    from croupier_platform.settings import ServiceSettings

    (configmap,) = objects("ConfigMap").values()
    for name in (*DEV_ONLY, "JWKS_URL", "JWT_ISSUER", "JWT_AUDIENCE", "TLS_CERT_FILE", "TLS_KEY_FILE", "TLS_CA_FILE"):
        monkeypatch.delenv(name, raising=False)
    settings = ServiceSettings(**configmap["data"], database_url="postgresql+psycopg://croupier@postgres/croupier")
    assert settings.mutual_tls and not settings.croupier_dev_mode and settings.token_secret is None
    assert settings.internal_port == INTERNAL_PORT and settings.health_port == HEALTH_PORT
    for _, doc in manifests():
        assert not set(DEV_ONLY) & set(yaml.safe_dump(doc).split()), "no dev secret in a cluster"
        for container in (containers(doc["spec"]["template"]["spec"]) if doc["kind"] in ("Deployment", "Job") else ()):
            assert not {e["name"] for e in container.get("env", [])} & set(DEV_ONLY)


def test_every_service_mounts_its_own_certificate_and_the_operators_jwks_read_only() -> None:
    (configmap,) = objects("ConfigMap").values()
    data = configmap["data"]
    assert {data["TLS_CERT_FILE"], data["TLS_KEY_FILE"], data["TLS_CA_FILE"]} == {f"{TLS_DIR}/{f}" for f in ("tls.crt", "tls.key", "ca.crt")}
    assert data["JWKS_URL"].startswith(JWKS_DIR + "/")
    for name, deployment in service_deployments().items():
        spec = deployment["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        tls, jwks = mounts[TLS_DIR], mounts[JWKS_DIR]
        assert tls["readOnly"] is True and jwks["readOnly"] is True, name
        assert volumes[tls["name"]]["secret"]["secretName"] == f"croupier-tls-{name}", f"{name}: its own certificate, no other's"
        assert volumes[jwks["name"]]["configMap"]["name"] == "croupier-jwks", name


def test_every_service_exposes_its_internal_port_on_its_headless_service() -> None:
    for name, service in objects("Service").items():
        if name == GATEWAY:
            continue
        ports = {p["name"]: p for p in service["spec"]["ports"]}
        assert ports["grpc"]["port"] == GRPC_PORT and ports["grpc-internal"]["port"] == INTERNAL_PORT, name
        (container,) = objects("Deployment")[name]["spec"]["template"]["spec"]["containers"]
        assert grpc_port(container, "grpc-internal") == INTERNAL_PORT, name


def test_services_are_headless_for_client_side_round_robin() -> None:
    from croupier_cli.hosting import CLIENT_CHANNEL_OPTIONS

    assert ("grpc.lb_policy_name", "round_robin") in CLIENT_CHANNEL_OPTIONS
    for name, service in objects("Service").items():
        assert service["spec"]["type"] == "ClusterIP" and service["spec"]["clusterIP"] == "None", name
        assert not service["spec"].get("publishNotReadyAddresses"), f"{name}: DNS must list ready pods only"


# ---------------------------------------------------------------------------------------------
# docker-compose.yml
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_has_the_services_infrastructure_and_migrations(compose: dict[str, Any]) -> None:
    assert {*SERVICES, "kafka", "postgres", "migrate"} <= set(compose["services"])


def test_compose_long_running_services_have_healthchecks(compose: dict[str, Any]) -> None:
    for name in (*SERVICES, "kafka", "postgres"):
        check = compose["services"][name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert {"interval", "timeout", "retries"} <= set(check), name
    assert compose["services"]["postgres"]["image"].startswith("postgres:15")
    assert compose["services"]["kafka"]["image"].startswith("apache/kafka:")


def test_compose_runs_each_service_from_the_one_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    image = services["migrate"]["image"]
    assert services["migrate"]["entrypoint"] == ["croupier", "migrate"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in SERVICES:
        svc = services[name]
        assert svc["image"] == image
        assert svc["build"]["dockerfile"] == "infra/docker/Dockerfile"
        assert svc["command"] == [name]
        assert "entrypoint" not in svc
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert svc["depends_on"]["kafka-topics"]["condition"] == "service_completed_successfully"
        for callee in DEPENDENCIES[name]:
            assert svc["depends_on"][callee]["condition"] == "service_healthy", f"{name} calls {callee}"
        env = svc["environment"]
        assert {*SHARED_SETTINGS, *SECRET_NAMES} <= set(env), name
        assert env["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
        assert env["DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["OTEL_SERVICE_NAME"] == f"croupier-{name}"
        for other in SERVICES:
            assert env[f"{other.upper()}_SERVICE_ADDR"] == f"{other}:{GRPC_PORT}"
        assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"]
    assert services["game"]["ports"] == [f"127.0.0.1:{GRPC_PORT}:{GRPC_PORT}"]
    assert services["wallet"]["ports"] == [f"127.0.0.1:50052:{GRPC_PORT}"]
    assert not [n for n in SERVICES if n not in ("game", "wallet") and services[n].get("ports")], "internal services stay internal"


def test_compose_defaults_only_clearly_named_development_secrets(compose: dict[str, Any]) -> None:
    text = COMPOSE.read_text()
    for name in ("CROUPIER_TOKEN_SECRET", "POSTGRES_PASSWORD"):
        defaults = re.findall(r"\$\{" + name + r":-([^}]*)\}", text)
        assert defaults, f"{name} is read from the environment / .env"
        for default in defaults:
            decoded = bytes.fromhex(default).decode() if name == "CROUPIER_TOKEN_SECRET" else default
            assert "DEVELOPMENT-ONLY" in decoded, (name, default)
            if name == "CROUPIER_TOKEN_SECRET":
                assert len(bytes.fromhex(default)) >= 32
    for name in SERVICES:
        assert {"path": ".env", "required": False} in compose["services"][name]["env_file"]


COMPOSE_MTLS = ROOT / "infra" / "compose" / "mtls.yml"


def test_compose_runs_in_dev_mode_and_its_mtls_override_in_production_mode(compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The base stack says it uses the dev secret; with infra/compose/mtls.yml each service gets
    settings that ServiceSettings accepts as production ones, and its own certificate."""
    from croupier_platform.settings import ServiceSettings

    override = yaml.safe_load(COMPOSE_MTLS.read_text())
    for name in (*DEV_ONLY, "JWKS_URL", "JWT_ISSUER", "JWT_AUDIENCE", "TLS_CERT_FILE", "TLS_KEY_FILE", "TLS_CA_FILE",
                 "INTERNAL_PORT", "HEALTH_PORT"):
        monkeypatch.delenv(name, raising=False)
    interpolate = lambda value: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value))  # noqa: E731 - compose's ${VAR:-default}
    for name in SERVICES:
        base = compose["services"][name]["environment"]
        assert base["CROUPIER_DEV_MODE"] == "true", name
        assert ServiceSettings(**{k.lower(): interpolate(v) for k, v in base.items()}).croupier_dev_mode, name
        merged = {**base, **override["services"][name]["environment"]}
        settings = ServiceSettings(**{k.lower(): interpolate(v) for k, v in merged.items()})
        assert settings.mutual_tls and not settings.croupier_dev_mode and settings.token_secret is None, name
        for other in SERVICES:
            assert merged[f"{other.upper()}_SERVICE_ADDR"] == f"{other}:{INTERNAL_PORT}", name
        volumes = override["services"][name]["volumes"]
        assert f"./certs/{name}:{TLS_DIR}:ro" in volumes, f"{name}: its own certificate"
        assert all(volume.endswith(":ro") for volume in volumes), name


def test_compose_creates_every_topic_and_its_dlq(compose: dict[str, Any]) -> None:
    script = compose["services"]["kafka-topics"]["command"][0]
    for topic in TOPICS:
        assert topic in script
    assert '"$$topic.dlq"' in script
    kafka_env = compose["services"]["kafka"]["environment"]
    assert kafka_env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    for setting in ("OFFSETS_TOPIC_REPLICATION_FACTOR", "TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "TRANSACTION_STATE_LOG_MIN_ISR"):
        assert kafka_env[f"KAFKA_{setting}"] == 1


class _Health:
    """A real grpc.health.v1 server on a loopback port, for the compose healthcheck to probe."""

    def __init__(self) -> None:
        self.servicer = health.HealthServicer()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()


@pytest.fixture
def health_server() -> Any:
    server = _Health()
    yield server
    server.server.stop(None)


def run_compose_healthcheck(compose: dict[str, Any], port: int) -> int:
    test = compose["services"]["game"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    env = {**os.environ, "PORT": str(port)}
    return subprocess.run([sys.executable, "-c", test[3]], env=env, capture_output=True, timeout=30).returncode


def test_the_compose_healthcheck_passes_when_serving(compose: dict[str, Any], health_server: _Health) -> None:
    health_server.servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert run_compose_healthcheck(compose, health_server.port) == 0


def test_the_compose_healthcheck_fails_when_not_serving(compose: dict[str, Any], health_server: _Health) -> None:
    health_server.servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert run_compose_healthcheck(compose, health_server.port) != 0


def test_the_compose_healthcheck_fails_when_nothing_listens(compose: dict[str, Any], health_server: _Health) -> None:
    port = health_server.port
    health_server.server.stop(None).wait()
    assert run_compose_healthcheck(compose, port) != 0


# ---------------------------------------------------------------------------------------------
# infra/docker/Dockerfile (no engine here: its shape only)
# ---------------------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines if line and not line.startswith("#")]


def test_the_image_is_multi_stage_pinned_and_non_root() -> None:
    instructions = dockerfile_instructions()
    args = {value.split("=", 1)[0]: value.split("=", 1)[1] for kind, value in instructions if kind == "ARG" and "=" in value}
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", args["PYTHON_IMAGE"])
    stages = [value for kind, value in instructions if kind == "FROM"]
    assert stages == ["${PYTHON_IMAGE} AS builder", "${PYTHON_IMAGE} AS runtime"]
    runtime = instructions[[i for i, (k, v) in enumerate(instructions) if k == "FROM"][-1]:]
    runtime_runs = " ".join(v for k, v in runtime if k == "RUN")
    assert "gcc" not in runtime_runs, "no compiler in the runtime image"
    assert ("USER", f"{UID}:{UID}") in runtime
    assert ("ENTRYPOINT", '["croupier", "serve"]') in runtime
    assert ("COPY", "--from=builder /opt/venv /opt/venv") in runtime
    # `croupier migrate` finds the Alembic scripts outside the source tree through CROUPIER_MIGRATIONS.
    assert ("COPY", "--from=builder /src/migrations /opt/croupier/migrations") in runtime
    runtime_env = " ".join(v for k, v in runtime if k == "ENV")
    assert "CROUPIER_MIGRATIONS=/opt/croupier/migrations" in runtime_env
    builder_runs = " ".join(v for k, v in instructions[: len(instructions) - len(runtime)] if k == "RUN")
    assert "gcc" in builder_runs and "scripts/gen-proto.sh" in builder_runs and "pip install --no-deps ." in builder_runs
    assert builder_runs.index("gen-proto.sh") < builder_runs.index("pip install --no-deps ."), "stubs before install"


def test_the_build_context_is_an_allow_list_without_local_build_output() -> None:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines() if p.strip() and not p.startswith("#")]
    assert patterns[0] == "*"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    assert {"pyproject.toml", "setup.py", "libs", "services", "cli", "proto", "migrations", "scripts/gen-proto.sh"} <= allowed
    for local_only in ("libs/proto/src/", "**/*.so", "**/__pycache__/"):
        assert local_only in patterns


def test_compose_exposes_the_browser_gateway_forwarding_to_the_public_services(compose: dict[str, Any]) -> None:
    gateway = compose["services"]["gateway"]
    assert gateway["command"] == ["gateway"] and gateway["image"] == compose["services"]["game"]["image"]
    assert gateway["ports"] == ["127.0.0.1:8080:8080"] and gateway["environment"]["PORT"] == "8080"
    env = gateway["environment"]
    assert {f"{host.upper()}_SERVICE_ADDR" for host in PUBLIC_SERVICE_HOSTS.values()} == {k for k in env if k.endswith("_SERVICE_ADDR")}
    for host in set(PUBLIC_SERVICE_HOSTS.values()):
        assert env[f"{host.upper()}_SERVICE_ADDR"] == f"{host}:{GRPC_PORT}"
        assert gateway["depends_on"][host]["condition"] == "service_healthy"
    assert "CROUPIER_TOKEN_SECRET" not in env and "DATABASE_URL" not in env, "it forwards; the services authenticate"
    assert "/healthz" in " ".join(gateway["healthcheck"]["test"])
    assert gateway["read_only"] is True and gateway["cap_drop"] == ["ALL"]


def test_the_gateway_serves_http_from_the_one_image_and_forwards_to_the_public_services_hosts() -> None:
    deployment = objects("Deployment")[GATEWAY]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["image"] == "croupier" and container["args"] == [GATEWAY] and "command" not in container
    assert spec["serviceAccountName"] == GATEWAY and spec["automountServiceAccountToken"] is False
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("http", HTTP_PORT)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PORT"] == str(HTTP_PORT) and env["OTEL_SERVICE_NAME"] == "croupier-gateway"
    assert container["envFrom"] == [{"configMapRef": {"name": "croupier-config"}}], "no Secret in its environment"
    for host in set(PUBLIC_SERVICE_HOSTS.values()):
        assert env[f"{host.upper()}_SERVICE_ADDR"] == f"{host}:{GRPC_PORT}", "the host's public port, not the ConfigMap's internal one"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, probe
    (service_port,) = objects("Service")[GATEWAY]["spec"]["ports"]
    assert (service_port["name"], service_port["port"], service_port["targetPort"]) == ("http", HTTP_PORT, "http")
    assert deployment["spec"]["replicas"] >= 2


def test_the_gateway_takes_http_from_the_ingress_namespace_only_and_reaches_only_game_and_wallet() -> None:
    assert allowed(GATEWAY, "Ingress") == [({"namespaceSelector": {"matchLabels": INGRESS_NAMESPACE_LABEL}}, {"http"})]
    assert grpc_peers(GATEWAY, "Egress") == set()  # not a service: never the internal (mTLS) port
    assert public_peers(GATEWAY, "Egress") == set(PUBLIC_SERVICE_HOSTS.values())
    for host in set(PUBLIC_SERVICE_HOSTS.values()):
        assert public_peers(host, "Ingress") == {GATEWAY}, host


def test_the_gateway_calls_the_public_tls_ports_trusting_the_ca_it_mounts_read_only() -> None:
    (container,) = objects("Deployment")[GATEWAY]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GAME_SERVICE_ADDR"] == f"game:{GRPC_PORT}" and env["WALLET_SERVICE_ADDR"] == f"wallet:{GRPC_PORT}"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in objects("Deployment")[GATEWAY]["spec"]["template"]["spec"]["volumes"]}
    assert mounts[TLS_DIR]["readOnly"] is True
    assert volumes[mounts[TLS_DIR]["name"]]["secret"]["secretName"] == "croupier-tls-gateway"
    (configmap,) = objects("ConfigMap").values()
    assert configmap["data"]["TLS_CA_FILE"].startswith(TLS_DIR + "/")
