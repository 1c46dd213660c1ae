"""Persistence: the wallet's SQLAlchemy Core tables and the ledger repository."""
