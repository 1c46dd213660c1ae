"""Croupier's wallet: a double-entry ledger with two-phase transfers (stakes reserved, then
posted or voided), idempotent by transfer id, fed by round events and serving WalletService
and StakeService. Start it with `bootstrap(ctx)`."""

from .bootstrap import WalletModule, bootstrap

__all__ = ["WalletModule", "bootstrap"]
