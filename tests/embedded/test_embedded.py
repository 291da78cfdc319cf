"""The embedded brokers, exercised for real: official pulsar client, raw Kafka requests, /proc."""

from __future__ import annotations

import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pulsar
import pytest

from msgclient.embedded import BrokerStartError, KafkaBroker, PulsarBroker, _process
from msgclient.embedded._process import BrokerProcess, free_loopback_port
from tests.pulsar.helpers import official_client

RECEIVE_TIMEOUT_MS = 5_000
WAIT_SECONDS = 10.0


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


# -- Pulsar -------------------------------------------------------------------------------


def test_pulsar_produce_and_consume(pulsar_broker: PulsarBroker, topic: str) -> None:
    with official_client(pulsar_broker.service_url) as client:
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic)
        for i in range(10):
            producer.send(f"m{i}".encode())
        received = []
        for _ in range(10):
            message = consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
            received.append(message.data())
            consumer.acknowledge(message)
    assert sorted(received) == sorted(f"m{i}".encode() for i in range(10))


def test_pulsar_restart_keeps_port_and_data(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker()
    service_url, data_dir = broker.service_url, broker.data_dir
    with official_client(service_url) as client:
        client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared).close()
        client.create_producer(topic).send(b"before restart")

    broker.restart()

    assert (broker.service_url, broker.data_dir) == (service_url, data_dir)
    with official_client(service_url) as client:
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        assert consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS).data() == b"before restart"


def test_pulsar_restart_after_a_crash_keeps_acked_state(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker()
    with official_client(broker.service_url) as client:
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic)
        producer.send(b"acked")
        consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS))
        producer.send(b"pending")
    assert broker.pid is not None

    os.kill(broker.pid, signal.SIGKILL)
    wait_until(lambda: not broker.is_running)
    broker.restart()

    with official_client(broker.service_url) as client:
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        assert consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS).data() == b"pending"


def test_pulsar_client_reconnects_across_restart(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker()
    with official_client(broker.service_url) as client:
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic)
        producer.send(b"one")

        # The broker closes live connections: their TIME_WAIT must not block the same port.
        broker.restart()

        producer.send(b"two")
        # "one" may come twice: unacknowledged when the broker went, it is redelivered.
        received: set[bytes] = set()
        for _ in range(5):
            received.add(consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS).data())
            if received == {b"one", b"two"}:
                break
    assert received == {b"one", b"two"}


def test_pulsar_partitioned_topics_short_and_full_names(
    make_pulsar_broker: Callable[..., PulsarBroker],
) -> None:
    broker = make_pulsar_broker(
        partitioned_topics={"short": 3, "persistent://public/default/full": 2}
    )
    with official_client(broker.service_url) as client:
        assert len(client.get_topic_partitions("short")) == 3
        assert len(client.get_topic_partitions("persistent://public/default/short")) == 3
        assert len(client.get_topic_partitions("full")) == 2
        assert client.get_topic_partitions("plain") == ["persistent://public/default/plain"]


def test_pulsar_partitioned_topic_declared_later_applies_at_restart(
    make_pulsar_broker: Callable[..., PulsarBroker], topic: str
) -> None:
    broker = make_pulsar_broker(partitioned_topics={"first": 2})
    with official_client(broker.service_url) as client:
        client.create_producer(topic).send(b"kept")  # the broker records this topic in the file

    broker.declare_partitioned_topic("second", 4)
    broker.restart()

    with official_client(broker.service_url) as client:
        assert len(client.get_topic_partitions("first")) == 2
        assert len(client.get_topic_partitions("second")) == 4
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert reader.read_next(timeout_millis=RECEIVE_TIMEOUT_MS).data() == b"kept"


def test_pulsar_default_partitions(make_pulsar_broker: Callable[..., PulsarBroker]) -> None:
    broker = make_pulsar_broker(default_partitions=2)
    with official_client(broker.service_url) as client:
        assert len(client.get_topic_partitions("any-topic")) == 2


