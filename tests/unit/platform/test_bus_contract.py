"""One contract for every bus: the in-process bus now, Kafka next (a subclass with a `bus` fixture).

Assertions wait with `eventually`, because a broker delivers after `publish` returns.
"""

import asyncio
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar

import psycopg
import pytest
from sqlalchemy.exc import OperationalError

from croupier_platform.bus import ROUND_EVENTS, BatchHandler, Bus, Handler, InProcessBus, RetryPolicy, dead_letter_topic
from croupier_platform.events import GENESIS_HASH, EventDraft, EventEnvelope, seal

TIMEOUT_SECONDS = 5.0
# Transient failures are retried for as long as they last; in tests, quickly.
FAST_RETRY = RetryPolicy(initial_s=0.01, max_s=0.05)


def envelope(stream_id: str, version: int = 1, event_type: str = "CardsDealt") -> EventEnvelope:
    draft = EventDraft(
        event_id=str(uuid.uuid4()),
        stream_id=stream_id,
        stream_type="round",
        version=version,
        event_type=event_type,
        schema_version=1,
        occurred_at="2024-05-01T12:00:00+00:00",
        payload={"version": version},
    )
    return seal(draft, GENESIS_HASH)  # the chain is not what these tests are about


async def eventually(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(TIMEOUT_SECONDS):
        while not condition():
            await asyncio.sleep(0.01)


def recorder(into: list[EventEnvelope]) -> Handler:
    async def handle(message: EventEnvelope) -> None:
        into.append(message)

    return handle


def batch_recorder(into: list[EventEnvelope], batches: list[int], fails: Callable[[EventEnvelope], bool]) -> BatchHandler:
    """A batch handler as Subscriber.on_batch behaves: in order, stopping at the first that fails."""

    async def handle(messages: Sequence[EventEnvelope]) -> tuple[int, BaseException | None]:
        batches.append(len(messages))
        for done, message in enumerate(messages):
            if fails(message):
                return done, ValueError("the settlement disagrees with the reserved stakes")
            into.append(message)
        return len(messages), None

    return handle


class BusContract(ABC):
    MAX_ATTEMPTS: ClassVar[int] = 3

    @pytest.fixture
    @abstractmethod
    def bus(self) -> Bus:
        """A bus, not yet started, that tries a failing handler MAX_ATTEMPTS times and retries a
        transient failure with FAST_RETRY."""

    @pytest.fixture
    @abstractmethod
    def new_bus(self) -> Callable[[], Bus]:
        """Makes another such bus on the same broker (and namespace) as `bus`: a restarted consumer."""

    def test_every_group_gets_every_message(self, bus: Bus) -> None:
        wallet: list[EventEnvelope] = []
        commission: list[EventEnvelope] = []
        messages = [envelope("round-1"), envelope("round-2")]

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", recorder(wallet))
            bus.subscribe(ROUND_EVENTS, "commission", recorder(commission))
            await bus.start()
            for message in messages:
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(wallet) == len(commission) == 2)
            await bus.stop()

        asyncio.run(scenario())

        # The port promises order per key only; two keys may be read in either order.
        by_id = lambda envelopes: sorted(envelopes, key=lambda m: m.event_id)  # noqa: E731
        assert by_id(wallet) == by_id(commission) == by_id(messages)

    def test_handlers_in_one_group_share_the_keys(self, bus: Bus) -> None:
        first: list[EventEnvelope] = []
        second: list[EventEnvelope] = []
        messages = [envelope(f"round-{n % 10}", version=n // 10 + 1) for n in range(40)]

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", recorder(first))
            bus.subscribe(ROUND_EVENTS, "wallet", recorder(second))
            await bus.start()
            for message in messages:
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(first) + len(second) == len(messages))
            await bus.stop()

        asyncio.run(scenario())

        assert sorted(m.event_id for m in first + second) == sorted(m.event_id for m in messages)
        assert first and second
        assert not {m.stream_id for m in first} & {m.stream_id for m in second}

    def test_messages_of_one_key_are_handled_in_order(self, bus: Bus) -> None:
        handled: list[EventEnvelope] = []
        messages = [envelope(f"round-{n % 3}", version=n // 3 + 1) for n in range(30)]

        async def slow_for_some(message: EventEnvelope) -> None:
            await asyncio.sleep(0.001 * (message.version % 3))  # lets later messages try to overtake
            handled.append(message)

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", slow_for_some)
            bus.subscribe(ROUND_EVENTS, "wallet", slow_for_some)
            await bus.start()
            await asyncio.gather(*(bus.publish(ROUND_EVENTS, m.stream_id, m) for m in messages))
            await eventually(lambda: len(handled) == len(messages))
            await bus.stop()

        asyncio.run(scenario())

        for key in {m.stream_id for m in messages}:
            versions = [m.version for m in handled if m.stream_id == key]
            assert versions == sorted(versions), key

    def test_a_handler_that_keeps_failing_is_retried_then_dead_lettered(self, bus: Bus) -> None:
        attempts: list[EventEnvelope] = []
        dead: list[EventEnvelope] = []
        others: list[EventEnvelope] = []
        poison = envelope("round-1")

        async def always_fail(message: EventEnvelope) -> None:
            attempts.append(message)
            raise ValueError("cannot settle this round")

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", always_fail)
            bus.subscribe(ROUND_EVENTS, "commission", recorder(others))
            bus.subscribe(dead_letter_topic(ROUND_EVENTS), "operators", recorder(dead))
            await bus.start()
            await bus.publish(ROUND_EVENTS, poison.stream_id, poison)
            await eventually(lambda: len(dead) == 1 and len(others) == 1)
            await bus.stop()

        asyncio.run(scenario())

        assert attempts == [poison] * self.MAX_ATTEMPTS
        assert dead == others == [poison]

    def test_a_handler_that_recovers_within_its_attempts_is_not_dead_lettered(self, bus: Bus) -> None:
        handled: list[EventEnvelope] = []
        dead: list[EventEnvelope] = []
        failures_left = [self.MAX_ATTEMPTS - 1]
        message = envelope("round-1")

        async def flaky(received: EventEnvelope) -> None:
            if failures_left[0]:
                failures_left[0] -= 1
                raise ConnectionError("database restarting")
            handled.append(received)

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", flaky)
            bus.subscribe(dead_letter_topic(ROUND_EVENTS), "operators", recorder(dead))
            await bus.start()
            await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(handled) == 1)
            await bus.stop()

        asyncio.run(scenario())

        assert handled == [message]
        assert dead == []

    def test_a_transient_failure_is_retried_past_max_attempts_and_applied_once(self, bus: Bus) -> None:
        applied: list[EventEnvelope] = []
        dead: list[EventEnvelope] = []
        calls: list[str] = []
        outage_tries = self.MAX_ATTEMPTS + 3  # more than would dead-letter a poison message
        first, second = envelope("round-1", version=1), envelope("round-1", version=2)

        async def database_restarting(received: EventEnvelope) -> None:
            calls.append(received.event_id)
            if calls.count(first.event_id) <= outage_tries:
                raise OperationalError("INSERT INTO tracking ...", {}, psycopg.OperationalError("connection failed"))
            applied.append(received)

        async def scenario() -> dict[str, int]:
            bus.subscribe(ROUND_EVENTS, "wallet", database_restarting)
            bus.subscribe(dead_letter_topic(ROUND_EVENTS), "operators", recorder(dead))
            await bus.start()
            publishing = asyncio.gather(*(bus.publish(ROUND_EVENTS, m.stream_id, m) for m in (first, second)))
            await eventually(lambda: len(applied) == 2)
            await publishing
            await asyncio.sleep(0.2)  # room for a duplicate or a dead letter to (wrongly) show up
            pending = await bus.pending_dead_letters()
            await bus.stop()
            return pending

        pending = asyncio.run(scenario())

        # Held the key: the second waited for the first, through every transient failure.
        assert calls == [first.event_id] * (outage_tries + 1) + [second.event_id]
        assert applied == [first, second]
        assert dead == []
        assert pending == {}

    def test_a_poison_message_is_dead_lettered_after_max_attempts_and_the_next_is_handled(self, bus: Bus) -> None:
        attempts: list[EventEnvelope] = []
        handled: list[EventEnvelope] = []
        dead: list[EventEnvelope] = []
        poison, after_it = envelope("round-1", version=1), envelope("round-1", version=2)

        async def refuses_the_poison(received: EventEnvelope) -> None:
            if received.event_id == poison.event_id:
                attempts.append(received)
                raise ValueError("the settlement disagrees with the reserved stakes")
            handled.append(received)

        async def scenario() -> dict[str, int]:
            bus.subscribe(ROUND_EVENTS, "wallet", refuses_the_poison)
            bus.subscribe(dead_letter_topic(ROUND_EVENTS), "operators", recorder(dead))
            await bus.start()
            for message in (poison, after_it):
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: handled == [after_it] and dead == [poison])
            pending = await bus.pending_dead_letters()
            await bus.stop()
            return pending

        pending = asyncio.run(scenario())

        assert attempts == [poison] * self.MAX_ATTEMPTS
        assert pending == {"wallet": 1}  # the operators' group reads the letters; it has none of its own


    def test_with_a_batch_handler_each_message_is_handled_once_in_order_per_key(self, bus: Bus) -> None:
        handled: list[EventEnvelope] = []
        batches: list[int] = []
        messages = [envelope(f"round-{n % 3}", version=n // 3 + 1) for n in range(30)]

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", recorder(handled), batch=batch_recorder(handled, batches, lambda _: False))
            await bus.start()
            await asyncio.gather(*(bus.publish(ROUND_EVENTS, m.stream_id, m) for m in messages))
            await eventually(lambda: len(handled) == len(messages))
            await asyncio.sleep(0.2)  # room for a duplicate to (wrongly) show up
            await bus.stop()

        asyncio.run(scenario())

        assert sorted(m.event_id for m in handled) == sorted(m.event_id for m in messages)
        for key in {m.stream_id for m in messages}:
            assert [m.version for m in handled if m.stream_id == key] == list(range(1, 11)), key

    def test_a_message_that_stops_a_batch_is_dead_lettered_alone_and_the_others_handled_once(self, bus: Bus) -> None:
        handled: list[EventEnvelope] = []
        batches: list[int] = []
        tries: list[EventEnvelope] = []
        dead: list[EventEnvelope] = []
        messages = [envelope("round-1", version=n) for n in range(1, 6)]
        poison = messages[2]

        def is_poison(message: EventEnvelope) -> bool:
            if message.event_id == poison.event_id:
                tries.append(message)
                return True
            return False

        async def alone(message: EventEnvelope) -> None:
            if is_poison(message):
                raise ValueError("the settlement disagrees with the reserved stakes")
            handled.append(message)

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", alone, batch=batch_recorder(handled, batches, is_poison))
            bus.subscribe(dead_letter_topic(ROUND_EVENTS), "operators", recorder(dead))
            await bus.start()
            await asyncio.gather(*(bus.publish(ROUND_EVENTS, m.stream_id, m) for m in messages))
            await eventually(lambda: len(handled) == 4 and len(dead) == 1)
            await asyncio.sleep(0.2)  # room for a duplicate to (wrongly) show up
            await bus.stop()

        asyncio.run(scenario())

        assert handled == [m for m in messages if m is not poison]  # in order, each once
        assert dead == [poison]
        assert tries == [poison] * self.MAX_ATTEMPTS  # its tries in a batch count toward the dead letter

    def test_events_of_types_a_subscriber_did_not_declare_are_never_handed_to_it(self, bus: Bus) -> None:
        settlements: list[EventEnvelope] = []
        everything: list[EventEnvelope] = []
        types = ["RoundOpened", "CardsDealt", "RoundSettled", "CardsDealt", "RoundVoided", "RoundOpened"]
        messages = [envelope("round-1", version=n + 1, event_type=t) for n, t in enumerate(types)]

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", recorder(settlements), event_types={"RoundSettled", "RoundVoided"})
            bus.subscribe(ROUND_EVENTS, "audit", recorder(everything))  # no declaration: every type
            await bus.start()
            for message in messages:
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(everything) == len(messages) and len(settlements) == 2)
            await asyncio.sleep(0.2)  # room for an undeclared type to (wrongly) show up
            await bus.stop()

        asyncio.run(scenario())

        assert everything == messages
        assert settlements == [messages[2], messages[4]]

    def test_a_transient_failure_in_a_batch_is_retried_from_that_message(self, bus: Bus) -> None:
        calls: list[int] = []
        applied: list[int] = []
        dead: list[EventEnvelope] = []
        messages = [envelope("round-1", version=n) for n in range(1, 7)]

        async def third_fails_for_a_while(received: EventEnvelope) -> None:
            calls.append(received.version)
            if received.version == 3 and calls.count(3) <= 3:
                raise ConnectionRefusedError("database restarting")
            applied.append(received.version)

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", third_fails_for_a_while)
            bus.subscribe(dead_letter_topic(ROUND_EVENTS), "operators", recorder(dead))
            await bus.start()
            # All at once, so a broker's consumer fetches them together.
            await asyncio.gather(*(bus.publish(ROUND_EVENTS, m.stream_id, m) for m in messages))
            await eventually(lambda: len(applied) == len(messages))
            await asyncio.sleep(0.2)  # room for a duplicate to (wrongly) show up
            await bus.stop()

        asyncio.run(scenario())

        # Retried from the failed message: neither what came before it again, nor anything after it first.
        assert calls == [1, 2, 3, 3, 3, 3, 4, 5, 6]
        assert applied == [1, 2, 3, 4, 5, 6]
        assert dead == []

    def test_nothing_is_lost_or_handled_twice_across_a_restart_in_the_middle_of_a_batch(
        self, bus: Bus, new_bus: Callable[[], Bus]
    ) -> None:
        messages = [envelope(f"round-{n % 3}", version=n // 3 + 1) for n in range(30)]
        tracking: set[str] = set()  # the consumer's tracking rows
        applied: list[EventEnvelope] = []
        deliveries: list[str] = []
        acknowledged: set[str] = set()  # what the outbox would mark published

        async def idempotent(received: EventEnvelope) -> None:
            deliveries.append(received.event_id)
            await asyncio.sleep(0.01)
            if received.event_id in tracking:
                return  # redelivered: its tracking row makes it a no-op
            tracking.add(received.event_id)
            applied.append(received)

        async def publish(on: Bus, message: EventEnvelope) -> None:
            await on.publish(ROUND_EVENTS, message.stream_id, message)
            acknowledged.add(message.event_id)

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", idempotent)
            await bus.start()
            publishing = asyncio.gather(*(publish(bus, m) for m in messages), return_exceptions=True)
            await eventually(lambda: len(applied) >= 10)
            await bus.stop()  # in the middle of the batch
            await publishing
            restarted = new_bus()
            restarted.subscribe(ROUND_EVENTS, "wallet", idempotent)
            await restarted.start()
            for message in messages:  # the outbox sends again whatever was not acknowledged
                if message.event_id not in acknowledged:
                    await publish(restarted, message)
            await eventually(lambda: len(applied) == len(messages))
            await asyncio.sleep(0.3)  # room for a duplicate to (wrongly) show up
            await restarted.stop()

        asyncio.run(scenario())

        assert sorted(m.event_id for m in applied) == sorted(m.event_id for m in messages)  # each once
        assert set(deliveries) == {m.event_id for m in messages}
        for key in {m.stream_id for m in messages}:
            versions = [m.version for m in applied if m.stream_id == key]
            assert versions == sorted(versions), key


class TestInProcessBus(BusContract):
    @pytest.fixture
    def bus(self) -> Bus:
        return InProcessBus(max_attempts=self.MAX_ATTEMPTS, retry=FAST_RETRY)

    @pytest.fixture
    def new_bus(self) -> Callable[[], Bus]:
        # Nothing in process outlives a bus: what it had not delivered, the outbox publishes again.
        return lambda: InProcessBus(max_attempts=self.MAX_ATTEMPTS, retry=FAST_RETRY)

    def test_a_stop_during_an_outage_makes_publish_fail_so_the_outbox_keeps_the_message(self, bus: Bus) -> None:
        message = envelope("round-1")

        async def database_down(_: EventEnvelope) -> None:
            raise ConnectionRefusedError("connection failed")

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", database_down)
            await bus.start()
            publishing = asyncio.ensure_future(bus.publish(ROUND_EVENTS, message.stream_id, message))
            await asyncio.sleep(0.1)
            assert not publishing.done()  # still retrying: transient is never dead-lettered
            await bus.stop()
            with pytest.raises(ConnectionRefusedError):
                await asyncio.wait_for(publishing, timeout=1)

        asyncio.run(scenario())
        assert asyncio.run(bus.pending_dead_letters()) == {}

    def test_publish_returns_once_every_group_has_handled_the_message(self, bus: Bus) -> None:
        handled: list[EventEnvelope] = []
        message = envelope("round-1")

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", recorder(handled))
            await bus.start()
            await bus.publish(ROUND_EVENTS, message.stream_id, message)
            assert handled == [message]  # the outbox may mark it published now

        asyncio.run(scenario())

    def test_each_group_gets_its_own_copy(self, bus: Bus) -> None:
        seen_by_commission: list[EventEnvelope] = []
        message = envelope("round-1")

        async def edit_payload(received: EventEnvelope) -> None:
            received.payload["version"] = 99

        async def scenario() -> None:
            bus.subscribe(ROUND_EVENTS, "wallet", edit_payload)
            bus.subscribe(ROUND_EVENTS, "commission", recorder(seen_by_commission))
            await bus.start()
            await bus.publish(ROUND_EVENTS, message.stream_id, message)

        asyncio.run(scenario())

        assert seen_by_commission == [message]
        assert message.payload == {"version": 1}

    def test_subscribing_after_start_and_publishing_before_it_are_refused(self, bus: Bus) -> None:
        message = envelope("round-1")

        async def scenario() -> None:
            with pytest.raises(RuntimeError, match=r"not running: publish after start\(\)"):
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await bus.start()
            with pytest.raises(RuntimeError, match=r"running: subscribe before start\(\)"):
                bus.subscribe(ROUND_EVENTS, "wallet", recorder([]))

        asyncio.run(scenario())
