"""Consumer: the public async consumer over one or many topics and partitions."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping

from msgclient.closing import AsyncClosing
from msgclient.core.receive.message_listener import MessageListenerRunner
from msgclient.core.receive.partition_consumer import PartitionConsumer
from msgclient.core.receive.receive_queue import ReceiveQueue
from msgclient.errors import (
    AlreadyClosedError,
    InvalidConfigurationError,
    NotSupportedError,
    ReceiveTimeoutError,
)
from msgclient.message import Message, MessageId, TopicMessageId
from msgclient.message_batch import MessageBatch, MessageBlock, message_ids, topic_name
from msgclient.options import ConsumerOptions, ConsumerType, SubscriptionMode
from msgclient.stats import ConsumerStats
from msgclient.transaction import Transaction
from msgclient.validators import check_non_negative, check_timeout


class Consumer(AsyncClosing):
    """Receives messages of a subscription; build it with ``Client.subscribe``.

    ``acknowledge`` and ``acknowledge_cumulative`` return a future: with
    ``ack_receipt_enabled`` it completes when the broker confirms; without, once the ack
    is sent (awaiting it is optional).
    """

    def __init__(
        self,
        topics: list[str],
        subscription_name: str,
        options: ConsumerOptions,
        partitions: list[PartitionConsumer],
        queue: ReceiveQueue[Message],
        on_closed: Callable[[Consumer], None],
        *,
        pattern: str | None = None,
    ) -> None:
        self.topics = topics
        # A pattern subscription's members come and go (add_partitions, remove_topics):
        # no fast path may keep one.
        self.pattern = pattern
        self._stop_discovery: Callable[[], Awaitable[None]] | None = None
        self._release: Callable[[], Awaitable[None]] | None = None
        self.subscription_name = subscription_name
        self._options = options
        self._partitions = partitions
        self._by_topic = {p.topic: p for p in partitions}
        # Fast paths of the common consumer: one partition, no ack timeout.
        self._single = partitions[0] if len(partitions) == 1 and pattern is None else None
        self._single_ack = self._single.acknowledger() if self._single is not None else None
        self._track_delivery = options.unacked_messages_timeout_ms > 0
        # Whole dispatches acknowledged by one id each: not while acks must also settle
        # per-message state (the ack timeout's and the dead letters' trackers).
        self._acks_by_dispatch = not self._track_delivery and options.dead_letter_policy is None
        self._queue = queue
        self._on_closed = on_closed
        self._zero_queue = options.receiver_queue_size == 0
        self._closed = False
        self._listener: MessageListenerRunner[Message] | None = None
        if options.message_listener is not None:
            self._listener = MessageListenerRunner(
                options.message_listener,
                self,
                queue,
                self._delivered,
                partitions[0].window.request_one if self._zero_queue else None,
            )
            self._listener.start()

    @property
    def topic(self) -> str:
        """The topic (the first of several), or the pattern of a pattern subscription."""
        return self.topics[0] if self.pattern is None else self.pattern

    # -- a pattern subscription's changing members ------------------------------------

    def add_partitions(self, topic: str, partitions: list[PartitionConsumer]) -> None:
        """Members of a topic that started to match, already started on the shared queue."""
        self._partitions += partitions
        self._by_topic.update((p.topic, p) for p in partitions)
        self.topics = sorted({*self.topics, topic})

    async def remove_topics(self, topics: list[str]) -> None:
        """Close the members of topics that stopped matching (deleted): their queued
        messages go, the broker keeps nothing of a deleted topic to redeliver."""
        gone = set(topics)
        leaving = [p for p in self._partitions if p.destination in gone]
        self._partitions = [p for p in self._partitions if p.destination not in gone]
        for partition in leaving:
            del self._by_topic[partition.topic]
        self.topics = [t for t in self.topics if t not in gone]
        await asyncio.gather(*(p.close() for p in leaving))

    def attach_discovery(
        self, stop: Callable[[], Awaitable[None]], release: Callable[[], Awaitable[None]]
    ) -> None:
        """At close, ``stop`` (the topic discovery) runs before the members close, so none
        is added meanwhile, and ``release`` (what the subscription shares) after them."""
        self._stop_discovery, self._release = stop, release

    @property
    def consumer_name(self) -> str:
        """The name sent in SUBSCRIBE (10 random hex characters unless one was given, as
        the official client), the same on every partition."""
        return self._options.consumer_name

    def is_connected(self) -> bool:
        """Whether every partition's subscription is registered on an open connection."""
        return not self._closed and all(p.is_connected for p in self._partitions)

    def stats(self) -> ConsumerStats:
        """A snapshot of the consumer's counters, summed and per partition
        (docs/metrics.md)."""
        return ConsumerStats.of(
            self.subscription_name,
            [p.stats() for p in self._partitions],
            len(self._queue),
            self._partitions[0].transport.rebalances if self._partitions else 0,
        )

    def has_reached_end_of_topic(self) -> bool:
        """Whether the topic was terminated and everything in it was delivered."""
        return all(p.reached_end_of_topic for p in self._partitions)

    @property
    def is_active(self) -> bool | None:
        """Failover: whether this consumer is the active one (None until the broker says)."""
        return self._partitions[0].is_active if self._partitions else None

    # -- receiving ----------------------------------------------------------------------

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; ReceiveTimeoutError if none arrives within the timeout."""
        if self._closed:
            raise AlreadyClosedError(f"consumer of {self.subscription_name} is closed")
        if self._listener is not None:
            self._check_no_listener("receive")
        if timeout_millis is not None and (type(timeout_millis) is not int or timeout_millis < 0):
            check_timeout("timeout_millis", timeout_millis)  # raises, naming the problem
        message = self._queue.get_nowait()
        if message is None:
            if self._zero_queue:
                self._partitions[0].window.request_one()
            try:
                message = await self._queue.get(
                    None if timeout_millis is None else timeout_millis / 1000
                )
            except TimeoutError:
                raise ReceiveTimeoutError(
                    f"no message within {timeout_millis} ms on {self.subscription_name}"
                ) from None
        if self._track_delivery:
            self._by_topic[message.topic_name()].delivered(message)
        return message

    def _delivered(self, message: Message) -> None:
        if self._track_delivery:
            self._by_topic[message.topic_name()].delivered(message)

    def _all_delivered(self, messages: Iterable[Message]) -> None:
        if self._track_delivery:  # before the loop: a batch's Messages are made only for it
            for message in messages:
                self._by_topic[message.topic_name()].delivered(message)

    def _check_no_listener(self, call: str) -> None:
        if self._listener is not None:
            raise InvalidConfigurationError(
                f"{call}() is not allowed on a consumer with a message_listener: its messages "
                "go to the listener (as in the official client)"
            )

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Message:
        return await self.receive()

    async def batch_receive(self) -> list[Message]:
        """Messages as ``batch_receive_policy`` says: up to its message and byte limits,
        waiting at most its timeout for the first and any further ones."""
        self._check_no_listener("batch_receive")
        policy = self._options.batch_receive_policy
        max_messages = policy.max_num_messages if policy.max_num_messages > 0 else None
        max_bytes = policy.max_num_bytes if policy.max_num_bytes > 0 else None
        messages: list[Message] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + policy.timeout_ms / 1000 if policy.timeout_ms else None
        queue = self._queue
        while True:
            limit = len(queue) if max_messages is None else max_messages - len(messages)
            if max_bytes is None:  # whole slices of what is queued: no work per message
                taken = queue.take(limit)
            else:
                taken = queue.take(limit, (max_bytes - size, _payload_size))
            if not taken:
                if deadline is None and messages:
                    break  # no timeout: return what is there
                if self._zero_queue:
                    self._partitions[0].window.request_one()
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                try:
                    taken = [await queue.get(remaining)]
                except TimeoutError:
                    break
            self._all_delivered(taken)
            messages += taken
            if max_bytes is not None:
                size += sum(map(_payload_size, taken))
                if size >= max_bytes:
                    break
            if max_messages is not None and len(messages) >= max_messages:
                break
        return messages

    async def receive_many(
        self, max_messages: int | None = None, timeout_millis: int | None = None
    ) -> MessageBatch:
        """What is queued, up to ``max_messages``, as one MessageBatch (columns for bulk
        readers, Messages made only if asked for); waits at most ``timeout_millis`` for
        the first message (ReceiveTimeoutError), never for more."""
        if self._closed:
            raise AlreadyClosedError(f"consumer of {self.subscription_name} is closed")
        self._check_no_listener("receive_many")
        if max_messages is not None:
            check_non_negative("max_messages", max_messages)
        if timeout_millis is not None:
            check_timeout("timeout_millis", timeout_millis)
        queue = self._queue
        if not len(queue):
            if self._zero_queue:
                self._partitions[0].window.request_one()
            try:
                await queue.wait(None if timeout_millis is None else timeout_millis / 1000)
            except TimeoutError:
                raise ReceiveTimeoutError(
                    f"no message within {timeout_millis} ms on {self.subscription_name}"
                ) from None
        batch = MessageBatch(
            queue.take_slices(len(queue) if max_messages is None else max_messages)
        )
        self._all_delivered(batch)
        return batch

    # -- acknowledging ------------------------------------------------------------------

    def acknowledge(
        self, message: Message | MessageId | MessageBatch, transaction: Transaction | None = None
    ) -> asyncio.Future[None]:
        """Acknowledge a message, or every message of a ``receive_many`` batch. With a
        ``transaction``, the acknowledgment takes effect when it commits (Kafka: the
        group's offsets commit with it), and an abort delivers the messages again."""
        if self._single_ack is not None and type(message) is Message and transaction is None:
            return self._single_ack(message.message_id())  # the hot path
        if transaction is not None:
            return self._acknowledge_in(transaction, message)
        if isinstance(message, MessageBatch):
            return self._acknowledge_batch(message)
        partition, message_id = self._locate(message)
        return partition.acknowledge(message_id)

    def _acknowledge_batch(self, batch: MessageBatch) -> asyncio.Future[None]:
        futures: dict[asyncio.Future[None], None] = {}  # distinct, in order
        for messages, start, end in batch.slices:
            partition = self._single or self._by_topic[topic_name(messages)]
            if self._acks_by_dispatch and isinstance(messages, MessageBlock):
                ids = messages.ack_ids(start, end)
            else:
                ids = message_ids(messages, start, end)
            futures[partition.acknowledge_all(ids, end - start)] = None
        if len(futures) == 1:
            return next(iter(futures))
        return asyncio.ensure_future(_all_done(list(futures)))

    def _acknowledge_in(
        self, transaction: Transaction, message: Message | MessageId | MessageBatch
    ) -> asyncio.Future[None]:
        if self._options.subscription_mode is not SubscriptionMode.Durable:
            raise InvalidConfigurationError(
                "a reader (non-durable subscription) keeps no acknowledgments a transaction "
                "could commit"
            )
        if isinstance(message, MessageBatch):
            located = [
                (self._single or self._by_topic[topic_name(messages)], ids)
                for messages, start, end in message.slices
                if (ids := message_ids(messages, start, end))
            ]
        else:
            partition, message_id = self._locate(message)
            located = [(partition, [message_id])]
        for partition, ids in located:
            transaction.add_acknowledgments(partition, ids)
            partition.acknowledge_in_transaction(ids)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def acknowledge_cumulative(self, message: Message | MessageId) -> asyncio.Future[None]:
        """Acknowledge every message up to and including this one (not on Shared)."""
        if self._options.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise InvalidConfigurationError(
                "acknowledge_cumulative is not allowed on Shared and Key_Shared subscriptions"
            )
        partition, message_id = self._locate(message)
        return partition.acknowledge_cumulative(message_id)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message redelivered after ``negative_ack_redelivery_delay_ms``."""
        partition, message_id = self._locate(message)
        count = message.redelivery_count() if isinstance(message, Message) else 0
        partition.negative_acknowledge(message_id, count)

    def redeliver_unacknowledged_messages(self) -> None:
        """Have the broker send again every message it delivered to this consumer and that
        is not acknowledged, those still queued here included (they are dropped: they come
        again, with a higher redelivery count), as the Java client's
        redeliverUnacknowledgedMessages. Pulsar only: Kafka keeps no such set on its side."""
        if self._partitions and not self._partitions[0].redelivers_all:
            raise InvalidConfigurationError(
                "redeliver_unacknowledged_messages needs a broker that tracks what it "
                "delivered (Pulsar); negative_acknowledge each message instead"
            )
        for partition in self._partitions:
            partition.redeliver_unacknowledged()

    async def reconsume_later(
        self,
        message: Message,
        delay_ms: int,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """Send the message to the retry topic (``DeadLetterPolicy.retry_letter_topic``),
        then acknowledge it here; after ``max_redeliver_count`` retries it goes to the
        dead-letter topic instead."""
        dead_letters = self._by_topic[message.topic_name()].dead_letters
        if dead_letters is None:
            raise InvalidConfigurationError(
                "reconsume_later needs a dead_letter_policy (it names the retry topic)"
            )
        await dead_letters.reconsume_later(message, delay_ms, properties)
        await self.acknowledge(message)

    # -- position and lifecycle ---------------------------------------------------------

    async def seek(self, position: MessageId | int) -> None:
        """Move the subscription to a message id, or a publish time (ms since the epoch).

        A message id names one partition: on a consumer of several, seek by time (as in
        the Java client).
        """
        if not isinstance(position, MessageId):
            check_non_negative("position", position)
        if isinstance(position, MessageId) and len(self._partitions) > 1:
            raise InvalidConfigurationError(
                "seek to a message id needs a single-partition consumer; seek by time instead"
            )
        await asyncio.gather(*(p.seek(position) for p in self._partitions))

    async def get_last_message_id(self) -> MessageId | None:
        """The last message id of the (single) topic partition; None if it is empty."""
        if len(self._partitions) > 1:
            raise InvalidConfigurationError(
                "get_last_message_id needs a single-partition consumer; see last_message_ids"
            )
        return await self._partitions[0].get_last_message_id()

    async def last_message_ids(self) -> dict[str, MessageId | None]:
        """The last message id of every topic partition, by partition topic name."""
        ids = await asyncio.gather(*(p.get_last_message_id() for p in self._partitions))
        return {p.topic: i for p, i in zip(self._partitions, ids, strict=True)}

    def pause_message_listener(self) -> None:
        """Stop asking the broker for more messages (those in flight still arrive and are
        queued); with a ``message_listener``, also stop calling it until resumed."""
        for partition in self._partitions:
            partition.pause()
        if self._listener is not None:
            self._listener.pause()

    def resume_message_listener(self) -> None:
        for partition in self._partitions:
            partition.resume()
        if self._listener is not None:
            self._listener.resume()

    async def unsubscribe(self) -> None:
        """Delete the subscription on the broker and close this consumer. If the broker
        refuses, the error is raised and the consumer stays open."""
        await asyncio.gather(*(p.unsubscribe() for p in self._partitions))
        await self.close()

    async def close(self) -> None:
        """Send pending acks, then close; the broker redelivers what was not acknowledged."""
        if self._closed:
            return
        self._closed = True
        self._queue.close(AlreadyClosedError(f"consumer of {self.subscription_name} is closed"))
        if self._listener is not None:
            await self._listener.close()
        try:
            if self._stop_discovery is not None:
                await self._stop_discovery()
            await asyncio.gather(*(p.close() for p in self._partitions))
            if self._release is not None:
                await self._release()
        finally:
            self._on_closed(self)

    def _locate(self, message: Message | MessageId) -> tuple[PartitionConsumer, MessageId]:
        if type(message) is Message and self._single is not None:  # the common case, first
            return self._single, message.message_id()
        if isinstance(message, Message):
            owner = self._by_topic.get(message.topic_name())
            if owner is None:
                raise InvalidConfigurationError(
                    f"{message!r} was not received by this consumer of {self.topic}"
                )
            return owner, message.message_id()
        if not isinstance(message, MessageId):
            raise TypeError(f"expected a Message or a MessageId, not {type(message).__name__}")
        topic = message.owner_topic()
        if isinstance(message, TopicMessageId):
            message = message.message_id
        partition = getattr(message, "partition", -1)
        if topic is not None:
            matches = [
                p
                for p in self._partitions
                if p.topic == topic or (p.destination == topic and p.partition_index == partition)
            ]
            if not matches:
                raise InvalidConfigurationError(
                    f"{topic!r} is not a topic of this consumer ({', '.join(self.topics)})"
                )
            return matches[0], message
        if len(self._partitions) == 1:
            return self._partitions[0], message
        matches = [p for p in self._partitions if p.partition_index == partition]
        if len(matches) != 1:
            raise NotSupportedError(
                "a consumer of several topics cannot tell the topic of a plain message id: "
                "acknowledge the Message itself, or a TopicMessageId(topic, message_id)"
            )
        return matches[0], message


def _payload_size(message: Message) -> int:
    return len(message.data())


async def _all_done(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        await future
