"""Option parsing (no Spark, no broker): every error names its option."""

from __future__ import annotations

import pytest

from msgclient.spark.errors import SourceOptionError
from msgclient.spark.options import parse_options
from msgclient.spark.positions import EARLIEST_SPEC, LATEST_SPEC, Protocol, PulsarPosition
from protocols.pulsarwire.message_id import PulsarMessageId
from tests.spark.helpers import pulsar_json

KAFKA = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}
PULSAR = {"service.url": "pulsar://127.0.0.1:6650", "topic": "orders"}


def fails(option: str, match: str, raw: dict[str, str], streaming: bool | None = True) -> None:
    with pytest.raises(SourceOptionError, match=match) as caught:
        parse_options(raw, streaming)
    assert caught.value.option == option
    assert option in str(caught.value)


def test_spark_kafka_names_port_unchanged() -> None:
    options = parse_options(
        {
            **KAFKA,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "100",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "30s",
            "failOnDataLoss": "false",
            "includeHeaders": "TRUE",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "scram-sha-256",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="s3\\"cret";',
            "kafkaConsumer.pollTimeoutMs": "5000",
            "groupIdPrefix": "ignored",
        },
        streaming=True,
    )
    assert options.url == "kafka+ssl://127.0.0.1:9092"
    assert options.protocol is Protocol.KAFKA
    assert options.selection.topics == ("orders",)
    assert options.starting.kind == "earliest"
    assert (options.max_offsets_per_trigger, options.min_offsets_per_trigger) == (100, 10)
    assert options.max_trigger_delay_ms == 30_000
    assert not options.fail_on_data_loss and options.include_headers
    assert options.poll_timeout_ms == 5000
    assert options.client_options == {
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": "alice",
        "sasl_password": 's3\\"cret',
    }


def test_pulsar_connector_names_and_client_options() -> None:
    options = parse_options(
        {
            "service.url": "pulsar://127.0.0.1:6650",
            "topics": "a, b,a",
            "admin.url": "http://ignored:8080",
            "client.operation_timeout_seconds": "2.5",
            "client.connections_per_broker": "2",
            "client.tls_trust_certs_file_path": "none",
        },
        streaming=False,
    )
    assert options.protocol is Protocol.PULSAR
    assert options.selection.topics == ("a", "b")
    assert options.starting.kind == "earliest" and options.ending.kind == "latest"
    assert options.client_options == {
        "operation_timeout_seconds": 2.5,
        "connections_per_broker": 2,
        "tls_trust_certs_file_path": None,
    }


def test_offsets_json() -> None:
    message_id = PulsarMessageId(3, 7, -1, 2, 5)
    options = parse_options(
        {
            **PULSAR,
            "startingOffsets": f'{{"orders": {{"0": "{pulsar_json(message_id)}", '
            '"1": -2, "2": -1}}',
        },
        streaming=True,
    )
    assert options.starting.offsets == {
        "orders": {0: PulsarPosition(3, 7, 2), 1: EARLIEST_SPEC, 2: LATEST_SPEC}
    }
    options = parse_options({**KAFKA, "endingOffsets": '{"orders": {"0": 5}}'}, False)
    assert options.ending.offsets == {"orders": {0: 5}}
    pulsar = {"service.url": PULSAR["service.url"], "assign": '{"t": [2, 0, 2]}'}
    assigned = parse_options(pulsar, streaming=True)
    assert assigned.selection.assign == (("t", (0, 2)),)


def test_a_topic_pattern_is_kept_for_the_planner() -> None:
    kafka = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribePattern": "orders-.*"}
    selection = parse_options(kafka, streaming=True).selection
    assert (selection.option, selection.pattern, selection.topics) == (
        "subscribePattern",
        "orders-.*",
        (),
    )
    pulsar = {"service.url": PULSAR["service.url"], "topicsPattern": "public/default/o.*"}
    assert parse_options(pulsar, streaming=False).selection.pattern == "public/default/o.*"


