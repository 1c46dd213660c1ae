"""The game service's configuration: where its table catalogue comes from, and the keeper's pace."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

TABLES_ENV = "CROUPIER_TABLES"
DEFAULT_TABLES_FILE = Path(__file__).with_name("tables.toml")
# The relay is woken after the commits; the poll is only a safety net (rows another replica left).
RELAY_POLL_INTERVAL_S = 0.5
# A commit wakes the relay at most this long after it, so that the commits of the window (a round's opening
# and its deal, other players' rounds) go out in one pass: a pass has a fixed cost (a hop to the store's
# thread, a read and mark of the outbox, a produce request) that one commit a pass paid each time.
# It adds at most this much to the settlement's way to the broker. 0: a pass at every commit.
RELAY_DELAY_S = 0.05
# The keeper (application/keeper.py): how often it looks, and how long an open round may make no
# progress (betting, dealing) before it is voided with refunds. Decision timeouts are per table
# (`decision_timeout_s` in the catalogue), recorded in each round's RoundOpened.
KEEPER_INTERVAL_S = 1.0
STUCK_ROUND_VOID_AFTER_S = 300.0


def tables_file(explicit: Path | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """An explicit path first, then $CROUPIER_TABLES, then the catalogue shipped with the service."""
    if explicit is not None:
        return explicit
    if environ.get(TABLES_ENV):
        return Path(environ[TABLES_ENV])
    return DEFAULT_TABLES_FILE


# The reconciler (application/reconciler.py): how often it looks, how long after a round ended its
# consumers may still be applying it before the reconciler re-drives it, and how many rounds a pass takes.
RECONCILER_INTERVAL_S = 5.0
RECONCILE_AFTER_S = 30.0
RECONCILER_BATCH_SIZE = 500


# Live streams (application/feed.py, watching.py): how often the log feed looks for what other replicas
# wrote (this process's commits wake it at once), how many events may wait for one stream before it is
# dropped as too slow, how many streams one player may hold open, and how often an open WatchSeat
# stream refreshes its seat's presence (never less often than a third of the shortest presence grace).
WATCH_POLL_INTERVAL_S = 0.1
WATCH_QUEUE_SIZE = 256
WATCH_MAX_STREAMS_PER_PLAYER = 16
PRESENCE_HEARTBEAT_S = 5.0


class GameSettings(BaseSettings):
    """All the game's settings, what `bootstrap(ctx, settings)` takes, each from $CROUPIER_<NAME> (seconds
    may be fractional): the table catalogue ($CROUPIER_TABLES; None: the one shipped with the service), the
    relay's pace, the keeper's, the reconciler's, and the live streams' (the constants above say what each is)."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore")

    tables: Path | None = None
    relay_poll_interval_s: float = Field(default=RELAY_POLL_INTERVAL_S, gt=0)
    round_relay_delay_s: float = Field(default=RELAY_DELAY_S, ge=0, le=1)
    keeper_interval_s: float = Field(default=KEEPER_INTERVAL_S, gt=0)
    stuck_round_void_after_s: float = Field(default=STUCK_ROUND_VOID_AFTER_S, gt=0)
    reconciler_interval_s: float = Field(default=RECONCILER_INTERVAL_S, gt=0)
    reconcile_after_s: float = Field(default=RECONCILE_AFTER_S, ge=0)
    reconciler_batch_size: int = Field(default=RECONCILER_BATCH_SIZE, ge=1, le=1_000)
    watch_poll_interval_s: float = Field(default=WATCH_POLL_INTERVAL_S, gt=0)
    watch_queue_size: int = Field(default=WATCH_QUEUE_SIZE, ge=1)
    watch_max_streams_per_player: int = Field(default=WATCH_MAX_STREAMS_PER_PLAYER, ge=1)
    presence_heartbeat_s: float = Field(default=PRESENCE_HEARTBEAT_S, gt=0)
