"""The deployment's map of services agrees with the protos and the services' own bootstraps."""

from croupier_cli.deployment import DEPENDENCIES, PUBLIC_SERVICE_HOSTS, SERVICES
from croupier_platform.web_gateway import public_services


def test_every_public_service_has_a_host_and_only_those() -> None:
    names = {s.full_name for s in public_services()}
    assert names == {f"croupier.v1.{name}" for name in PUBLIC_SERVICE_HOSTS}
    assert set(PUBLIC_SERVICE_HOSTS.values()) <= set(SERVICES)


def test_every_service_calls_only_services_of_the_deployment() -> None:
    assert set(DEPENDENCIES) == set(SERVICES)
    assert all(set(callees) <= set(SERVICES) - {caller} for caller, callees in DEPENDENCIES.items())
