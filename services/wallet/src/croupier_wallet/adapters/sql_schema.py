"""The wallet's own tables (SQLAlchemy Core, the same on SQLite and PostgreSQL).

`entries` are the truth; `accounts.balance` is their fold, kept in the same transaction so a
debit can be checked against one locked row (PostgreSQL: SELECT ... FOR UPDATE; SQLite: the
write lock BEGIN IMMEDIATE takes). System accounts (table, house, world, casino) are never checked:
the transaction's deltas are added (INSERT ... ON CONFLICT DO UPDATE) as its last write to one of the
account's shard rows (domain/ledger.py, SYSTEM_SHARDS: `house`, `house#1`...), the one its first
player hashes to, so a system row is locked only around the commit and only by the units whose player
hashes to it. check_ledger verifies one against the other, each system account's shards added up.
"""

from sqlalchemy import BigInteger, Boolean, Column, ForeignKey, Index, Integer, MetaData, String, Table, Text

from croupier_platform.db import NAMING_CONVENTION

wallet_metadata = MetaData(naming_convention=NAMING_CONVENTION)

# SQLite autoincrements only a column declared exactly INTEGER PRIMARY KEY; PostgreSQL gets BIGINT.
_Sequence = BigInteger().with_variant(Integer(), "sqlite")

accounts_table = Table(
    "wallet_accounts",
    wallet_metadata,
    Column("account_id", String(240), primary_key=True),  # player:<id>; table, house, world, casino and their shards (house#3)
    Column("currency", String(8), primary_key=True),
    Column("balance", BigInteger, nullable=False),  # posted: sum of this account's entries
    Column("pending_debits", BigInteger, nullable=False),
    Column("pending_credits", BigInteger, nullable=False),
    Column("version", Integer, nullable=False),
    # A player account's: the head of the player's ledger stream (version and hash of its last event) as
    # this row's last write left it (wallet_0004), so a stake or settlement that locks the row knows
    # where to append without reading the stream. NULL: not known (system accounts, older rows).
    Column("ledger_version", Integer),
    Column("ledger_hash", String(64)),
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
    Column("expires_at", Text),  # a pending reservation's expiry (wallet_0003); NULL once created posted
    sqlite_autoincrement=True,
)
Index("ix_wallet_transfers_player", transfers_table.c.player_id, transfers_table.c.seq)
Index("ix_wallet_transfers_round", transfers_table.c.round_id, transfers_table.c.seq)
# A player's transfers of one currency and day: the daily limits' usage (domain/limits.py).
Index("ix_wallet_transfers_player_day", transfers_table.c.player_id, transfers_table.c.currency, transfers_table.c.occurred_at)
# The reservations past their expiry, for the game's reconciler.
Index("ix_wallet_transfers_expiry", transfers_table.c.status, transfers_table.c.expires_at)

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
    # Where and when it was played (ReserveStakes), for the ledger's reports; empty on rounds
    # staked before wallet_0002.
    Column("game", String(200)),
    Column("table_id", String(200)),
    Column("opened_at", Text),
)
Index("ix_wallet_rounds_opened_at", rounds_table.c.opened_at)

# Responsible-gaming limits (domain/limits.py): one row per player, currency and limit
# (max_stake, daily_wager, daily_loss). NULL amount: no limit; a loosening waits in pending_*.
limits_table = Table(
    "wallet_limits",
    wallet_metadata,
    Column("player_id", String(200), primary_key=True),
    Column("currency", String(8), primary_key=True),
    Column("limit_name", String(16), primary_key=True),
    Column("amount", BigInteger),
    Column("pending", Boolean, nullable=False),
    Column("pending_amount", BigInteger),
    Column("pending_effective_at", Text),
    Column("updated_at", Text, nullable=False),
    Column("updated_by", String(200), nullable=False),  # the player, or the operator who set it
)

# A player's self-exclusion (every currency). The row is also the player's lock for limit changes:
# SetLimits creates it and holds it FOR UPDATE, so two changes of one player's limits take turns.
self_exclusions_table = Table(
    "wallet_self_exclusions",
    wallet_metadata,
    Column("player_id", String(200), primary_key=True),
    Column("excluded_until", Text),
    Column("pending", Boolean, nullable=False),
    Column("pending_excluded_until", Text),
    Column("pending_effective_at", Text),
    Column("updated_at", Text, nullable=False),
    Column("updated_by", String(200), nullable=False),
)


# Seamless mode (domain/casino_calls.py): every call to the casino's wallet, written before it is sent (a debit)
# or in the unit of work that settles or voids its round (a credit, a rollback: the outbox the casino relay
# sends until acknowledged), with what the casino answered. Also what the reconciliation lists (wallet_0005).
casino_calls_table = Table(
    "wallet_casino_calls",
    wallet_metadata,
    Column("seq", _Sequence, primary_key=True, autoincrement=True),
    Column("transaction_id", String(240), nullable=False, unique=True),
    Column("kind", String(8), nullable=False),
    Column("player_id", String(200), nullable=False),
    Column("round_id", String(200), nullable=False),
    Column("currency", String(8), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("state", String(12), nullable=False),
    Column("created_at", Text, nullable=False),
    Column("game", String(200)),
    Column("refs", Text),  # JSON list: a credit's debits, a rollback's debit
    Column("commission", BigInteger, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", Text),
    Column("last_status", String(40)),
    Column("answered_at", Text),
    sqlite_autoincrement=True,
)
Index("ix_wallet_casino_calls_due", casino_calls_table.c.state, casino_calls_table.c.next_attempt_at)
Index("ix_wallet_casino_calls_round", casino_calls_table.c.round_id, casino_calls_table.c.seq)
Index("ix_wallet_casino_calls_created", casino_calls_table.c.created_at)
