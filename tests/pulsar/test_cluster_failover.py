"""Cluster failover: AutoClusterFailover, ServiceInfoProvider and update_service_info.

Two embedded pulsar-lite brokers stand for two clusters. They share no data (no
geo-replication between them): a message sent to one is only on that one, which the tests
check, and a subscription on the secondary starts there from its initial position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

import msgclient
from msgclient import AutoClusterFailover, ServiceInfo, ServiceInfoProvider
from msgclient.core.network.cluster_failover import ClusterFailover
from msgclient.core.network.connection import Connection
from msgclient.core.network.connection_pool import ConnectionPool
from msgclient.embedded import PulsarBroker
from msgclient.errors import ConnectionClosedError
from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.pulsar.helpers import WireTap, wait_until, within
from tests.unit.test_core_connection_pool import FakeConnection
from tests.unit.test_core_lookup import ScriptedLookup

INTERVAL_MS = 200
SLACK_S = 3.0  # a loaded 2-core machine: probe, switch and lookup may each run late
# Short backoffs: producers and consumers retry the stopped primary until the switch (which
# cuts their current wait short: test_a_switch_cuts_the_reconnect_backoff_short).
CLIENT_OPTIONS = {"max_backoff_interval_ms": 300, "operation_timeout_seconds": 5}
TASK_NAME = "msgclient-cluster-failover"


@pytest.fixture
def primary(make_pulsar_broker: Callable[..., PulsarBroker], tmp_path: Path) -> PulsarBroker:
    # A data dir of its own: stop() deletes a temporary one, and the restart would be empty.
    return make_pulsar_broker(data_dir=tmp_path / "primary")


@pytest.fixture
def secondary(make_pulsar_broker: Callable[..., PulsarBroker]) -> PulsarBroker:
    return make_pulsar_broker()


async def read_all(service_url: str, topic: str, count: int) -> list[bytes]:
    """Every message stored on that broker's ``topic``, read by a client of its own:
    ``count`` messages, then whatever comes before 500 ms pass quietly."""
    async with msgclient.Client(service_url) as client:
        reader = await client.create_reader(topic, msgclient.InitialPosition.Earliest)
        values = [(await within(reader.read_next())).data() for _ in range(count)]
        while True:
            try:
                message = await reader.read_next(timeout_millis=500)
            except msgclient.ReceiveTimeoutError:
                return values
            values.append(message.data())


async def receive_data(consumer: msgclient.Consumer) -> bytes:
    message = await within(consumer.receive())
    await within(consumer.acknowledge(message))
    return message.data()


async def subscribe(client: msgclient.Client, topic: str) -> msgclient.Consumer:
    # Shared: pulsar-lite may dispatch duplicates on Exclusive (docs: /work/shared/brokers.md).
    return await client.subscribe(
        topic,
        "failover",
        consumer_type=msgclient.ConsumerType.Shared,
        initial_position=msgclient.InitialPosition.Earliest,
        # Acked means stored: an ack still grouped when the primary stops would be lost,
        # and the primary would deliver that message again after the switch back.
        ack_receipt_enabled=True,
    )


async def test_fails_over_to_the_secondary_and_switches_back(
    primary: PulsarBroker, secondary: PulsarBroker, topic: str
) -> None:
    policy = AutoClusterFailover(
        ServiceInfo(primary.service_url),
        [ServiceInfo(secondary.service_url)],
        check_interval_ms=INTERVAL_MS,
        failover_threshold=2,
        switch_back_threshold=2,
    )
    loop = asyncio.get_running_loop()
    async with msgclient.Client(policy, **CLIENT_OPTIONS) as client:
        assert client.service_info == policy.primary
        producer = await client.create_producer(topic)
        consumer = await subscribe(client, topic)
        await within(producer.send(b"on-primary-1"))
        assert await receive_data(consumer) == b"on-primary-1"

        # Taken before the stop begins: the client's probes run on the loop while the stop
        # waits in its thread, and one may fail before the stop returns.
        stopped_at = loop.time()
        await asyncio.to_thread(primary.stop)
        await wait_until(
            lambda: client.service_info == policy.secondary[0],
            "the switch to the secondary",
            timeout=2 * INTERVAL_MS / 1000 + INTERVAL_MS / 1000 + SLACK_S,
        )
        # Two failed probes, one interval apart: never before the second probe.
        assert loop.time() - stopped_at >= INTERVAL_MS / 1000
        await within(producer.send(b"on-secondary"))
        assert await receive_data(consumer) == b"on-secondary"
        await wait_until(producer.is_connected, "the producer on the secondary")
        await wait_until(consumer.is_connected, "the consumer on the secondary")

        # Likewise before the start: the broker answers probes before start() returns (it
        # waits for the port in its thread), which made this bound fail once in CI (0.199 s).
        restarted_at = loop.time()
        await asyncio.to_thread(primary.start)
        await wait_until(
            lambda: client.service_info == policy.primary,
            "the switch back to the primary",
            timeout=3 * INTERVAL_MS / 1000 + SLACK_S,
        )
        assert loop.time() - restarted_at >= INTERVAL_MS / 1000  # two probes needed
        await within(producer.send(b"on-primary-2"))
        assert await receive_data(consumer) == b"on-primary-2"

    # Each cluster has what was sent while the client used it, and nothing else.
    assert await read_all(primary.service_url, topic, 2) == [b"on-primary-1", b"on-primary-2"]
    assert await read_all(secondary.service_url, topic, 1) == [b"on-secondary"]


async def test_pending_sends_are_resent_on_the_new_cluster(
    primary: PulsarBroker, secondary: PulsarBroker, topic: str
) -> None:
    """update_service_info by hand: what the producer held for the dead primary goes to the
    secondary, once each."""
    async with msgclient.Client(primary.service_url, **CLIENT_OPTIONS) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        await within(producer.send(b"before"))
        await asyncio.to_thread(primary.stop)
        await wait_until(lambda: not producer.is_connected(), "the producer to see the stop")
        pending = [await producer.send_async(b"pending-%d" % i) for i in range(5)]
        await asyncio.sleep(0.3)
        assert not any(f.done() for f in pending)

        client.update_service_info(ServiceInfo(secondary.service_url))
        assert client.service_info.service_url == secondary.service_url
        await within(asyncio.gather(*pending))
    assert await read_all(secondary.service_url, topic, 5) == [b"pending-%d" % i for i in range(5)]


async def test_a_switch_cuts_the_reconnect_backoff_short(
    primary: PulsarBroker, secondary: PulsarBroker, topic: str
) -> None:
    """A producer and a consumer that lost the primary wait 9-10 s before their first
    retry (the backoff asked for here); a switch makes them try the secondary at once."""
    options = {"initial_backoff_interval_ms": 10_000, "max_backoff_interval_ms": 60_000}
    async with msgclient.Client(primary.service_url, **options) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        consumer = await subscribe(client, topic)
        await within(producer.send(b"before"))
        assert await receive_data(consumer) == b"before"
        await asyncio.to_thread(primary.stop)
        await wait_until(
            lambda: not producer.is_connected() and not consumer.is_connected(),
            "the producer and the consumer to see the stop",
        )
        loop = asyncio.get_running_loop()
        switched_at = loop.time()
        client.update_service_info(ServiceInfo(secondary.service_url))
        await wait_until(producer.is_connected, "the producer on the secondary", SLACK_S)
        await wait_until(consumer.is_connected, "the consumer on the secondary", SLACK_S)
        assert loop.time() - switched_at < 9  # not after the backoff they were waiting out
        await within(producer.send(b"after"))
        assert await receive_data(consumer) == b"after"


async def test_each_cluster_gets_its_own_authentication(
    primary: PulsarBroker, secondary: PulsarBroker, topic: str, wire: WireTap
) -> None:
    # pulsar-lite accepts any token: what the client sends is read off the wire.
    async with msgclient.Client(
        primary.service_url, authentication=msgclient.AuthenticationToken("primary-token")
    ) as client:
        producer = await client.create_producer(topic)
        await within(producer.send(b"one"))
        client.update_service_info(
            ServiceInfo(secondary.service_url, msgclient.AuthenticationToken("secondary-token"))
        )
        await within(producer.send(b"two"))
    connects = [c.connect for c in wire.of_type(pb.BaseCommand.CONNECT)]
    assert [(c.auth_method_name, c.auth_data) for c in connects] == [
        ("token", b"primary-token"),
        ("token", b"secondary-token"),
    ]


async def test_a_bad_service_info_changes_nothing(primary: PulsarBroker, topic: str) -> None:
    async with msgclient.Client(primary.service_url) as client:
        producer = await client.create_producer(topic)
        before = client.service_info
        with pytest.raises(msgclient.InvalidConfigurationError, match="tls_trust_certs_file_path"):
            client.update_service_info(
                ServiceInfo("pulsar+ssl://127.0.0.1:1", tls_trust_certs_file_path="/no/such.pem")
            )
        with pytest.raises(msgclient.InvalidServiceUrlError, match="kafka://"):
            client.update_service_info(ServiceInfo("kafka://127.0.0.1:9092"))
        assert client.service_info is before
        await within(producer.send(b"still on the primary"))
        assert producer.is_connected()
    assert await read_all(primary.service_url, topic, 1) == [b"still on the primary"]


class PushedServices(ServiceInfoProvider):
    """A provider whose updates the test pushes from a thread of its own."""

    def __init__(self, initial: ServiceInfo) -> None:
        self.initial = initial
        self.update: Callable[[ServiceInfo], None] | None = None
        self.closed = False

    def initial_service_info(self) -> ServiceInfo:
        return self.initial

    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None:
        self.update = on_service_info_update

    def close(self) -> None:
        self.closed = True

    async def push(self, service: ServiceInfo) -> None:
        """The update from another thread, which returns once the loop applied it: the
        loop must stay free meanwhile (a join on the loop stalled it 5 s a push)."""
        assert self.update is not None
        await asyncio.wait_for(asyncio.to_thread(self.update, service), timeout=5)


async def test_a_service_info_provider_update_switches(
    primary: PulsarBroker, secondary: PulsarBroker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = PushedServices(ServiceInfo(primary.service_url))
    async with msgclient.Client(provider, **CLIENT_OPTIONS) as client:
        assert provider.update is not None
        producer = await client.create_producer(topic)
        consumer = await subscribe(client, topic)
        await within(producer.send(b"one"))
        assert await receive_data(consumer) == b"one"

        target = ServiceInfo(secondary.service_url)
        await provider.push(target)
        await wait_until(lambda: client.service_info == target, "the pushed switch")
        await within(producer.send(b"two"))
        assert await receive_data(consumer) == b"two"
        # A bad update is refused and logged; the client stays where it is.
        await provider.push(ServiceInfo("kafka://127.0.0.1:9092"))
        await wait_until(
            lambda: any("refused" in r.getMessage() for r in caplog.records), "the refusal"
        )
        assert client.service_info == target
        assert not provider.closed
    assert provider.closed
    assert await read_all(primary.service_url, topic, 1) == [b"one"]
    assert await read_all(secondary.service_url, topic, 1) == [b"two"]


async def test_close_stops_the_probing_task(primary: PulsarBroker, secondary: PulsarBroker) -> None:
    before = asyncio.all_tasks()
    client = msgclient.Client(
        AutoClusterFailover(
            ServiceInfo(primary.service_url),
            [ServiceInfo(secondary.service_url)],
            check_interval_ms=INTERVAL_MS,
        )
    )
    started = asyncio.all_tasks() - before
    assert [t.get_name() for t in started] == [TASK_NAME]
    await asyncio.sleep(2 * INTERVAL_MS / 1000)  # a probe or two ran
    await within(client.close())
    assert asyncio.all_tasks() - before == set()
    assert all(t.done() for t in started)


def test_a_failover_client_needs_a_running_loop(primary: PulsarBroker) -> None:
    policy = AutoClusterFailover(ServiceInfo(primary.service_url), [ServiceInfo("pulsar://b")])
    with pytest.raises(msgclient.InvalidConfigurationError, match="running event loop"):
        msgclient.Client(policy)


async def test_bad_failover_configurations_are_refused() -> None:
    primary = ServiceInfo("pulsar://a:6650")
    with pytest.raises(msgclient.InvalidConfigurationError, match="authentication"):
        msgclient.Client(
            AutoClusterFailover(primary, [ServiceInfo("pulsar://b")]),
            authentication=msgclient.AuthenticationToken("t"),
        )
    kafka = ServiceInfo("kafka://a:9092")
    with pytest.raises(msgclient.InvalidConfigurationError, match="not offered for kafka://"):
        msgclient.Client(AutoClusterFailover(kafka, [kafka]))
    with pytest.raises(msgclient.InvalidServiceUrlError, match="kafka://b"):
        msgclient.Client(AutoClusterFailover(primary, [ServiceInfo("kafka://b:9092")]))
    with pytest.raises(msgclient.InvalidServiceUrlError, match="service URL"):
        ServiceInfo("no-scheme")
    with pytest.raises(msgclient.InvalidConfigurationError, match="secondary"):
        AutoClusterFailover(primary, [])
    with pytest.raises(msgclient.InvalidConfigurationError, match="switch_back_threshold"):
        AutoClusterFailover(primary, [primary], switch_back_threshold=0)
    async with msgclient.Client("pulsar://a:6650") as client:
        with pytest.raises(msgclient.InvalidConfigurationError, match="service_info"):
            client.update_service_info("pulsar://b:6650")  # type: ignore[arg-type]


# -- the thresholds, with scripted probes -------------------------------------------------

PRIMARY = ServiceInfo("pulsar://primary:6650")
FIRST = ServiceInfo("pulsar://first:6650")
SECOND = ServiceInfo("pulsar://second:6650")


class Scripted:
    """Probe answers set per cluster by the test; the switches made, in order."""

    def __init__(self, failover_threshold: int = 2, switch_back_threshold: int = 2) -> None:
        self.up = {PRIMARY.service_url: True, FIRST.service_url: True, SECOND.service_url: True}
        self.switches: list[str] = []
        policy = AutoClusterFailover(
            PRIMARY,
            [FIRST, SECOND],
            failover_threshold=failover_threshold,
            switch_back_threshold=switch_back_threshold,
        )
        self.failover = ClusterFailover(policy, self._probe, self._switch)

    async def _probe(self, service: ServiceInfo) -> bool:
        return self.up[service.service_url]

    def _switch(self, service: ServiceInfo) -> None:
        self.switches.append(service.service_url)

    async def rounds(self, count: int, **up: bool) -> None:
        for name, value in up.items():
            self.up[f"pulsar://{name}:6650"] = value
        for _ in range(count):
            await self.failover.check()


@pytest.fixture
def scripted() -> Scripted:
    return Scripted()


async def test_one_failed_probe_in_a_row_does_not_reach_a_threshold_of_two(
    scripted: Scripted,
) -> None:
    for _ in range(3):
        await scripted.rounds(1, primary=False)
        await scripted.rounds(1, primary=True)
    assert scripted.switches == []
    await scripted.rounds(2, primary=False)
    assert scripted.switches == [FIRST.service_url]
    assert scripted.failover.current is FIRST


async def test_failover_picks_the_first_reachable_secondary_and_waits_for_one(
    scripted: Scripted,
) -> None:
    await scripted.rounds(3, primary=False, first=False, second=False)
    assert scripted.switches == []  # nowhere to go: stays, and tries again each round
    await scripted.rounds(1, second=True)
    assert scripted.switches == [SECOND.service_url]


async def test_switch_back_needs_its_threshold_of_primary_successes_in_a_row(
    scripted: Scripted,
) -> None:
    await scripted.rounds(2, primary=False)
    assert scripted.switches == [FIRST.service_url]
    for _ in range(3):
        await scripted.rounds(1, primary=True)
        await scripted.rounds(1, primary=False)
    assert scripted.switches == [FIRST.service_url]
    await scripted.rounds(2, primary=True)
    assert scripted.switches == [FIRST.service_url, PRIMARY.service_url]
    assert scripted.failover.current is PRIMARY


async def test_a_failing_secondary_fails_over_to_the_next(scripted: Scripted) -> None:
    await scripted.rounds(2, primary=False)
    await scripted.rounds(1, first=False)
    assert scripted.switches == [FIRST.service_url]
    await scripted.rounds(1)
    assert scripted.switches == [FIRST.service_url, SECOND.service_url]


async def test_thresholds_of_one_switch_at_the_first_probe() -> None:
    scripted = Scripted(failover_threshold=1, switch_back_threshold=1)
    await scripted.rounds(1, primary=False)
    await scripted.rounds(1, primary=True)
    assert scripted.switches == [FIRST.service_url, PRIMARY.service_url]


# -- what a switch does to lookups and connections in flight ------------------------------


async def test_a_lookup_in_flight_when_the_service_switches_is_asked_again() -> None:
    lookup = ScriptedLookup()
    call = asyncio.ensure_future(lookup.get_broker("t"))
    await asyncio.sleep(0)
    lookup.forget_in_flight()  # the switch: that fetch asks the old cluster
    lookup.gate.set()
    await within(call)
    assert lookup.fetches["broker", "t"] == 2  # its answer was not taken: asked again


async def test_a_lookup_after_the_switch_does_not_join_one_from_before() -> None:
    lookup = ScriptedLookup()
    before = asyncio.ensure_future(lookup.get_broker("t"))
    await asyncio.sleep(0)
    lookup.forget_in_flight()
    after = asyncio.ensure_future(lookup.get_broker("t"))
    await wait_until(lambda: lookup.fetches["broker", "t"] == 2, "a fetch of its own")
    lookup.gate.set()
    await within(asyncio.gather(before, after))


class AbortableConnection(FakeConnection):
    def abort(self, error: BaseException) -> None:
        assert isinstance(error, ConnectionClosedError)
        if not self.closed.done():
            self.closed.set_result(error)


async def test_drop_all_drops_open_and_opening_connections_and_stays_usable() -> None:
    gate = asyncio.Event()
    opened: list[AbortableConnection] = []

    async def connector(logical: str, physical: str) -> Connection[Any]:
        if logical == "pulsar://slow:6650":
            await gate.wait()
        connection = AbortableConnection(logical, physical)
        opened.append(connection)
        return cast(Connection[Any], connection)

    pool: ConnectionPool[Any] = ConnectionPool(connector)
    first = await within(pool.get_connection("pulsar://fast:6650"))
    opening = asyncio.ensure_future(pool.get_connection("pulsar://slow:6650"))
    await asyncio.sleep(0)
    pool.drop_all("switched")
    await asyncio.sleep(0)
    assert first.closed.done()
    gate.set()
    slow = await within(opening)  # its caller gets it, dropped: it reconnects
    await asyncio.sleep(0)
    assert slow.closed.done()
    again = await within(pool.get_connection("pulsar://fast:6650"))
    assert again is not first and again.is_open
    await pool.close()
