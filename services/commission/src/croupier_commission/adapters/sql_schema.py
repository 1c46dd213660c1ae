"""The commission service's own tables (beside the platform's events, outbox and tracking)."""

from sqlalchemy import BigInteger, Boolean, Column, MetaData, Table, Text, false

from croupier_platform.db import NAMING_CONVENTION

metadata = MetaData(naming_convention=NAMING_CONVENTION)

# One row per war-p2p round: who played whom, and what its settlement moved (so a void undoes exactly that).
p2p_rounds = Table(
    "commission_rounds",
    metadata,
    Column("round_id", Text, primary_key=True),
    Column("player_id", Text, nullable=False),
    Column("dealer_id", Text),  # a player-dealer, or NULL when the house deals
    Column("currency", Text, nullable=False),
    Column("table_id", Text, nullable=False, server_default=""),
    Column("settled", Boolean, nullable=False, server_default=false()),
    Column("voided", Boolean, nullable=False, server_default=false()),
    Column("staked", BigInteger, nullable=False, server_default="0"),
    Column("commission", BigInteger, nullable=False, server_default="0"),
    Column("player_points_delta", BigInteger, nullable=False, server_default="0"),
    Column("dealer_points_delta", BigInteger, nullable=False, server_default="0"),
)

# Dealer points per player and currency: points earned with play money never open a real-money dealer's seat.
dealer_points = Table(
    "dealer_points",
    metadata,
    Column("player_id", Text, primary_key=True),
    Column("currency", Text, primary_key=True),
    Column("points", BigInteger, nullable=False),
    Column("last_commission", BigInteger, nullable=False),
    Column("commission_total", BigInteger, nullable=False),
)