@pytest.mark.parametrize(
    ("raw", "option", "match"),
    [
        ({"subscribe": "t"}, "url", "missing"),
        ({**KAFKA, "url": "kafka://x:1"}, "url", "not several"),
        ({"url": "http://x:1", "subscribe": "t"}, "url", "pulsar://"),
        (
            {**KAFKA, "startingoffset": "earliest"},
            "startingoffset",
            "unknown option; did you mean startingOffsets",
        ),
        ({**KAFKA, "client.no_such": "1"}, "client.no_such", "not a Client option"),
        (
            {**KAFKA, "client.connections_per_broker": "two"},
            "client.connections_per_broker",
            "not a number",
        ),
        ({**KAFKA, "client.connections_per_broker": "0"}, "client.*", "connections_per_broker"),
        ({**KAFKA, "kafka.security.protocol": "TLS"}, "kafka.security.protocol", "unknown"),
        ({**KAFKA, "kafka.sasl.jaas.config": "x"}, "kafka.sasl.jaas.config", "username"),
        ({"url": "kafka://x:1"}, "subscribe", "missing"),
        ({**KAFKA, "topic": "b"}, "subscribe", "not several"),
        ({**KAFKA, "subscribe": " , "}, "subscribe", "names no topic"),
        ({**KAFKA, "subscribe": "", "subscribePattern": "o(("}, "subscribePattern", "not a regex"),
        ({**PULSAR, "topic": "", "topicsPattern": "[o"}, "topicsPattern", "not a regex"),
        ({**KAFKA, "subscribe": "", "assign": "[1]"}, "assign", "JSON like"),
        ({**KAFKA, "subscribe": "", "assign": "{not json"}, "assign", "not valid JSON"),
        ({**KAFKA, "startingOffsets": '{"orders": {"0": 1'}, "startingOffsets", "not valid"),
        ({**KAFKA, "startingOffsets": '{"orders": 5}'}, "startingOffsets", "JSON like"),
        ({**KAFKA, "startingOffsets": '{"orders": {"x": 5}}'}, "startingOffsets", "partition"),
        (
            {**KAFKA, "startingOffsets": '{"orders": {"0": "abc"}}'},
            "startingOffsets: orders/0",
            "not a Kafka offset",
        ),
        (
            {**PULSAR, "startingOffsets": '{"orders": {"0": 12}}'},
            "startingOffsets: orders/0",
            "not a Pulsar position",
        ),
        ({**KAFKA, "endingOffsets": "latest"}, "endingOffsets", "batch query"),
        ({**KAFKA, "failOnDataLoss": "yes"}, "failOnDataLoss", "true or false"),
        ({**KAFKA, "maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger", "above 0"),
        ({**KAFKA, "maxOffsetsPerTrigger": "lots"}, "maxOffsetsPerTrigger", "not a number"),
        (
            {**KAFKA, "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "9"},
            "minOffsetsPerTrigger",
            "maxOffsetsPerTrigger",
        ),
        ({**KAFKA, "maxTriggerDelay": "soon"}, "maxTriggerDelay", "duration"),
        (
            {**KAFKA, "startingOffsetsByTimestamp": '{"orders": {"0": "x"}}'},
            "startingOffsetsByTimestamp",
            "time in ms",
        ),
        (
            {**KAFKA, "startingOffsetsByTimestampStrategy": "skip"},
            "startingOffsetsByTimestampStrategy",
            "error or latest",
        ),
    ],
)
def test_bad_options_are_named(raw: dict[str, str], option: str, match: str) -> None:
    fails(option, match, {k: v for k, v in raw.items() if v != ""})


def test_mode_specific_options() -> None:
    fails(
        "startingOffsets",
        "streaming queries only",
        {**KAFKA, "startingOffsets": "latest"},
        streaming=False,
    )
    fails("endingOffsets", "cannot end", {**KAFKA, "endingOffsets": "earliest"}, streaming=False)
    fails(
        "endingOffsets",
        "cannot end",
        {**KAFKA, "endingOffsets": '{"orders": {"0": -2}}'},
        streaming=False,
    )
    # The schema is asked for before the mode is known: both pass there.
    assert parse_options({**KAFKA, "startingOffsets": "latest"}, None).starting.kind == "latest"


def test_load_path_names_the_topic() -> None:
    options = parse_options({"url": "pulsar://h:1", "path": "orders"}, streaming=True)
    assert options.selection.topics == ("orders",) and options.selection.option == "path"
