"""The wallet's own tables (SQLAlchemy Core, the same on SQLite and PostgreSQL).

`entries` are the truth; `accounts.balance` is their fold, kept in the same transaction so a
debit can be checked against one locked row (PostgreSQL: SELECT ... FOR UPDATE; SQLite: the
write lock BEGIN IMMEDIATE takes). System accounts (table, house, world) are never checked: their
rows get the transaction's deltas added (INSERT ... ON CONFLICT DO UPDATE) as its last write, so
these hot rows are locked only around the commit. check_ledger verifies one against the other.
"""

from sqlalchemy import BigInteger, Column, ForeignKey, Index, Integer, MetaData, String, Table, Text

from croupier_platform.db import NAMING_CONVENTION

wallet_metadata = MetaData(naming_convention=NAMING_CONVENTION)

# SQLite autoincrements only a column declared exactly INTEGER PRIMARY KEY; PostgreSQL gets BIGINT.
_Sequence = BigInteger().with_variant(Integer(), "sqlite")

accounts_table = Table(
    "wallet_accounts",
    wallet_metadata,
    Column("account_id", String(240), primary_key=True),  # player:<id>, table, house, world
    Column("currency", String(8), primary_key=True),
    Column("balance", BigInteger, nullable=False),  # posted: sum of this account's entries
    Column("pending_debits", BigInteger, nullable=False),
    Column("pending_credits", BigInteger, nullable=False),
    Column("version", Integer, nullable=False),
)

transfers_table = Table(
    "wallet_transfers",
    wallet_metadata,
    # Commit order, for "newest first"; the transfer id is the idempotency key.
    Column("seq", _Sequence, primary_key=True, autoincrement=True),
    Column("transfer_id", String(240), nullable=False, unique=True),
    Column("debit_account", String(240), nullable=False),
    Column("credit_account", String(240), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("currency", String(8), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("status", String(8), nullable=False),
    Column("player_id", String(200), nullable=False),
    Column("round_id", String(200)),
    Column("reverses", String(240)),
    Column("occurred_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("available_before", BigInteger),
    Column("available_after", BigInteger),
    Column("details", Text),  # JSON, e.g. the bets of a stake
    sqlite_autoincrement=True,
)
Index("ix_wallet_transfers_player", transfers_table.c.player_id, transfers_table.c.seq)
Index("ix_wallet_transfers_round", transfers_table.c.round_id, transfers_table.c.seq)

entries_table = Table(
    "wallet_entries",
    wallet_metadata,
    Column("seq", _Sequence, primary_key=True, autoincrement=True),
    Column("transfer_id", String(240), ForeignKey(transfers_table.c.transfer_id), nullable=False),
    Column("account_id", String(240), nullable=False),
    Column("currency", String(8), nullable=False),
    Column("amount", BigInteger, nullable=False),  # signed: -debit, +credit
    Column("occurred_at", Text, nullable=False),
    sqlite_autoincrement=True,
)
Index("ix_wallet_entries_account", entries_table.c.account_id, entries_table.c.currency)

rounds_table = Table(
    "wallet_rounds",
    wallet_metadata,
    Column("round_id", String(200), primary_key=True),
    Column("player_id", String(200), nullable=False),
    Column("currency", String(8), nullable=False),
    Column("status", String(8), nullable=False),
    Column("version", Integer, nullable=False),
)
