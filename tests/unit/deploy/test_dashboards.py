"""Metrics deployment, checked offline like the manifests (test_manifests.py): the Grafana dashboard
parses and queries only series the services export, Prometheus scrapes every service's metrics port,
and docker-compose runs Prometheus and Grafana with both."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from croupier_platform.metrics import PROMETHEUS_SERIES
from croupier_cli.deployment import SERVICES

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
DASHBOARDS = ROOT / "infra" / "grafana" / "dashboards"
PROMETHEUS = ROOT / "infra" / "prometheus" / "prometheus.yml"
PROVISIONING = ROOT / "infra" / "grafana" / "provisioning"

# PromQL words that are not series: functions, aggregations, keywords, Grafana's variables.
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "by", "without", "rate", "irate", "increase", "histogram_quantile",
    "label_values", "and", "or", "unless", "on", "ignoring", "offset", "le",
}  # fmt: skip


def dashboards() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def expressions(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL the dashboard runs: panel targets and template-variable queries."""
    found = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        found.append(query["query"] if isinstance(query, dict) else query)
    return found


def series_in(expr: str) -> set[str]:
    """The series an expression names: what is left once label matchers, grouping labels, ranges,
    strings, numbers and PromQL's own words are taken out."""
    text = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", text)  # grouping labels
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges, $__rate_interval
    text = re.sub(r"\$\w+", " ", text)
    text = re.sub(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)", r" \1 ", text)  # the series, not the label
    words = set(re.findall(r"[a-zA-Z_:][\w:]*", text))
    return words - PROMQL_WORDS


def test_series_in_reads_the_series_of_an_expression() -> None:
    expr = 'histogram_quantile(0.99, sum by (le, rpc_method) (rate(rpc_server_duration_seconds_bucket{a="b"}[$__rate_interval])))'
    assert series_in(expr) == {"rpc_server_duration_seconds_bucket"}
    assert series_in("label_values(croupier_rounds_opened_total, croupier_game_name)") == {"croupier_rounds_opened_total"}
    assert series_in("sum(croupier_no_such_series) * 60") == {"croupier_no_such_series"}


def test_there_is_a_dashboard() -> None:
    assert [p.name for p in dashboards()] == ["croupier.json"]


@pytest.mark.parametrize("path", dashboards(), ids=lambda p: p.name)
def test_the_dashboard_parses_and_names_only_series_that_exist(path: Path) -> None:
    dashboard = json.loads(path.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["panels"]
    exprs = expressions(dashboard)
    assert exprs
    used = set().union(*(series_in(e) for e in exprs))
    assert used <= PROMETHEUS_SERIES, f"unknown series: {sorted(used - PROMETHEUS_SERIES)}"
    # Every series the services export is on it (the histogram once, through any of its three).
    families = {re.sub(r"_(bucket|count|sum)$", "", name) for name in PROMETHEUS_SERIES}
    assert families <= {re.sub(r"_(bucket|count|sum)$", "", name) for name in used}
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "prometheus", panel["title"]


def test_no_player_id_is_a_label_anywhere() -> None:
    text = "".join(p.read_text() for p in dashboards())
    assert "player" not in text.lower()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def test_prometheus_scrapes_every_service_on_its_metrics_port(compose: dict[str, Any]) -> None:
    config = yaml.safe_load(PROMETHEUS.read_text())
    targets = {t for job in config["scrape_configs"] for group in job["static_configs"] for t in group["targets"]}
    assert all(job.get("metrics_path", "/metrics") == "/metrics" for job in config["scrape_configs"])
    for name in SERVICES:
        port = compose["services"][name]["environment"]["METRICS_PORT"]
        assert int(port) > 0, name
        assert f"{name}:{port}" in targets, name
    assert len(targets) == len(SERVICES)


def test_compose_runs_prometheus_and_grafana_with_the_config_and_the_dashboards(compose: dict[str, Any]) -> None:
    services = compose["services"]
    prometheus, grafana = services["prometheus"], services["grafana"]
    assert prometheus["image"].startswith("prom/prometheus:v") and grafana["image"].startswith("grafana/grafana:")
    assert not prometheus["image"].endswith(":latest") and not grafana["image"].endswith(":latest")
    mounts = {volume.split(":")[0]: volume.split(":")[1] for volume in [*prometheus["volumes"], *grafana["volumes"]]}
    assert mounts["./infra/prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    assert mounts["./infra/grafana/dashboards"] == "/var/lib/grafana/dashboards"
    assert mounts["./infra/grafana/provisioning"] == "/etc/grafana/provisioning"
    assert set(SERVICES) <= set(prometheus["depends_on"])
    assert "prometheus" in grafana["depends_on"]
    # Published on the loopback only, as the services' own ports.
    assert all(p.startswith("127.0.0.1:") for p in [*prometheus["ports"], *grafana["ports"]])
    # Grafana's provisioning points at that Prometheus and at the mounted dashboards.
    source = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())["datasources"][0]
    assert source["uid"] == "prometheus" and source["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "croupier.yml").read_text())["providers"][0]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    assert "GRAFANA_ADMIN_PASSWORD:-croupier-DEVELOPMENT-ONLY" in COMPOSE.read_text()
