"""The platform's tables (events, outbox, tracking), defined once for Alembic to read: SQLAlchemy Core
that both backends run (SQLite, PostgreSQL)."""

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

# Deterministic constraint names, so Alembic migrations can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

platform_metadata = MetaData(naming_convention=NAMING_CONVENTION)

# SQLite autoincrements only a column declared exactly INTEGER PRIMARY KEY; PostgreSQL gets BIGINT.
_AutoincrementKey = BigInteger().with_variant(Integer(), "sqlite")

# `position` is the primary key because neither backend can autoincrement a column outside the
# key on SQLite; UNIQUE (stream_id, version) gives the optimistic-concurrency guarantee.
events_table = Table(
    "events",
    platform_metadata,
    Column("position", _AutoincrementKey, primary_key=True, autoincrement=True),
    Column("stream_id", Text, nullable=False),
    Column("stream_type", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("event_id", String(36), nullable=False, unique=True),
    Column("event_type", Text, nullable=False),
    Column("schema_version", Integer, nullable=False),
    # The exact ISO-8601 text that was hashed; a timestamp type could re-format it.
    Column("occurred_at", Text, nullable=False),
    Column("causation_id", Text),
    Column("correlation_id", Text),
    Column("trace_context", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    # PostgreSQL: the id of the transaction that wrote the row (a server default set by the migration),
    # so read_all can order by commit safety without serialising appends. NULL on SQLite.
    Column("txid", BigInteger, nullable=True),
    UniqueConstraint("stream_id", "version"),
    sqlite_autoincrement=True,  # never reuse a position, even after a rollback of the last row
)

outbox_table = Table(
    "outbox",
    platform_metadata,
    Column("id", _AutoincrementKey, primary_key=True, autoincrement=True),
    Column("topic", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("envelope", Text, nullable=False),
    Column("published_at", DateTime(timezone=True)),
    sqlite_autoincrement=True,
)
Index(
    "ix_outbox_pending",
    outbox_table.c.id,
    sqlite_where=outbox_table.c.published_at.is_(None),
    postgresql_where=outbox_table.c.published_at.is_(None),
)

tracking_table = Table(
    "tracking",
    platform_metadata,
    Column("consumer", Text, primary_key=True),
    Column("event_id", String(36), primary_key=True),
)



def create_schema(engine: Engine, metadata: MetaData = platform_metadata) -> None:
    metadata.create_all(engine)
