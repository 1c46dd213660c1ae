"""Which services Croupier is made of, whom each calls and which hosts the public services: known
here, where processes are composed, so the platform library names none of them."""

from __future__ import annotations

SERVICES = ("shuffler", "dealer", "wallet", "commission", "game")
# Which services each one calls over gRPC (its {SERVICE}_SERVICE_ADDR settings in distributed mode).
DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "shuffler": (),
    "dealer": ("shuffler",),
    "wallet": (),
    "commission": ("wallet",),
    "game": ("shuffler", "dealer", "wallet", "commission"),
}
# Which service hosts each public gRPC service (the browser gateway routes by this).
PUBLIC_SERVICE_HOSTS = {"TableService": "game", "AuditService": "game", "WalletService": "wallet", "LedgerService": "wallet"}
