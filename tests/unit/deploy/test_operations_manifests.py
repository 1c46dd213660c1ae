"""What an SRE needs of the Kubernetes manifests beyond their shape (test_manifests.py): a migration Job
that can be applied again with a new image, replicas spread over zones and nodes, a drain before
SIGTERM that fits the process's own stop, alert rules on series that exist, and a managed PostgreSQL
reachable through the egress policy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from croupier_cli.hosting import GRACE_S, MODULE_STOP_S
from croupier_platform.metrics import PROMETHEUS_SERIES
from tests.unit.deploy.test_dashboards import series_in
from tests.unit.deploy.test_manifests import BASE, K8S, MIGRATE, POSTGRESQL_PORT, allowed, load_all, objects

ZONE, NODE = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
MANAGED_POSTGRESQL = K8S / "components" / "managed-postgresql"


def test_the_migration_job_deletes_itself_once_finished_so_a_release_can_apply_it_again() -> None:
    (job,) = objects("Job").values()
    assert job["metadata"]["name"] == MIGRATE and "generateName" not in job["metadata"]  # kubectl apply refuses generateName
    assert 0 < job["spec"]["ttlSecondsAfterFinished"] <= 3600
    assert "kubectl -n NS delete job croupier-migrate --ignore-not-found" in (BASE / "migrate.yaml").read_text()


@pytest.mark.parametrize("name", sorted(objects("Deployment")))
def test_every_deployment_spreads_its_own_pods_over_zones_and_nodes(name: str) -> None:
    template = objects("Deployment")[name]["spec"]["template"]
    constraints = template["spec"]["topologySpreadConstraints"]
    assert sorted(c["topologyKey"] for c in constraints) == sorted([ZONE, NODE])
    for constraint in constraints:
        assert constraint["labelSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        assert constraint["maxSkew"] == 1
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"  # a one-zone cluster still schedules
        assert constraint["matchLabelKeys"] == ["pod-template-hash"]


@pytest.mark.parametrize("name", sorted(objects("Deployment")))
def test_every_deployment_drains_before_sigterm_within_its_grace_period(name: str) -> None:
    spec = objects("Deployment")[name]["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pause >= 1
    # The pause, the streams' grace and the services' bounded stop all fit before the kubelet's SIGKILL.
    assert pause + GRACE_S + MODULE_STOP_S <= spec["terminationGracePeriodSeconds"]


def rules() -> list[dict[str, Any]]:
    (rule,) = objects("PrometheusRule").values()
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def test_the_alert_rules_name_only_series_the_services_export() -> None:
    found = rules()
    for rule in found:
        used = series_in(rule["expr"])
        assert used and used <= PROMETHEUS_SERIES, (rule["alert"], sorted(used - PROMETHEUS_SERIES))
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    named = {series for rule in found for series in series_in(rule["expr"])}
    # Settlement lag, dead letters, degraded readiness and the error rate each have an alert.
    assert {"croupier_outbox_lag_seconds", "croupier_deadletters_pending", "croupier_health_degraded",
            "rpc_server_duration_seconds_count"} <= named  # fmt: skip
    assert len({r["alert"] for r in found}) == len(found)


def test_the_alert_rule_is_a_prometheus_operator_resource() -> None:
    (rule,) = objects("PrometheusRule").values()
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"} and set(rule["spec"]) == {"groups"}
    for group in rule["spec"]["groups"]:
        assert set(group) == {"name", "rules"}
        for r in group["rules"]:
            assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}


def test_by_default_postgresql_is_reached_only_in_the_cluster() -> None:
    peers = [peer for peer, ports in allowed("game", "Egress") if POSTGRESQL_PORT in ports]
    assert peers == [{"podSelector": {"matchLabels": {"croupier.dev/store": "postgresql"}}}]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_the_managed_postgresql_component_opens_the_overlays_cidr_and_port_instead(tmp_path: Path) -> None:
    """An overlay as the component's own comment tells one to write: its range and port, and nothing in-cluster."""
    shutil.copytree(K8S, tmp_path / "k8s")
    documented = (MANAGED_POSTGRESQL / "kustomization.yaml").read_text()
    assert "path: /spec/egress/0/to/0/ipBlock/cidr" in documented and "path: /spec/egress/0/ports/0/port" in documented
    overlay = tmp_path / "k8s" / "overlays" / "managed"
    overlay.mkdir(parents=True)
    patch = [
        {"op": "replace", "path": "/spec/egress/0/to/0/ipBlock/cidr", "value": "10.20.0.0/28"},
        {"op": "replace", "path": "/spec/egress/0/ports/0/port", "value": 6432},
    ]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["../../base"], "components": ["../../components/managed-postgresql"],
        "patches": [{"target": {"kind": "NetworkPolicy", "name": "croupier-postgresql-egress"}, "patch": yaml.safe_dump(patch)}],
    }))  # fmt: skip
    rendered = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60, check=True)
    (policy,) = [d for d in yaml.safe_load_all(rendered.stdout) if d and d["metadata"]["name"] == "croupier-postgresql-egress"]
    assert policy["spec"]["egress"] == [{"to": [{"ipBlock": {"cidr": "10.20.0.0/28"}}], "ports": [{"protocol": "TCP", "port": 6432}]}]
    base_policy = next(d for d in load_all(BASE / "networkpolicy.yaml") if d["metadata"]["name"] == "croupier-postgresql-egress")
    assert policy["spec"]["podSelector"] == base_policy["spec"]["podSelector"]  # the same pods: services and the Job


def test_the_compose_file_says_first_which_compose_it_needs_and_so_do_the_docs() -> None:
    from tests.unit.deploy.test_manifests import COMPOSE, ROOT

    compose = yaml.safe_load(COMPOSE.read_text())
    optional_env_files = [s for s in compose["services"].values() for e in s.get("env_file", []) if isinstance(e, dict) and "required" in e]
    assert optional_env_files, "no optional env_file left: the 2.24 requirement may go"
    assert COMPOSE.read_text().splitlines()[0].startswith("# Needs Docker Compose 2.24 or newer")
    assert "Docker Compose 2.24 or newer" in (ROOT / "docs" / "operations.md").read_text()
