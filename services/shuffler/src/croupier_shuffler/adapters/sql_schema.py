"""The shuffler's own tables (beside the platform's events, outbox and tracking tables)."""

from sqlalchemy import Column, Integer, MetaData, String, Table, Text

from croupier_platform.db import NAMING_CONVENTION

shuffler_metadata = MetaData(naming_convention=NAMING_CONVENTION)

shoes_table = Table(
    "shuffler_shoes",
    shuffler_metadata,
    Column("shoe_id", String(36), primary_key=True),
    Column("round_id", Text, nullable=False, unique=True),  # one shoe per round
    Column("decks", Integer, nullable=False),
    Column("cards", Text, nullable=False),  # "Ac,Td,…": the exact text the commitment covers
    Column("salt_hex", String(64), nullable=False),
    Column("commitment", String(64), nullable=False),
    # ISO-8601 with offset, as the events store times: SQLite would drop a DateTime's zone.
    Column("created_at", Text, nullable=False),
    Column("revealed_at", Text),
)
