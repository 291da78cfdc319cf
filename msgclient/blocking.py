"""A blocking facade over the async API, for code that does not run an event loop.

``msgclient.blocking.Client`` has the same names as ``msgclient.Client``; it runs the
async client on an event loop in a background thread of its own and waits for results.
Callbacks run on that thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar, Unpack

from msgclient import client as async_client
from msgclient import consumer as async_consumer
from msgclient import producer as async_producer
from msgclient import reader as async_reader
from msgclient.closing import Closing
from msgclient.consumer import ConsumerStats
from msgclient.message import Message, MessageId, SendCallback
from msgclient.options import InitialPosition
from msgclient.producer import MessageOptions

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="msgclient-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class Client(Closing):
    """Blocking client: ``Client("pulsar://localhost:6650", **options)``."""

    def __init__(self, service_url: str, **options: Any) -> None:
        self._runner = _LoopThread()
        try:
            # Made on the loop's thread: adapters may take the running loop when they are
            # built (the Kafka adapter's metadata lookup does).
            self._client = self._runner.run(_new_client(service_url, options))
        except BaseException:
            self._runner.stop()
            raise

    def create_producer(self, topic: str, **options: Any) -> Producer:
        producer = self._runner.run(self._client.create_producer(topic, **options))
        return Producer(producer, self._runner)

    def subscribe(self, topic: str | list[str], subscription_name: str, **options: Any) -> Consumer:
        consumer = self._runner.run(self._client.subscribe(topic, subscription_name, **options))
        return Consumer(consumer, self._runner)

    def create_reader(
        self, topic: str, start_message_id: MessageId | InitialPosition, **options: Any
    ) -> Reader:
        reader = self._runner.run(self._client.create_reader(topic, start_message_id, **options))
        return Reader(reader, self._runner)

    def get_topic_partitions(self, topic: str) -> list[str]:
        return self._runner.run(self._client.get_topic_partitions(topic))

    def close(self) -> None:
        try:
            self._runner.run(self._client.close())
        finally:
            self._runner.stop()


class Producer(Closing):
    """Blocking producer; ``send_async`` returns a ``concurrent.futures.Future``."""

    def __init__(self, producer: async_producer.Producer, runner: _LoopThread) -> None:
        self._producer = producer
        self._runner = runner

    @property
    def topic(self) -> str:
        return self._producer.topic

    @property
    def producer_name(self) -> str:
        return self._producer.producer_name

    @property
    def last_sequence_id(self) -> int:
        return self._producer.last_sequence_id

    def send(
        self, value: bytes | bytearray | memoryview, **message_options: Unpack[MessageOptions]
    ) -> MessageId:
        """Send and wait for the broker's confirmation (options as the async ``send``)."""
        return self._runner.run(self._producer.send(value, **message_options))

    def send_async(
        self,
        value: bytes | bytearray | memoryview,
        callback: SendCallback | None = None,
        **message_options: Unpack[MessageOptions],
    ) -> concurrent.futures.Future[MessageId]:
        """Queue a message; blocks only while the queue is full (block_if_queue_full)."""
        enqueued = self._runner.run(self._producer.send_async(value, callback, **message_options))
        result: concurrent.futures.Future[MessageId] = concurrent.futures.Future()
        self._runner.loop.call_soon_threadsafe(_chain, enqueued, result)
        return result

    def flush(self) -> None:
        self._runner.run(self._producer.flush())

    def close(self) -> None:
        self._runner.run(self._producer.close())


class Consumer(Closing):
    """Blocking consumer with the names of the async one."""

    def __init__(self, consumer: async_consumer.Consumer, runner: _LoopThread) -> None:
        self._consumer = consumer
        self._runner = runner

    @property
    def topic(self) -> str:
        return self._consumer.topic

    @property
    def subscription_name(self) -> str:
        return self._consumer.subscription_name

    @property
    def stats(self) -> ConsumerStats:
        return self._consumer.stats

    def receive(self, timeout_millis: int | None = None) -> Message:
        return self._runner.run(self._consumer.receive(timeout_millis))

    def __iter__(self) -> Iterator[Message]:
        while True:
            yield self.receive()

    def batch_receive(self) -> list[Message]:
        return self._runner.run(self._consumer.batch_receive())

    def acknowledge(self, message: Message | MessageId) -> None:
        """Queue the ack (waits for the broker's confirmation with ack receipts on)."""
        self._runner.run(_ack(self._consumer.acknowledge, message))

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._runner.run(_ack(self._consumer.acknowledge_cumulative, message))

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._runner.loop.call_soon_threadsafe(self._consumer.negative_acknowledge, message)

    def reconsume_later(
        self, message: Message, delay_ms: int, properties: Mapping[str, str] | None = None
    ) -> None:
        self._runner.run(self._consumer.reconsume_later(message, delay_ms, properties))

    def pause_message_listener(self) -> None:
        self._runner.loop.call_soon_threadsafe(self._consumer.pause_message_listener)

    def resume_message_listener(self) -> None:
        self._runner.loop.call_soon_threadsafe(self._consumer.resume_message_listener)

    def get_last_message_id(self) -> MessageId | None:
        return self._runner.run(self._consumer.get_last_message_id())

    def has_reached_end_of_topic(self) -> bool:
        return self._consumer.has_reached_end_of_topic()

    def seek(self, position: MessageId | int) -> None:
        self._runner.run(self._consumer.seek(position))

    def unsubscribe(self) -> None:
        self._runner.run(self._consumer.unsubscribe())

    def close(self) -> None:
        self._runner.run(self._consumer.close())


class Reader(Closing):
    """Blocking reader with the names of the async one."""

    def __init__(self, reader: async_reader.Reader, runner: _LoopThread) -> None:
        self._reader = reader
        self._runner = runner

    @property
    def topic(self) -> str:
        return self._reader.topic

    def read_next(self, timeout_millis: int | None = None) -> Message:
        return self._runner.run(self._reader.read_next(timeout_millis))

    def __iter__(self) -> Iterator[Message]:
        while True:
            yield self.read_next()

    def has_message_available(self) -> bool:
        return self._runner.run(self._reader.has_message_available())

    def seek(self, position: MessageId | int) -> None:
        self._runner.run(self._reader.seek(position))

    def close(self) -> None:
        self._runner.run(self._reader.close())


async def _new_client(service_url: str, options: dict[str, Any]) -> async_client.Client:
    return async_client.Client(service_url, **options)


async def _ack(
    ack: Callable[[Message | MessageId], asyncio.Future[None]], message: Message | MessageId
) -> None:
    await ack(message)


def _chain(source: asyncio.Future[T], target: concurrent.futures.Future[T]) -> None:
    def copy(done: asyncio.Future[T]) -> None:
        if done.cancelled():
            target.cancel()
        elif done.exception() is not None:
            target.set_exception(done.exception())
        else:
            target.set_result(done.result())

    source.add_done_callback(copy)
