"""The wallet's reads (balances, history, a round's transactions, reports, limits, expired reservations)
run in reading units of work: a snapshot that neither takes SQLite's single writer (BEGIN IMMEDIATE, in
turn with every stake and settlement) nor writes, and that does not wake the outbox relay (a write unit's
commit does: a relay pass reads the outbox)."""

from collections.abc import Iterator
from contextlib import contextmanager

from croupier_wallet.domain.reports import LedgerFilter

from .helpers import listening, settled


READ_ONLY = ("SELECT", "BEGIN DEFERRED", "BEGIN", "COMMIT", "ROLLBACK")


@contextmanager
def writes(wallet) -> Iterator[list[str]]:
    """What the block asked of the database beyond a read-only transaction (SQLite's BEGIN IMMEDIATE takes the
    writer), and the write units' commits it told the outbox relay of."""
    seen: list[str] = []

    def on_statement(_conn, _cursor, statement: str, *_rest) -> None:
        if not statement.lstrip().upper().startswith(READ_ONLY) or "IMMEDIATE" in statement.upper():
            seen.append(statement)

    factory = wallet.app._uow  # the factory the use cases open their units with
    factory.on_commit = lambda: seen.append("a write unit committed")
    try:
        with listening(wallet.engine, "before_cursor_execute", on_statement):
            yield seen
    finally:
        factory.on_commit = None


def test_reads_take_no_writer_write_nothing_and_wake_no_relay(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-alice")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100}, game="casino-war", table_id="t1")
    wallet.consumer.handle(settled("r1", {"ante": (100, 200)}))

    with writes(wallet) as written:
        balances = wallet.app.balances("alice")
        page = wallet.app.transactions("alice", page_size=10)
        player, in_round = wallet.app.round_transactions("r1")
        house = wallet.app.house_result(LedgerFilter())
        wallet.app.commission_totals(LedgerFilter())
        wallet.app.expired_reservations(page_size=10)
        limits = wallet.app.limits.get_limits("alice")

    assert written == []
    assert [(b.currency, b.available, b.reserved) for b in balances] == [("PLAY", 1_100, 0)]
    assert len(page.items) == 3 and player == "alice" and len(in_round) == 2
    assert house.totals and limits.player_id == "alice"
