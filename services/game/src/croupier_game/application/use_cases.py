"""The game's use cases: seats (seats.py), play (play.py), watching (watching.py) and audit (audit.py),
each in its module, all on one RoundBook (rounds.py) and wired here once, for the service
(bootstrap.GameModule, on gRPC clients) and for the unit tests (tests/unit/game/conftest.py, on fakes)."""

from __future__ import annotations

from dataclasses import dataclass

from croupier_platform.runtime import Clock

from ..config import GameSettings
from ..domain.catalogue import Catalogue
from .audit import AuditUseCases
from .dealer_qualification import DealerQualification
from .feed import LogFeed
from .play import PlayUseCases
from .ports import Dealer, DealerPoints, LedgerArchive, ShoeArchive, Shuffler, Wallet
from .rounds import RoundBook
from .seats import SeatUseCases
from .shoes import KnownShoes
from .views import RoundViews
from .watching import Presence, WatchUseCases


@dataclass(frozen=True)
class GameUseCases:
    """The game's use cases on one RoundBook: what its servicers, keeper and reconciler call."""

    seats: SeatUseCases
    play: PlayUseCases
    dealers: DealerQualification
    feed: LogFeed
    presence: Presence
    watching: WatchUseCases
    audit: AuditUseCases


def wire_use_cases(
    book: RoundBook, catalogue: Catalogue, settings: GameSettings, clock: Clock, *, shuffler: Shuffler,
    dealer: Dealer, wallet: Wallet, points: DealerPoints, shoes: ShoeArchive, ledger: LedgerArchive, known_shoes: bool = True,
) -> GameUseCases:
    """The one wiring of the use cases, for the service (GameModule, on gRPC clients) and the unit tests
    (tests/unit/game/conftest.py, on fakes). `known_shoes`: a round's shoe and reveal asked of the shuffler
    once (KnownShoes), as the service does. Live streams: one tail of the log feeds every watcher of the
    replica; open WatchSeat streams keep their seats present, refreshed well within the shortest presence grace."""
    rounds_shuffler: Shuffler = KnownShoes(shuffler) if known_shoes else shuffler
    views = RoundViews(rounds_shuffler)
    dealers = DealerQualification(wallet, points)
    seats = SeatUseCases(book, catalogue, rounds_shuffler, wallet, dealers, clock)
    play = PlayUseCases(book, views, catalogue, rounds_shuffler, dealer, wallet, dealers, clock)
    feed = LogFeed(book, poll_interval_s=settings.watch_poll_interval_s, queue_size=settings.watch_queue_size)
    shortest_grace = min(entry.config.presence_grace_s for entry in catalogue.tables())
    presence = Presence(book, clock, min(settings.presence_heartbeat_s, shortest_grace / 3))
    watching = WatchUseCases(
        book, views, seats, catalogue, dealers, feed, presence, max_streams_per_player=settings.watch_max_streams_per_player
    )
    audit = AuditUseCases(book, shoes=shoes, ledger=ledger)
    return GameUseCases(seats, play, dealers, feed, presence, watching, audit)