def test_pulsar_context_manager_deletes_only_its_own_temp_dir(tmp_path: Path) -> None:
    with PulsarBroker() as temporary, PulsarBroker(data_dir=tmp_path / "given") as given:
        temp_dir, port = temporary.data_dir, temporary.port
        assert temp_dir.is_dir() and accepts_connections(port)
    assert not temporary.is_running and not given.is_running
    assert not temp_dir.exists() and not accepts_connections(port)
    assert (tmp_path / "given" / "pl.toml").is_file()


def test_pulsar_rejects_bad_topic_names_and_counts() -> None:
    with pytest.raises(ValueError, match="not a topic name"):
        PulsarBroker(partitioned_topics={"a/b": 2})
    with pytest.raises(ValueError, match="1 partition or more"):
        PulsarBroker(partitioned_topics={"t": 0})
    with pytest.raises(ValueError, match="default_partitions"):
        PulsarBroker(default_partitions=-1)


# -- Kafka --------------------------------------------------------------------------------


def kafka_metadata_brokers(port: int) -> list[tuple[int, str, int]]:
    """Send a Metadata v0 request; return the (node id, host, port) of each broker listed."""
    client_id = b"msgclient-test"
    body = struct.pack(">hhih", 3, 0, 7, len(client_id)) + client_id + struct.pack(">i", 0)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        stream = sock.makefile("rb")
        (size,) = struct.unpack(">i", stream.read(4))
        response = stream.read(size)
    correlation_id, broker_count = struct.unpack_from(">ii", response)
    assert correlation_id == 7
    brokers, offset = [], 8
    for _ in range(broker_count):
        node_id, host_length = struct.unpack_from(">ih", response, offset)
        host = response[offset + 6 : offset + 6 + host_length].decode()
        (broker_port,) = struct.unpack_from(">i", response, offset + 6 + host_length)
        brokers.append((node_id, host, broker_port))
        offset += 10 + host_length
    return brokers


def test_kafka_answers_metadata_with_its_loopback_address(kafka_broker: KafkaBroker) -> None:
    assert kafka_broker.bootstrap_servers == f"127.0.0.1:{kafka_broker.port}"
    assert kafka_broker.service_url == f"kafka://127.0.0.1:{kafka_broker.port}"
    assert kafka_metadata_brokers(kafka_broker.port) == [(111, "127.0.0.1", kafka_broker.port)]


def test_kafka_restart_keeps_port(tmp_path: Path) -> None:
    with KafkaBroker(data_dir=tmp_path) as broker:
        port = broker.port
        broker.restart()
        assert broker.port == port
        assert kafka_metadata_brokers(port) == [(111, "127.0.0.1", port)]
    assert not accepts_connections(port)


