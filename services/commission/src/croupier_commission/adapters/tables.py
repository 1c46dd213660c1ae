"""The commission service's own tables (beside the platform's events, outbox and tracking)."""

from sqlalchemy import BigInteger, Column, MetaData, Table, Text

from croupier_platform.db import NAMING_CONVENTION

metadata = MetaData(naming_convention=NAMING_CONVENTION)

p2p_rounds = Table(
    "commission_rounds",
    metadata,
    Column("round_id", Text, primary_key=True),
    Column("player_id", Text, nullable=False),
    Column("dealer_id", Text),  # a player-dealer, or NULL when the house deals
    Column("currency", Text, nullable=False),
)

dealer_points = Table(
    "dealer_points",
    metadata,
    Column("player_id", Text, primary_key=True),
    Column("points", BigInteger, nullable=False),
    Column("last_commission", BigInteger, nullable=False),
    Column("commission_total", BigInteger, nullable=False),
)
