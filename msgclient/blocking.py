"""A blocking facade over the async API, for code that does not run an event loop.

``msgclient.blocking.Client`` has the same names as ``msgclient.Client``; it runs the
async client on an event loop in a background thread of its own and waits for results.
Send callbacks run on that thread; message listeners (``subscribe(...,
message_listener=fn)``) run on listener threads of their own.

Every blocking call can be interrupted by Ctrl-C: the KeyboardInterrupt is raised in the
caller's thread and the operation is cancelled on the loop, so the client stays usable (a
``receive`` interrupted this way leaves the next message to the next ``receive``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack, overload

from msgclient import client as async_client
from msgclient import consumer as async_consumer
from msgclient import producer as async_producer
from msgclient import reader as async_reader
from msgclient import transaction as async_transaction
from msgclient.admin.blocking import BlockingAdmin
from msgclient.closing import Closing
from msgclient.core.network.cluster_failover import (
    AutoClusterFailover,
    ServiceInfo,
    ServiceInfoProvider,
)
from msgclient.errors import InvalidConfigurationError
from msgclient.loop_thread import ListenerThreads, LoopThread, on_loop
from msgclient.message import Message, MessageId, SendCallback
from msgclient.message_batch import MessageBatch
from msgclient.options import InitialPosition
from msgclient.producer import MessageOptions
from msgclient.sent_messages import SentMessages
from msgclient.stats import ClientStats, ConsumerStats, ProducerStats

T = TypeVar("T")

MessageListener = Callable[["Consumer", Message], None]


class Client(Closing):
    """Blocking client: ``Client("pulsar://localhost:6650", **options)``.

    ``message_listener_threads`` (default 1) is the number of threads that run the
    consumers' message listeners; the other options are those of ``msgclient.Client``.
    """

    def __init__(
        self,
        service_url: str | AutoClusterFailover | ServiceInfoProvider,
        *,
        message_listener_threads: int = 1,
        **options: Any,
    ) -> None:
        self._listener_threads = ListenerThreads(message_listener_threads)
        self._runner = LoopThread()
        try:
            # Made on the loop's thread: adapters may take the running loop when they are
            # built (the Kafka adapter's metadata lookup does).
            self._client = self._runner.run(_new_client(service_url, options))
        except BaseException:
            self._runner.stop()
            raise
        self._when_dropped = self._runner.close_when_dropped(self._client, self._listener_threads)

    @property
    def service_info(self) -> ServiceInfo:
        """The cluster in use (see ``msgclient.Client.service_info``)."""
        return self._client.service_info

    def create_producer(self, topic: str, **options: Any) -> Producer:
        producer = self._runner.run(self._client.create_producer(topic, **options))
        return Producer(producer, self._runner)

    def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        *,
        message_listener: MessageListener | None = None,
        **options: Any,
    ) -> Consumer:
        """Subscribe (options as the async ``subscribe``). With ``message_listener``, each
        message is passed to ``message_listener(consumer, message)`` on a listener thread,
        one at a time and in order, and ``receive`` is not allowed."""
        if message_listener is None:
            consumer = self._runner.run(self._client.subscribe(topic, subscription_name, **options))
            return Consumer(consumer, self._runner)
        if not callable(message_listener):
            raise InvalidConfigurationError(
                f"option message_listener={message_listener!r} is invalid: expected a callable"
            )
        return self._runner.run(
            self._subscribe_with_listener(
                topic, subscription_name, message_listener, self._listener_threads.pick(), options
            )
        )

    async def _subscribe_with_listener(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        listener: MessageListener,
        thread: concurrent.futures.ThreadPoolExecutor,
        options: dict[str, Any],
    ) -> Consumer:
        # The async consumer calls on_loop for each message, one at a time; on_loop hands it
        # to the listener thread and waits for the listener to return.
        facades: list[Consumer] = []

        async def on_loop(_: async_consumer.Consumer, message: Message) -> None:
            await asyncio.wrap_future(thread.submit(listener, facades[0], message))

        consumer = await self._client.subscribe(
            topic, subscription_name, message_listener=on_loop, **options
        )
        # Made before this coroutine yields to the loop, so before the first on_loop call.
        facades.append(Consumer(consumer, self._runner))
        return facades[0]

    def create_reader(
        self, topic: str, start_message_id: MessageId | InitialPosition, **options: Any
    ) -> Reader:
        reader = self._runner.run(self._client.create_reader(topic, start_message_id, **options))
        return Reader(reader, self._runner)

    def get_topic_partitions(self, topic: str) -> list[str]:
        return self._runner.run(self._client.get_topic_partitions(topic))

    def new_transaction(self, *, transactional_id: str | None = None) -> Transaction:
        """As the async ``new_transaction`` (docs/transactions.md)."""
        transaction = self._runner.run(
            self._client.new_transaction(transactional_id=transactional_id)
        )
        return Transaction(transaction, self._runner)

    def commit_prepared(self, prepared: async_transaction.PreparedTransaction) -> None:
        """As the async ``commit_prepared``."""
        self._runner.run(self._client.commit_prepared(prepared))

    def abort_prepared(self, prepared: async_transaction.PreparedTransaction) -> None:
        """As the async ``abort_prepared``."""
        self._runner.run(self._client.abort_prepared(prepared))

    def stats(self) -> ClientStats:
        return self._runner.snapshot(self._client.stats)

    def admin(self) -> BlockingAdmin:
        """Topics, configs, consumer groups and offsets (``msgclient.admin``), blocking."""
        return BlockingAdmin(self._client.admin(), self._runner)

    def close(self) -> None:
        self._when_dropped.detach()
        try:
            self._runner.run(self._client.close())
        finally:
            self._runner.stop()
            self._listener_threads.shutdown()


class Producer(Closing):
    """Blocking producer; ``send_async`` returns a ``concurrent.futures.Future``."""

    def __init__(self, producer: async_producer.Producer, runner: LoopThread) -> None:
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

    def is_connected(self) -> bool:
        return self._producer.is_connected()

    def stats(self) -> ProducerStats:
        return self._runner.snapshot(self._producer.stats)

    def send(
        self,
        value: bytes | bytearray | memoryview | None,
        **message_options: Unpack[MessageOptions],
    ) -> MessageId:
        """Send and wait for the broker's confirmation (options as the async ``send``)."""
        return self._runner.run(self._producer.send(value, **_unwrapped(message_options)))

    @overload
    def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: None = None,
        **message_options: Unpack[MessageOptions],
    ) -> concurrent.futures.Future[MessageId]: ...

    @overload
    def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: SendCallback,
        **message_options: Unpack[MessageOptions],
    ) -> None: ...

    def send_async(
        self,
        value: bytes | bytearray | memoryview | None,
        callback: SendCallback | None = None,
        **message_options: Unpack[MessageOptions],
    ) -> concurrent.futures.Future[MessageId] | None:
        """Queue a message; blocks only while the queue is full (block_if_queue_full).
        Given a callback (called on the client's event loop thread), nothing is returned,
        as the async ``send_async``."""
        enqueued = self._runner.run(
            self._producer.send_async(value, callback, **_unwrapped(message_options))
        )
        if enqueued is None:
            return None
        result: concurrent.futures.Future[MessageId] = concurrent.futures.Future()
        self._runner.loop.call_soon_threadsafe(_chain, enqueued, result)
        return result

    def send_many(
        self,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[str | bytes | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_timestamps: Sequence[int | None] | None = None,
        partition: int | None = None,
    ) -> SentMessages:
        """As the async ``send_many``: every value confirmed when it returns."""
        return self._runner.run(
            self._producer.send_many(
                values,
                keys=keys,
                properties=properties,
                event_timestamps=event_timestamps,
                partition=partition,
            )
        )

    def send_many_async(
        self,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[str | bytes | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        event_timestamps: Sequence[int | None] | None = None,
        partition: int | None = None,
    ) -> concurrent.futures.Future[SentMessages]:
        """As the async ``send_many_async``: returns once every batch is queued (a next
        call's messages come after these), a future of their confirmation."""
        queued = self._runner.run(
            self._producer.send_many_async(
                values,
                keys=keys,
                properties=properties,
                event_timestamps=event_timestamps,
                partition=partition,
            )
        )
        result: concurrent.futures.Future[SentMessages] = concurrent.futures.Future()
        self._runner.loop.call_soon_threadsafe(_chain, queued, result)
        return result

    def flush(self) -> None:
        self._runner.run(self._producer.flush())

    def begin_transaction(self) -> Transaction:
        transaction = self._runner.run(on_loop(self._producer.begin_transaction))
        return Transaction(transaction, self._runner)

    def commit_transaction(self) -> None:
        self._runner.run(self._producer.commit_transaction())

    def abort_transaction(self) -> None:
        self._runner.run(self._producer.abort_transaction())

    def send_offsets_to_transaction(
        self, consumer: Consumer, messages: Message | MessageBatch | Iterable[Message]
    ) -> None:
        self._runner.run(self._producer.send_offsets_to_transaction(consumer.inner, messages))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """``with producer.transaction():`` commits at the end, or aborts if it raises."""
        with self.begin_transaction() as transaction:
            yield transaction

    def close(self) -> None:
        self._runner.run(self._producer.close())


class Transaction:
    """Blocking transaction: ``commit``, ``abort``; ``with`` commits or aborts."""

    def __init__(self, transaction: async_transaction.Transaction, runner: LoopThread) -> None:
        self.inner = transaction
        self._runner = runner

    @property
    def state(self) -> async_transaction.TransactionState:
        return self.inner.state

    def commit(self) -> None:
        self._runner.run(self.inner.commit())

    def abort(self) -> None:
        self._runner.run(self.inner.abort())

    def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        self._runner.run(on_loop(lambda: self.inner.commit_offsets(group_id, offsets)))

    def prepare(self) -> async_transaction.PreparedTransaction | None:
        return self._runner.run(self.inner.prepare())

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        error_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._runner.run(self.inner.__aexit__(error_type, error, traceback))


class Consumer(Closing):
    """Blocking consumer with the names of the async one."""

    def __init__(self, consumer: async_consumer.Consumer, runner: LoopThread) -> None:
        self._consumer = consumer
        self._runner = runner

    @property
    def topic(self) -> str:
        return self._consumer.topic

    @property
    def subscription_name(self) -> str:
        return self._consumer.subscription_name

    @property
    def consumer_name(self) -> str:
        return self._consumer.consumer_name

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    def stats(self) -> ConsumerStats:
        return self._runner.snapshot(self._consumer.stats)

    def receive(self, timeout_millis: int | None = None) -> Message:
        return self._runner.run(self._consumer.receive(timeout_millis))

    def __iter__(self) -> Iterator[Message]:
        while True:
            yield self.receive()

    def batch_receive(self) -> list[Message]:
        return self._runner.run(self._consumer.batch_receive())

    @property
    def inner(self) -> async_consumer.Consumer:
        """The async consumer this one drives."""
        return self._consumer

    def acknowledge(
        self, message: Message | MessageId | MessageBatch, transaction: Transaction | None = None
    ) -> None:
        """Queue the ack (waits for the broker's confirmation with ack receipts on); with a
        ``transaction``, it takes effect when that commits."""
        if transaction is not None:
            inner = transaction.inner
            self._runner.run(on_loop(lambda: self._consumer.acknowledge(message, inner)))
            return
        self._runner.run(_ack(self._consumer.acknowledge, message))

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._runner.run(_ack(self._consumer.acknowledge_cumulative, message))

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._runner.loop.call_soon_threadsafe(self._consumer.negative_acknowledge, message)

    def redeliver_unacknowledged_messages(self) -> None:
        """As the async one; done on the loop, so acks made before it are seen first."""
        self._runner.run(on_loop(self._consumer.redeliver_unacknowledged_messages))

    def reconsume_later(
        self, message: Message, delay_ms: int, properties: Mapping[str, str] | None = None
    ) -> None:
        self._runner.run(self._consumer.reconsume_later(message, delay_ms, properties))

    def pause_message_listener(self) -> None:
        """Stop delivering to the listener (and asking the broker for more) until
        ``resume_message_listener``; a message already with the listener finishes."""
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

    def __init__(self, reader: async_reader.Reader, runner: LoopThread) -> None:
        self._reader = reader
        self._runner = runner

    @property
    def topic(self) -> str:
        return self._reader.topic

    def is_connected(self) -> bool:
        return self._reader.is_connected()

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


def _unwrapped(options: MessageOptions) -> MessageOptions:
    """The options with a blocking Transaction replaced by the async one it drives."""
    transaction: Any = options.get("transaction")
    if isinstance(transaction, Transaction):
        return {**options, "transaction": transaction.inner}
    return options


async def _new_client(
    service_url: str | AutoClusterFailover | ServiceInfoProvider, options: dict[str, Any]
) -> async_client.Client:
    return async_client.Client(service_url, **options)


async def _ack(
    ack: Callable[[Any], asyncio.Future[None]], message: Message | MessageId | MessageBatch
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