# -- Both ---------------------------------------------------------------------------------


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(ip, port) of every TCP listener and UDP socket the process owns, read from /proc."""
    own_inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            own_inodes.add(target.removeprefix("socket:[").removesuffix("]"))
    found = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = row.split()
            local_address, state, inode = fields[1], fields[3], fields[9]
            is_tcp_listener = state == "0A"
            if inode in own_inodes and (is_tcp_listener or table.startswith("udp")):
                found.add(decode_proc_address(local_address))
    return found


def decode_proc_address(text: str) -> tuple[str, int]:
    ip_hex, port_hex = text.split(":")
    # /proc prints the address as 32-bit words in host byte order.
    packed = b"".join(
        struct.pack("=I", int(ip_hex[i : i + 8], 16)) for i in range(0, len(ip_hex), 8)
    )
    family = socket.AF_INET if len(packed) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, packed), int(port_hex, 16)


def test_brokers_listen_on_loopback_only(
    pulsar_broker: PulsarBroker, kafka_broker: KafkaBroker
) -> None:
    # For pulsar-lite this also proves the config was read: its metrics default to 0.0.0.0:8080.
    for broker in (pulsar_broker, kafka_broker):
        assert broker.pid is not None
        assert listening_addresses(broker.pid) == {("127.0.0.1", broker.port)}, broker.name


# -- Start failures -------------------------------------------------------------------------


def test_start_fails_fast_when_port_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fast: the port is checked before the broker is started at all, not found taken once
    # the start timeout (10 s) runs out.
    def spawn(*args: object, **kwargs: object) -> None:
        raise AssertionError("the broker process was started before the port was checked")

    monkeypatch.setattr(_process._spawner, "submit", spawn)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        broker = PulsarBroker(port=squatter.getsockname()[1])
        started = time.monotonic()
        with pytest.raises(BrokerStartError, match="cannot listen"):
            broker.start(timeout=WAIT_SECONDS)
        assert time.monotonic() - started < 2.0  # a bind test; ample on a loaded machine
        broker.stop()


def test_start_error_shows_exit_code_and_log_tail(tmp_path: Path) -> None:
    process = BrokerProcess(
        "fake-broker",
        [sys.executable, "-c", "print('disk on fire', flush=True); raise SystemExit(3)"],
        port=free_loopback_port(),
        log_path=tmp_path / "fake.log",
        cwd=tmp_path,
    )
    with pytest.raises(BrokerStartError, match=r"(?s)exited with code 3.*disk on fire"):
        process.start(timeout=WAIT_SECONDS)
    assert not process.is_running


def test_start_timeout_stops_the_process(tmp_path: Path) -> None:
    process = BrokerProcess(
        "mute-broker",
        [sys.executable, "-c", "import time; time.sleep(60)"],
        port=free_loopback_port(),
        log_path=tmp_path / "mute.log",
        cwd=tmp_path,
    )
    started = time.monotonic()
    with pytest.raises(BrokerStartError, match=r"did not accept connections within 0\.5 s"):
        process.start(timeout=0.5)
    assert time.monotonic() - started < WAIT_SECONDS
    assert not process.is_running


# -- CLI ----------------------------------------------------------------------------------


def read_lines(stream: IO[bytes], count: int, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while len(lines) < count:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError(f"got {lines} within {timeout} s, expected {count} lines")
        line = stream.readline()
        if not line:
            raise EOFError(f"output ended after {lines}")
        lines.append(line.decode().strip())
    return lines


def child_pids(parent_pid: int) -> set[int]:
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[1]) == parent_pid:
            children.add(int(stat.parent.name))
    return children


def test_cli_prints_urls_and_stops_brokers_on_sigterm(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "msgclient.embedded", "all"]
    command += ["--partitioned-topic", "orders=3", "--data-dir", str(tmp_path)]
    cli = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    try:
        assert cli.stdout is not None
        pulsar_url, kafka_url = read_lines(cli.stdout, 2, WAIT_SECONDS)
        assert pulsar_url.startswith("pulsar://127.0.0.1:")
        assert kafka_url.startswith("kafka://127.0.0.1:")
        with official_client(pulsar_url) as client:
            assert len(client.get_topic_partitions("orders")) == 3
        ports = [int(url.rpartition(":")[2]) for url in (pulsar_url, kafka_url)]
        brokers = child_pids(cli.pid)
        assert len(brokers) == 2

        cli.send_signal(signal.SIGTERM)

        assert cli.wait(WAIT_SECONDS) == 0
    finally:
        cli.kill()
        cli.wait(WAIT_SECONDS)
    assert not any(accepts_connections(port) for port in ports)
    assert not any(Path(f"/proc/{pid}").exists() for pid in brokers)
    assert (tmp_path / "pulsar" / "pl.toml").is_file() and (tmp_path / "kafka").is_dir()


@pytest.mark.parametrize(
    ("argument", "error"),
    [("orders", b"expected NAME=N"), ("orders=0", b"expected NAME=N"), ("a/b=2", b"not a topic")],
)
def test_cli_rejects_a_malformed_partitioned_topic(argument: str, error: bytes) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "msgclient.embedded", "--partitioned-topic", argument],
        capture_output=True,
        timeout=WAIT_SECONDS,
    )
    assert result.returncode == 2
    assert error in result.stderr
