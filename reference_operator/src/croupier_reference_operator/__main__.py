"""`python -m croupier_reference_operator --listen 127.0.0.1:8090 --data var/operator.db`: the reference casino
wallet as its own process. The shared secret comes from REFERENCE_OPERATOR_SECRET (hex, 32 bytes or more),
never from the command line; REFERENCE_OPERATOR_FAULTS (JSON) sets fault knobs at start, and
REFERENCE_OPERATOR_PLAYERS (JSON, {"alice": {"USD": 100000}}) sets players' balances at start (minor units)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import uvicorn

from croupier_platform.signing import SignatureCheck

from .app import Faults, reference_operator
from .store import OperatorStore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m croupier_reference_operator", description=__doc__)
    parser.add_argument("--listen", default="127.0.0.1:8090", help="host:port (default 127.0.0.1:8090)")
    parser.add_argument("--data", type=Path, default=Path("var/reference-operator.db"), help="its SQLite file")
    args = parser.parse_args(argv)
    try:
        secret = bytes.fromhex(os.environ["REFERENCE_OPERATOR_SECRET"].strip())
        if len(secret) < 32:
            raise ValueError
    except (KeyError, ValueError):
        print("set REFERENCE_OPERATOR_SECRET to the shared secret as hex (32 bytes or more)", file=sys.stderr)
        return 2
    faults = Faults()
    faults.update(json.loads(os.environ.get("REFERENCE_OPERATOR_FAULTS", "{}")))
    args.data.parent.mkdir(parents=True, exist_ok=True)
    store = OperatorStore(args.data)
    for player, balances in json.loads(os.environ.get("REFERENCE_OPERATOR_PLAYERS", "{}")).items():
        for currency, balance in balances.items():
            store.set_player(player, currency, int(balance))
    app = reference_operator(store, SignatureCheck([secret]), faults)
    host, _, port = args.listen.rpartition(":")
    uvicorn.run(app, host=host or "127.0.0.1", port=int(port), log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
