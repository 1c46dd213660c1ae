"""The dealer's own tables: one cut shoe per round and every deal made from it."""

from sqlalchemy import Column, ForeignKey, Integer, MetaData, String, Table, Text

from croupier_platform.db import NAMING_CONVENTION

dealer_metadata = MetaData(naming_convention=NAMING_CONVENTION)

cuts_table = Table(
    "dealer_cuts",
    dealer_metadata,
    Column("round_id", Text, primary_key=True),
    Column("shoe_id", String(36), nullable=False),
    Column("commitment", String(64), nullable=False),
    Column("cut_seed", Text, nullable=False),
    Column("cut_offset", Integer, nullable=False),
    Column("cards", Text, nullable=False),  # the shoe as committed, "Ac,Td,…" (before the cut)
    Column("next_position", Integer, nullable=False),
    Column("created_at", Text, nullable=False),  # ISO-8601 with offset
)

deals_table = Table(
    "dealer_deals",
    dealer_metadata,
    Column("round_id", Text, ForeignKey(cuts_table.c.round_id), primary_key=True),
    Column("from_position", Integer, primary_key=True),
    Column("card_count", Integer, nullable=False),
    Column("cards", Text, nullable=False),
    Column("dealt_at", Text, nullable=False),
)
