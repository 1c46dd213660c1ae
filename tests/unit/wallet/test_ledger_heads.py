"""The head of a player's ledger stream travels on the player's account row (wallet_0004): a stake or
settlement appends its ledger events without reading the stream, and the stream stays one unbroken
hash chain whether the row knows the head, does not (an older row), or is behind it (the stream
was written through the player's other currency)."""

from contextlib import contextmanager

from sqlalchemy import select, update

from croupier_platform.events import verify_chain
from croupier_wallet.adapters.sql_schema import accounts_table

from .helpers import listening, settled


@contextmanager
def head_reads(wallet):
    """The statements that read a stream's head (the last event of one stream)."""
    seen: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        if statement.lstrip().startswith("SELECT events.version") and "ORDER BY events.version DESC" in statement:
            seen.append(statement)

    with listening(wallet.engine, "before_cursor_execute", count):
        yield seen


def stream(wallet, player="alice"):
    with wallet.store.reading() as uow:
        return uow.events.read_stream(f"player:{player}")


def recorded_head(wallet, currency="PLAY", player="alice"):
    with wallet.engine.connect() as conn:
        row = conn.execute(
            select(accounts_table.c.ledger_version, accounts_table.c.ledger_hash).where(
                accounts_table.c.account_id == f"player:{player}", accounts_table.c.currency == currency
            )
        ).one()
    return row.ledger_version, row.ledger_hash


def play(wallet, round_id, currency="PLAY"):
    wallet.app.reserve_stakes(f"{round_id}-s", "alice", round_id, 100, currency, {"ante": 100})
    assert wallet.consumer.handle(settled(round_id, {"ante": (100, 200)}))


def test_stakes_and_settlements_append_at_the_head_the_account_row_records(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    with head_reads(wallet) as reads:
        play(wallet, "r1")
        play(wallet, "r2")
    assert reads == []
    events = stream(wallet)
    # The top-up, then each round's stake and its settlement (one event: its changes folded).
    assert [e.version for e in events] == list(range(1, 6)) and verify_chain(events) == []
    assert recorded_head(wallet) == (events[-1].version, events[-1].hash)
    assert wallet.check().ok


def test_a_row_that_does_not_know_the_head_reads_it_once_and_records_it(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    with wallet.engine.begin() as conn:  # as a row written before wallet_0004 is
        conn.execute(update(accounts_table).values(ledger_version=None, ledger_hash=None))
    with head_reads(wallet) as reads:
        play(wallet, "r1")
    assert len(reads) == 1  # the stake's; the settlement found the head on the row
    events = stream(wallet)
    assert [e.version for e in events] == list(range(1, 4)) and verify_chain(events) == []
    assert recorded_head(wallet) == (3, events[-1].hash)


def test_a_stream_written_through_the_players_other_currency_is_read_not_trusted_to_the_row(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    wallet.app.deposit("alice", 1_000, "USD", "d1")
    play(wallet, "r1", "PLAY")  # the PLAY row is now ahead of the USD row
    play(wallet, "r2", "USD")
    play(wallet, "r3", "PLAY")
    events = stream(wallet)
    assert [e.version for e in events] == list(range(1, 9)) and verify_chain(events) == []
    assert recorded_head(wallet, "PLAY") == (8, events[-1].hash)
    assert recorded_head(wallet, "USD")[0] == 6
    assert wallet.check().ok


class _Refused:
    def __getattr__(self, name: str) -> object:
        raise AssertionError("a NewEvent validated: the ledger's own events are built trusted (NewEvent.trusted)")


def test_the_ledgers_events_are_built_without_validation_and_read_back_as_appended(wallet, monkeypatch):
    from croupier_platform.eventstore import NewEvent

    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    with monkeypatch.context() as patched:
        patched.setattr(NewEvent, "__pydantic_validator__", _Refused())
        play(wallet, "r1")
    events = stream(wallet)
    assert [e.event_type for e in events][1:] == ["TransferReserved", "TransfersRecorded"]
    assert verify_chain(events) == [] and wallet.check().ok
    assert events[-1].payload["round_id"] == "r1" and events[-1].correlation_id == "r1"
