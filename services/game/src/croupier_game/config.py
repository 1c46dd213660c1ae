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
KEEPER_INTERVAL_ENV = "CROUPIER_KEEPER_INTERVAL_S"
STUCK_ROUND_VOID_AFTER_ENV = "CROUPIER_STUCK_ROUND_VOID_AFTER_S"
KEEPER_INTERVAL_S = 1.0
STUCK_ROUND_VOID_AFTER_S = 300.0


def tables_file(explicit: Path | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """An explicit path first, then $CROUPIER_TABLES, then the catalogue shipped with the service."""
    if explicit is not None:
        return explicit
    if environ.get(TABLES_ENV):
        return Path(environ[TABLES_ENV])
    return DEFAULT_TABLES_FILE


class KeeperSettings(BaseSettings):
    """$CROUPIER_KEEPER_INTERVAL_S and $CROUPIER_STUCK_ROUND_VOID_AFTER_S (seconds, may be fractional)."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore")

    keeper_interval_s: float = Field(default=KEEPER_INTERVAL_S, gt=0)
    stuck_round_void_after_s: float = Field(default=STUCK_ROUND_VOID_AFTER_S, gt=0)


def keeper_settings(
    interval_s: float | None = None, stuck_round_void_after_s: float | None = None
) -> KeeperSettings:
    """Explicit values (bootstrap's keyword arguments) first, then the environment, then the defaults."""
    explicit = {
        name: value
        for name, value in (("keeper_interval_s", interval_s), ("stuck_round_void_after_s", stuck_round_void_after_s))
        if value is not None
    }
    return KeeperSettings(**explicit)


# The reconciler (application/reconciler.py): how often it looks, how long after a round ended its
# consumers may still be applying it before the reconciler re-drives it, and how many rounds a pass takes.
RECONCILER_INTERVAL_S = 5.0
RECONCILE_AFTER_S = 30.0
RECONCILER_BATCH_SIZE = 500


class ReconcilerSettings(BaseSettings):
    """$CROUPIER_RECONCILER_INTERVAL_S, $CROUPIER_RECONCILE_AFTER_S (seconds, may be fractional) and
    $CROUPIER_RECONCILER_BATCH_SIZE."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore")

    reconciler_interval_s: float = Field(default=RECONCILER_INTERVAL_S, gt=0)
    reconcile_after_s: float = Field(default=RECONCILE_AFTER_S, ge=0)
    reconciler_batch_size: int = Field(default=RECONCILER_BATCH_SIZE, ge=1, le=1_000)


# Live streams (application/feed.py, watching.py): how often the log feed looks for what other replicas
# wrote (this process's commits wake it at once), how many events may wait for one stream before it is
# dropped as too slow, how many streams one player may hold open, and how often an open WatchSeat
# stream refreshes its seat's presence (never less often than a third of the shortest presence grace).
WATCH_POLL_INTERVAL_S = 0.1
WATCH_QUEUE_SIZE = 256
WATCH_MAX_STREAMS_PER_PLAYER = 16
PRESENCE_HEARTBEAT_S = 5.0


class WatchSettings(BaseSettings):
    """$CROUPIER_WATCH_POLL_INTERVAL_S, $CROUPIER_WATCH_QUEUE_SIZE, $CROUPIER_WATCH_MAX_STREAMS_PER_PLAYER,
    $CROUPIER_PRESENCE_HEARTBEAT_S."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore")

    watch_poll_interval_s: float = Field(default=WATCH_POLL_INTERVAL_S, gt=0)
    watch_queue_size: int = Field(default=WATCH_QUEUE_SIZE, ge=1)
    watch_max_streams_per_player: int = Field(default=WATCH_MAX_STREAMS_PER_PLAYER, ge=1)
    presence_heartbeat_s: float = Field(default=PRESENCE_HEARTBEAT_S, gt=0)


class GameSettings(KeeperSettings, ReconcilerSettings, WatchSettings):
    """All the game's settings, what `bootstrap(ctx, settings)` takes: the above and $CROUPIER_TABLES (the
    table catalogue; None: the one shipped with the service), $CROUPIER_RELAY_POLL_INTERVAL_S and
    $CROUPIER_ROUND_RELAY_DELAY_S."""

    tables: Path | None = None
    relay_poll_interval_s: float = Field(default=RELAY_POLL_INTERVAL_S, gt=0)
    round_relay_delay_s: float = Field(default=RELAY_DELAY_S, ge=0, le=1)
