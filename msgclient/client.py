"""Client: the entry point. Picks the protocol adapter from the service URL's scheme."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from typing import Any

from msgclient.admin import Admin
from msgclient.closing import AsyncClosing
from msgclient.cluster_switch import ClusterSwitch, initial_service, service_options
from msgclient.consumer import Consumer
from msgclient.contract import (
    TRANSACTIONS_NOT_SUPPORTED,
    ConsumerEvents,
    ConsumerTransport,
    ProducerEvents,
    ProducerTransport,
    ProtocolBackend,
    Router,
    load_backend,
)
from msgclient.core.network.backoff import Backoff
from msgclient.core.network.cluster_failover import (
    AutoClusterFailover,
    ServiceInfo,
    ServiceInfoProvider,
)
from msgclient.core.receive.dead_letters import DeadLetterRouter
from msgclient.core.receive.partition_consumer import PartitionConsumer
from msgclient.core.receive.receive_queue import ReceiveQueue
from msgclient.core.send.limits import Limit
from msgclient.core.send.partition_producer import PartitionProducer
from msgclient.core.send.routing import make_router
from msgclient.crypto_key_reader import CryptoKeyReader
from msgclient.errors import (
    AlreadyClosedError,
    InvalidConfigurationError,
    InvalidTopicNameError,
    NotSupportedError,
)
from msgclient.message import Message, MessageId
from msgclient.options import (
    ClientOptions,
    ConsumerCryptoFailureAction,
    ConsumerOptions,
    ConsumerType,
    InitialPosition,
    ProducerOptions,
    RegexSubscriptionMode,
    SubscriptionMode,
)
from msgclient.pattern_subscription import Members, PatternSubscription
from msgclient.producer import Producer
from msgclient.reader import Reader
from msgclient.schema_info import SchemaInfo
from msgclient.stats import ClientStats, ConsumerStats, ProducerStats
from msgclient.telemetry.wiring import Telemetry
from msgclient.transaction import PreparedTransaction, Transaction, TransactionalProducers
from msgclient.url import parse_service_url
from msgclient.validators import build


class Client(AsyncClosing):
    """A client for one cluster: ``Client("pulsar://localhost:6650", **options)``.

    Options are those of ``ClientOptions``; a bad URL, an unknown scheme or a bad option
    raises at once. Connections open on first use. Use ``async with`` or ``await close()``.

    As the official client, ``service_url`` may instead be an ``AutoClusterFailover`` or a
    ``ServiceInfoProvider`` (Pulsar only; docs/failover.md): the client then switches
    clusters at run time, and each cluster's ``ServiceInfo`` carries its authentication
    and TLS trust (the ``authentication`` and ``tls_trust_certs_file_path`` options are
    refused). Such a client must be created on its event loop, where its probes run.
    """

    def __init__(
        self, service_url: str | AutoClusterFailover | ServiceInfoProvider, **options: Any
    ) -> None:
        service = initial_service(service_url, options)
        self.service_url = parse_service_url(service.service_url)
        self.options = build(ClientOptions, "client", {**options, **service_options(service)})
        self._backend: ProtocolBackend[Any] = load_backend(self.service_url, self.options)
        self._memory = Limit(self.options.memory_limit)
        self._producers: set[Producer] = set()
        self._consumers: set[Consumer] = set()
        self._transactional: dict[str, TransactionalProducers] = {}  # by transactional id
        self._closed = False
        self._admin: Admin | None = None
        self._cluster = ClusterSwitch(self, self._backend, service)
        self._telemetry = Telemetry(
            self.options,
            self.service_url.scheme.split("+")[0],
            self._producer_stats,
            self._consumer_stats,
            self.stats,
        )
        if not isinstance(service_url, str):  # last: switches may come from here on
            self._cluster.follow(service_url)

    @property
    def service_info(self) -> ServiceInfo:
        """The cluster in use (the official client's ``get_service_info``)."""
        return self._cluster.service

    def update_service_info(self, service_info: ServiceInfo) -> None:
        """Switch to another cluster now (Pulsar only): every connection is dropped, and
        every producer and consumer reconnects through a lookup there, resending what it
        had pending. Call it on the client's loop. A bad ``service_info`` raises, changing
        nothing. With an ``AutoClusterFailover``, its next probes may switch again."""
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        if not isinstance(service_info, ServiceInfo):
            raise InvalidConfigurationError(
                f"service_info={service_info!r} is invalid: expected a ServiceInfo"
            )
        self._cluster.switch_to(service_info)

    @property
    def memory_used(self) -> int:
        """Bytes of message payload held by this client's producers right now."""
        return self._memory.used

    def stats(self) -> ClientStats:
        """A snapshot of the client's counters (docs/metrics.md)."""
        open_now, opened = self._backend.connection_counts()
        return ClientStats(
            connections_open=open_now,
            connections_opened=opened,
            producers=len(self._producers),
            consumers=len(self._consumers),
            memory_used=self._memory.used,
            reconnects=sum(p.stats().reconnects for p in self._producers)
            + sum(c.stats().reconnects for c in self._consumers),
        )

    def _producer_stats(self) -> list[ProducerStats]:
        return [p.stats() for p in list(self._producers)]

    def _consumer_stats(self) -> list[ConsumerStats]:
        return [c.stats() for c in list(self._consumers)]

    async def create_producer(self, topic: str, **options: Any) -> Producer:
        """Create a producer on ``topic`` (options: ``ProducerOptions``).

        Returns once the producer is registered on every partition; raises if the broker
        cannot be reached or refuses it.
        """
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        producer_options = build(
            ProducerOptions, "producer", {**self._backend.producer_defaults, **options}
        )
        topic = self._backend.normalize_topic(topic)
        transactions = None
        if producer_options.transactional_id is not None:
            transactions = await self._transactions_of(
                producer_options.transactional_id, producer_options.transaction_timeout_ms
            )
        partitions = await self._backend.partition_count(topic)
        per_partition_limit = producer_options.max_pending_messages
        across = producer_options.max_pending_messages_across_partitions
        if partitions and per_partition_limit and across:
            per_partition_limit = max(1, min(per_partition_limit, across // partitions))
        members = [
            PartitionProducer(
                name,
                producer_options,
                self._memory,
                self._producer_transport_factory(name, index, producer_options),
                self._backoff(),
                per_partition_limit,
                destination=topic,
                partition_index=index,
            )
            for name, index in self._partition_names(topic, partitions)
        ]
        await self._start_all(members)
        self._telemetry.producer_members(members)
        send_timeout = producer_options.send_timeout_millis / 1000
        producer = self._telemetry.producer_type()(
            topic,
            producer_options,
            members,
            self._router(producer_options, partitions) if partitions else None,
            self._memory,
            close_timeout=send_timeout or self.options.operation_timeout_seconds,
            on_closed=self._producers.discard,
            transactions=transactions,
        )
        self._producers.add(producer)
        return producer

    async def new_transaction(self, *, transactional_id: str | None = None) -> Transaction:
        """Open a transaction (docs/transactions.md). On Kafka it belongs to a
        transactional id, the ``transactional_id`` of the producers that send in it: name
        it, or leave it out when the client's producers have one id. Not on Pulsar yet."""
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        if not self._backend.supports_transactions:
            raise NotSupportedError(TRANSACTIONS_NOT_SUPPORTED)
        if transactional_id is None:
            known = list(self._transactional)
            if len(known) != 1:
                raise InvalidConfigurationError(
                    "new_transaction(transactional_id=...): name the transactional id "
                    + (
                        f"(this client's producers have {', '.join(map(repr, known))})"
                        if known
                        else "(no producer of this client has a transactional_id yet)"
                    )
                )
            transactional_id = known[0]
        owner = self._transactional.get(transactional_id)
        if owner is None:
            owner = await self._transactions_of(
                transactional_id, ProducerOptions().transaction_timeout_ms
            )
        else:
            await owner.transport.start()  # a new epoch after a prepared transaction
        return owner.begin()

    async def commit_prepared(self, prepared: PreparedTransaction) -> None:
        """Commit a transaction prepared by ``Transaction.prepare()``, in this client or
        another process. Committing it again does no harm; a transaction aborted meanwhile
        (its id took a new epoch) fails with TransactionFatalError. Kafka only."""
        await self._end_prepared(prepared, commit=True)

    async def abort_prepared(self, prepared: PreparedTransaction) -> None:
        """Abort a transaction prepared by ``Transaction.prepare()``. Kafka only."""
        await self._end_prepared(prepared, commit=False)

    async def _end_prepared(self, prepared: PreparedTransaction, *, commit: bool) -> None:
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        await self._backend.end_prepared_transaction(
            prepared.transactional_id, prepared.producer_id, prepared.producer_epoch, commit
        )

    def admin(self) -> Admin:
        """Topics, configs, consumer groups and offsets (see ``msgclient.admin``)."""
        if self._admin is None:
            self._admin = Admin(
                self._backend.admin_transport(),
                self._backend.normalize_topic,
                self._check_open,
                self.subscribe,
            )
        return self._admin

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError("the client is closed")

    async def _transactions_of(
        self, transactional_id: str, timeout_ms: int
    ) -> TransactionalProducers:
        """The transactions of ``transactional_id``, registered with the coordinator (a
        previous incarnation's open transaction aborted) the first time."""
        transport = self._backend.transaction_transport(transactional_id, timeout_ms)
        owner = self._transactional.get(transactional_id)
        if owner is None:
            owner = TransactionalProducers(transactional_id, transport, timeout_ms)
            self._transactional[transactional_id] = owner
        await transport.start()
        return owner

    async def subscribe(
        self, topic: str | list[str] | re.Pattern[str], subscription_name: str, **options: Any
    ) -> Consumer:
        """Subscribe to a topic, a list of topics, or the topics a compiled pattern
        matches (``re.compile(...)``; a str is always a topic name), with
        ``ConsumerOptions``. A pattern's topics are listed again every
        ``pattern_auto_discovery_period`` seconds: new ones are joined, deleted ones
        dropped (docs/consumer.md).

        Returns once every partition's subscription is registered on the broker.
        """
        if isinstance(topic, re.Pattern):
            return await self._subscribe_pattern(topic, subscription_name, options)
        return await self._subscribe(topic, subscription_name, options, None)

    def _consumer_options(self, subscription_name: str, options: dict[str, Any]) -> ConsumerOptions:
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        consumer_options = build(
            ConsumerOptions, "consumer", {**self._backend.consumer_defaults, **options}
        )
        self._backend.check_consumer(consumer_options)
        if not isinstance(subscription_name, str) or not subscription_name:
            raise InvalidConfigurationError(
                f"subscription_name must be a non-empty string, got {subscription_name!r}"
            )
        return consumer_options

    async def _subscribe_pattern(
        self, pattern: re.Pattern[str], subscription_name: str, options: dict[str, Any]
    ) -> Consumer:
        consumer_options = self._consumer_options(subscription_name, options)
        queue: ReceiveQueue[Message] = ReceiveQueue()
        context = self._backend.subscription_context([], subscription_name, consumer_options)

        def member(
            name: str, index: int, topic: str, size: int, router: DeadLetterRouter | None
        ) -> PartitionConsumer:
            return self._member(
                name,
                index,
                topic,
                subscription_name,
                consumer_options,
                queue,
                size,
                context,
                router,
            )

        async def partition_names(topic: str) -> list[tuple[str, int]]:
            return self._partition_names(topic, await self._backend.partition_count(topic))

        subscription = PatternSubscription(
            self._backend,
            context,
            pattern,
            subscription_name,
            consumer_options,
            Members(partition_names, member, self._dead_letter_producer, self._start_all),
        )
        topics, members = await subscription.start()
        consumer = self._telemetry.consumer_type()(
            topics,
            subscription_name,
            consumer_options,
            members,
            queue,
            self._consumers.discard,
            pattern=pattern.pattern,
        )
        subscription.run(consumer)
        self._consumers.add(consumer)
        return consumer

    def _member(
        self,
        name: str,
        index: int,
        topic: str,
        subscription_name: str,
        options: ConsumerOptions,
        queue: ReceiveQueue[Message],
        size: int,
        context: Any,
        dead_letters: DeadLetterRouter | None,
    ) -> PartitionConsumer:
        return PartitionConsumer(
            name,
            index,
            options,
            queue,
            size,
            self._consumer_transport_factory(name, index, subscription_name, options, context),
            self._backoff(),
            dead_letters,
            destination=topic,
        )

    async def _subscribe(
        self,
        topic: str | list[str],
        subscription_name: str,
        options: dict[str, Any],
        only_partition: int | None,
    ) -> Consumer:
        consumer_options = self._consumer_options(subscription_name, options)
        if isinstance(topic, str):
            topics = [topic]
        elif isinstance(topic, list | tuple) and all(isinstance(t, str) for t in topic):
            topics = list(topic)
        else:
            raise InvalidTopicNameError(
                f"topic must be a str or a list of str, not {type(topic).__name__}"
            )
        if not topics:
            raise InvalidConfigurationError("subscribe needs at least one topic")
        topics = [self._backend.normalize_topic(t) for t in topics]
        policy = consumer_options.dead_letter_policy
        routers = {
            base: DeadLetterRouter(policy, base, subscription_name, self._dead_letter_producer)
            for base in topics
            if policy is not None
        }
        # (topic subscribed, topic whose dead-letter router serves it)
        subscribed = [(t, t) for t in topics]
        if consumer_options.retry_enable:  # as the Java client: the retry topics too
            if not routers:
                raise InvalidConfigurationError("retry_enable needs a dead_letter_policy")
            subscribed += [
                (self._backend.normalize_topic(router.retry_letter_topic), base)
                for base, router in routers.items()
            ]
        counts = await asyncio.gather(*(self._backend.partition_count(t) for t, _ in subscribed))
        names = [
            (base, topic_name, name, index)
            for (topic_name, base), count in zip(subscribed, counts, strict=True)
            for name, index in self._partition_names(topic_name, count)
            if only_partition is None or index == only_partition
        ]
        size = consumer_options.receiver_queue_size
        if size == 0 and len(names) > 1:
            raise InvalidConfigurationError(
                "receiver_queue_size=0 needs a single, unpartitioned topic "
                f"({len(names)} partitions here)"
            )
        if len(names) > 1:  # the Java client's share of the total for each partition
            across = consumer_options.max_total_receiver_queue_size_across_partitions
            size = max(1, min(size, across // len(names)))
        queue: ReceiveQueue[Message] = ReceiveQueue()
        context = self._backend.subscription_context(
            [t for t, _ in subscribed], subscription_name, consumer_options
        )
        members = [
            self._member(
                name,
                index,
                topic_name,
                subscription_name,
                consumer_options,
                queue,
                size,
                context,
                routers.get(base),
            )
            for base, topic_name, name, index in names
        ]
        await self._start_all(members)
        consumer = self._telemetry.consumer_type()(
            topics, subscription_name, consumer_options, members, queue, self._consumers.discard
        )
        self._consumers.add(consumer)
        return consumer

    async def topics_matching(
        self,
        pattern: re.Pattern[str],
        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
    ) -> list[str]:
        """The topics a subscription to ``pattern`` would read now (not their partitions),
        by their normalized names; an invalid pattern raises InvalidConfigurationError."""
        self._check_open()
        return await self._backend.list_topics(pattern, regex_subscription_mode)

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId | InitialPosition,
        *,
        reader_name: str | None = None,
        receiver_queue_size: int = 1000,
        start_message_id_inclusive: bool = False,
        partition: int | None = None,
        schema: SchemaInfo | None = None,
        crypto_key_reader: CryptoKeyReader | None = None,
        crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
    ) -> Reader:
        """Read ``topic`` from ``start_message_id`` (a MessageId, or InitialPosition.Earliest
        / Latest) with a non-durable subscription of its own.

        ``partition`` (an index into ``get_topic_partitions``) reads that partition alone.
        Where a message id names its partition (Kafka), the reader reads that partition
        alone too; on Pulsar a partitioned topic's reader otherwise starts at Earliest or
        Latest. ``schema`` is told to the broker in SUBSCRIBE, as a consumer's;
        ``crypto_key_reader`` and ``crypto_failure_action`` decrypt as a consumer's do."""
        only_partition = partition
        if partition is not None:
            count = len(await self.get_topic_partitions(topic))
            if not isinstance(partition, int) or not 0 <= partition < count:
                raise InvalidConfigurationError(
                    f"partition={partition!r} is invalid: {topic} has {count} partition(s)"
                )
            if count == 1:
                only_partition = None  # Pulsar: an unpartitioned topic has index -1
        elif isinstance(start_message_id, MessageId):
            only_partition = self._backend.partition_of(start_message_id)
            if only_partition is None and await self._backend.partition_count(
                self._backend.normalize_topic(topic)
            ):
                raise InvalidConfigurationError(
                    "a reader of a partitioned topic starts at InitialPosition.Earliest or "
                    "Latest: a message id names only one partition"
                )
        at_id = isinstance(start_message_id, MessageId)
        options: dict[str, Any] = {
            "consumer_type": ConsumerType.Exclusive,
            "subscription_mode": SubscriptionMode.NonDurable,
            "consumer_name": reader_name,
            "receiver_queue_size": receiver_queue_size,
            "initial_position": InitialPosition.Earliest
            if at_id or start_message_id is InitialPosition.Earliest
            else InitialPosition.Latest,
            "start_message_id": start_message_id if at_id else None,
            "start_message_id_inclusive": start_message_id_inclusive,
            "schema": schema,
            "crypto_key_reader": crypto_key_reader,
            "crypto_failure_action": crypto_failure_action,
        }
        subscription = f"reader-{uuid.uuid4().hex[:10]}"
        consumer = await self._subscribe(topic, subscription, options, only_partition)
        return Reader(consumer, start_message_id, start_message_id_inclusive)

    async def get_topic_partitions(self, topic: str) -> list[str]:
        """The names of the topic's partitions, in index order (the topic itself when it
        is not partitioned), as the official client's ``get_topic_partitions``."""
        topic = self._backend.normalize_topic(topic)
        count = await self._backend.partition_count(topic)
        return [name for name, _ in self._partition_names(topic, count)]

    async def _dead_letter_producer(self, topic: str, initial_subscription: str | None) -> Producer:
        return await self.create_producer(
            topic, batching_enabled=False, initial_subscription_name=initial_subscription
        )

    def _partition_names(self, topic: str, partitions: int) -> list[tuple[str, int]]:
        if partitions == 0:
            return [(topic, -1)]
        return [(self._backend.partition_name(topic, i), i) for i in range(partitions)]

    def _backoff(self) -> Backoff:
        return Backoff(
            self.options.initial_backoff_interval_ms / 1000,
            self.options.max_backoff_interval_ms / 1000,
            signal=self._cluster.retry_now,
        )

    async def _start_all(self, members: list[PartitionProducer] | list[PartitionConsumer]) -> None:
        """Start every member; if any fails, close the others and raise its error."""
        timeout = self.options.operation_timeout_seconds
        results = await asyncio.gather(*(m.start(timeout) for m in members), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(*(_close_member(m) for m in members), return_exceptions=True)
            raise errors[0]

    def _consumer_transport_factory(
        self,
        topic: str,
        partition: int,
        subscription: str,
        options: ConsumerOptions,
        context: Any,
    ) -> Callable[[ConsumerEvents], ConsumerTransport]:
        def factory(events: ConsumerEvents) -> ConsumerTransport:
            return self._backend.consumer_transport(
                topic, partition, subscription, options, events, context
            )

        return factory

    def _router(self, options: ProducerOptions, partitions: int) -> Router:
        """The adapter's partitioner (Kafka's), else the core's routing modes."""
        return self._backend.make_router(options, partitions) or make_router(options, partitions)

    def _producer_transport_factory(
        self, topic: str, partition: int, options: ProducerOptions
    ) -> Callable[[ProducerEvents], ProducerTransport]:
        def factory(events: ProducerEvents) -> ProducerTransport:
            return self._backend.producer_transport(topic, partition, options, events)

        return factory

    async def close(self) -> None:
        """Close every consumer and producer (flushing them), then every connection."""
        if self._closed:
            return
        self._closed = True
        await self._cluster.close()
        consumers = list(self._consumers)
        await asyncio.gather(*(c.close() for c in consumers), return_exceptions=True)
        producers = list(self._producers)
        await asyncio.gather(*(p.close() for p in producers), return_exceptions=True)
        await self._backend.close()
        self._telemetry.close()


async def _close_member(member: PartitionProducer | PartitionConsumer) -> None:
    if isinstance(member, PartitionProducer):
        await member.close(0)
    else:
        await member.close()
