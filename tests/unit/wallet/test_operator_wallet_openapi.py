"""docs/operator-wallet.openapi.yaml, the machine-readable contract a casino builds against, says what the
code does: the same calls, the same required fields (the reference operator's checks), the same statuses
(the client's classification) and the same signature headers."""

from pathlib import Path

import yaml

from croupier_platform.signing import REQUEST_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from croupier_reference_operator.app import REQUIRED
from croupier_wallet.adapters.casino_wallet import DEFINITE_REFUSALS

CONTRACT = Path(__file__).parents[3] / "docs" / "operator-wallet.openapi.yaml"


def test_the_published_contract_matches_the_client_and_the_reference_operator() -> None:
    contract = yaml.safe_load(CONTRACT.read_text())
    schemas = contract["components"]["schemas"]

    assert contract["openapi"].startswith("3.1")
    assert set(contract["paths"]) == {"/v1/balance"} | {f"/v1/{kind}" for kind in REQUIRED}
    for kind, required in REQUIRED.items():
        assert set(schemas[f"{kind.capitalize()}Request"]["required"]) == set(required), kind
    assert set(schemas["Answer"]["properties"]["status"]["enum"]) == {"OK"} | DEFINITE_REFUSALS
    signing = contract["components"]["securitySchemes"]["croupierSignature"]
    assert signing["name"] == SIGNATURE_HEADER
    assert TIMESTAMP_HEADER in signing["description"] and REQUEST_ID_HEADER in signing["description"]
