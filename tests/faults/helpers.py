"""Helpers of the fault tests: counting what was lost or duplicated, streams of sends with
a fault in the middle, and a receiver that records deliveries and confirmed acks.

Every wait is bounded (``TIMEOUT``).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable, Sequence

import pulsar

import msgclient
from msgclient.embedded import PulsarBroker
from tests.faults.conftest import TIMEOUT
from tests.pulsar.helpers import official_client, receive, subscribe


def tally(values: Sequence[bytes], received: Sequence[bytes]) -> tuple[set[bytes], set[bytes]]:
    """(lost, duplicated) of ``values`` in what was ``received``."""
    counts = collections.Counter(received)
    unexpected = set(counts) - set(values)
    assert not unexpected, f"messages never sent: {sorted(unexpected)[:5]}"
    lost = {v for v in values if counts[v] == 0}
    duplicated = {v for v, n in counts.items() if n > 1}
    return lost, duplicated


def assert_in_send_order(values: Sequence[bytes], received: Sequence[bytes]) -> None:
    """The first copy of each message was stored in the order sent (a resend after a fault
    may add a later copy of one stored before it, never reorder)."""
    first = list(dict.fromkeys(received))
    assert first == list(values), next(
        (i, a, b) for i, (a, b) in enumerate(zip(first, values, strict=False)) if a != b
    )


async def read_all(broker: PulsarBroker, topic: str, at_least: int) -> list[bytes]:
    """Every message stored on ``topic`` (official client, Shared from earliest): at least
    ``at_least``, then whatever comes until 500 ms pass quietly."""
    with official_client(broker.service_url) as official:
        consumer = subscribe(official, topic, "audit")
        messages = [m.data() for m in await receive(consumer, at_least)]
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                message = await asyncio.to_thread(consumer.receive, 500)
            except pulsar.Timeout:
                return messages
            consumer.acknowledge(message)
            messages.append(message.data())
        raise AssertionError(f"messages kept coming for {TIMEOUT:g} s")


class Stream:
    """Sends ``values`` through ``producer`` at a steady pace, running ``fault`` once after
    ``fault_at`` of them; notes what was unconfirmed at that moment."""

    def __init__(self, values: Sequence[bytes], fault_at: int, fault: Callable[[], None]) -> None:
        self.values = values
        self.fault_at = fault_at
        self.fault = fault
        self.futures: list[asyncio.Future[msgclient.MessageId]] = []
        self.faulted_at = 0.0
        self.unconfirmed: set[bytes] = set()

    async def run(self, producer: msgclient.Producer) -> list[msgclient.MessageId | BaseException]:
        for i, value in enumerate(self.values):
            self.futures.append(await producer.send_async(value))
            if i == self.fault_at:
                self.faulted_at = time.monotonic()
                self.fault()
                self.unconfirmed = {
                    self.values[j] for j, f in enumerate(self.futures) if not f.done()
                }
            if i % 10 == 0:
                await asyncio.sleep(0.005)  # a steady stream, not one burst
        return await asyncio.wait_for(
            asyncio.gather(*self.futures, return_exceptions=True), TIMEOUT
        )


async def produce_direct(broker: PulsarBroker, topic: str, values: Sequence[bytes]) -> None:
    """Publish ``values`` unbatched (one entry each) with msgclient, straight to the broker."""
    async with msgclient.Client(broker.service_url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        futures = [await producer.send_async(v) for v in values]
        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)


def assert_acks_final(receiver: AckedReceiver, fault_at: float) -> None:
    """An ack the broker confirmed before the fault is final: that message never comes
    back. Acks made before the fault but sent only after the reconnect may be confirmed
    and still ignored (pulsar-lite quirk: "acks for messages that are awaiting redelivery
    are ignored"): the fault put every unacknowledged message in that state, so those
    messages may come back once more; none comes back twice."""
    assert not receiver.redelivered_after_confirmed_ack(fault_at)
    deliveries = collections.Counter(v for v, _ in receiver.deliveries)
    assert max(deliveries.values()) <= 2, deliveries.most_common(3)


class AckedReceiver:
    """Receives with a consumer, acknowledging each message with a receipt; records when
    each ack was confirmed and every delivery, to find redeliveries after a confirmed ack."""

    def __init__(self, consumer: msgclient.Consumer, pace: float = 0.0) -> None:
        self.consumer = consumer
        self.pace = pace  # seconds spent on each message
        self.deliveries: list[tuple[bytes, float]] = []
        self.ack_confirmed: dict[bytes, float] = {}
        self.ack_failed: set[bytes] = set()
        self._acks: set[asyncio.Future[None]] = set()

    async def until(self, unique: int, on: Callable[[int], None] | None = None) -> None:
        """Receive until ``unique`` distinct messages came; ``on(n)`` after the n-th
        delivery."""
        deadline = time.monotonic() + TIMEOUT
        while len({v for v, _ in self.deliveries}) < unique:
            remaining = int((deadline - time.monotonic()) * 1000)
            assert remaining > 0, f"{len(self.deliveries)} deliveries, {unique} expected"
            message = await self.consumer.receive(timeout_millis=remaining)
            self._take(message)
            if on is not None:
                on(len(self.deliveries))
            if self.pace:
                await asyncio.sleep(self.pace)

    async def drain(self, quiet_ms: int = 600) -> None:
        """Receive until nothing comes for ``quiet_ms``; then wait for the ack receipts."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                message = await self.consumer.receive(timeout_millis=quiet_ms)
            except msgclient.ReceiveTimeoutError:
                break
            self._take(message)
        else:
            raise AssertionError(f"messages kept coming for {TIMEOUT:g} s")
        if self._acks:
            await asyncio.wait(self._acks, timeout=TIMEOUT)

    def _take(self, message: msgclient.Message) -> None:
        value = message.data()
        self.deliveries.append((value, time.monotonic()))
        ack = self.consumer.acknowledge(message)
        self._acks.add(ack)

        def done(future: asyncio.Future[None]) -> None:
            self._acks.discard(future)
            if future.cancelled() or future.exception() is not None:
                self.ack_failed.add(value)
            else:
                self.ack_confirmed.setdefault(value, time.monotonic())

        ack.add_done_callback(done)

    def redelivered_after_confirmed_ack(self, confirmed_before: float) -> list[bytes]:
        """Messages delivered again after the broker confirmed their ack, of those whose
        ack it confirmed before ``confirmed_before``."""
        return [
            v
            for v, at in self.deliveries
            if v in self.ack_confirmed
            and at > self.ack_confirmed[v]
            and self.ack_confirmed[v] < confirmed_before
        ]

    def duplicates(self) -> int:
        return len(self.deliveries) - len({v for v, _ in self.deliveries})
