"""The source's options: Spark hands them over as lower-cased strings; parse and check them.

Spark's Kafka source's names and the Pulsar connector's are accepted where they mean the
same thing, so that a job ports by changing its format name; every error names the option.
"""

from __future__ import annotations

import difflib
import enum
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import attrs

from msgclient import options as msgclient_options
from msgclient.errors import InvalidConfigurationError
from msgclient.options import ClientOptions
from msgclient.spark.errors import SourceOptionError
from msgclient.spark.positions import Position, Protocol, from_json
from msgclient.validators import build

log = logging.getLogger("msgclient.spark")

CLIENT_PREFIX = "client."
# Spark Kafka / Pulsar connector options that have no meaning here: accepted, logged.
IGNORED = ("groupIdPrefix", "kafka.group.id", "fetchOffset.numRetries",
           "fetchOffset.retryIntervalMs", "admin.url")  # fmt: skip
TOPIC_OPTIONS = ("subscribe", "topic", "topics", "path", "assign", "subscribePattern",
                 "topicsPattern")  # fmt: skip
URL_OPTIONS = ("url", "service.url", "kafka.bootstrap.servers")
KNOWN = (*URL_OPTIONS, *TOPIC_OPTIONS, *IGNORED, "kafka.security.protocol", "kafka.client.id",
         "kafka.sasl.mechanism", "kafka.sasl.jaas.config", "startingOffsets", "endingOffsets",
         "startingOffsetsByTimestamp", "startingTimestamp", "startingOffsetsByTimestampStrategy",
         "failOnDataLoss", "includeHeaders", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
         "maxEntriesPerTrigger", "minEntriesPerTrigger", "maxTriggerDelay", "minPartitions",
         "maxRecordsPerPartition", "pollTimeoutMs", "kafkaConsumer.pollTimeoutMs",
         "receiverQueueSize", "batchRows")  # fmt: skip
_CANONICAL = {name.lower(): name for name in KNOWN}
_SECURITY_SCHEMES = {"plaintext": "kafka", "sasl_plaintext": "kafka", "ssl": "kafka+ssl",
                     "sasl_ssl": "kafka+ssl"}  # fmt: skip
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_DURATION = re.compile(r"(\d+)\s*(ms|s|sec|m|min|h|d)?", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                "d": 86_400_000}  # fmt: skip

OffsetMap = dict[str, dict[int, Position]]  # topic -> partition -> position or -2 / -1


@dataclass(frozen=True)
class TopicSelection:
    """Topics to read (all their partitions), partitions by topic (``assign``), or the
    topics a regex matches (``pattern``; listed again at each micro-batch)."""

    option: str
    topics: tuple[str, ...] = ()
    assign: tuple[tuple[str, tuple[int, ...]], ...] = ()
    pattern: str | None = None

    def names(self) -> tuple[str, ...]:
        return self.topics or tuple(topic for topic, _ in self.assign)


@dataclass(frozen=True)
class OffsetSpec:
    """``startingOffsets`` / ``endingOffsets`` (and the timestamp variants of the start)."""

    option: str
    kind: Literal["earliest", "latest", "specific", "timestamp"]
    offsets: OffsetMap = field(default_factory=dict)
    timestamps: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int | None = None  # startingTimestamp: every partition


@dataclass(frozen=True)
class SourceOptions:
    """Everything the source needs from its options: plain data, picklable."""

    url: str
    protocol: Protocol
    client_options: dict[str, Any]
    selection: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: Literal["error", "latest"] = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    # The limits count Pulsar entries (maxEntriesPerTrigger, the Pulsar connector's), not
    # messages: a producer batch is one entry of many messages.
    limits_count_entries: bool = False
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = 1_000_000
    poll_timeout_ms: int = 120_000
    receiver_queue_size: int = 2000
    batch_rows: int = 10_000


def parse_options(raw: Mapping[str, str], streaming: bool | None) -> SourceOptions:
    """Check and parse the options of a batch (``streaming=False``) or streaming read
    (None: either, for the schema)."""
    options = {str(k).lower(): str(v) for k, v in raw.items()}
    client_options = client_options_of(options)
    unknown = sorted(k for k in options if k not in _CANONICAL and not k.startswith(CLIENT_PREFIX))
    if unknown:
        close = difflib.get_close_matches(unknown[0], _CANONICAL, n=1, cutoff=0.8)
        hint = f"did you mean {_CANONICAL[close[0]]}? " if close else ""
        raise SourceOptionError(
            unknown[0],
            f"unknown option; {hint}valid: {', '.join(KNOWN)} and client.<Client option>",
        )
    for name in IGNORED:
        if name.lower() in options:
            log.info("msgclient source: option %s has no meaning here and is ignored", name)
    url = url_of(options)
    protocol = Protocol.of_url(url)
    check_client_options(client_options)
    starting = _starting(options, protocol, streaming)
    ending = _offsets(options, "endingOffsets", protocol, "latest")
    if streaming and "endingoffsets" in options:
        raise SourceOptionError("endingOffsets", "only a batch query (spark.read) has an end")
    if streaming is False and starting.kind == "latest":
        raise SourceOptionError("startingOffsets", "'latest' is for streaming queries only")
    if ending.kind == "earliest" or any(
        v == -2 for parts in ending.offsets.values() for v in parts.values()
    ):
        raise SourceOptionError("endingOffsets", "earliest (-2) cannot end a range")
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError("startingOffsetsByTimestampStrategy", "expected error or latest")
    if "polltimeoutms" not in options and "kafkaconsumer.polltimeoutms" in options:
        options["polltimeoutms"] = options["kafkaconsumer.polltimeoutms"]
    min_rows, max_rows, in_entries = _read_limits(options, protocol)
    return SourceOptions(
        url=url,
        protocol=protocol,
        client_options=client_options,
        selection=_selection(options),
        starting=starting,
        ending=ending,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        fail_on_data_loss=bool_option(options, "failOnDataLoss", True),
        include_headers=bool_option(options, "includeHeaders", False),
        max_offsets_per_trigger=max_rows,
        min_offsets_per_trigger=min_rows,
        limits_count_entries=in_entries,
        max_trigger_delay_ms=_duration(options, "maxTriggerDelay", 15 * 60_000),
        min_partitions=_positive(options, "minPartitions"),
        max_records_per_partition=_positive(options, "maxRecordsPerPartition", 1_000_000),
        poll_timeout_ms=_positive(options, "pollTimeoutMs", 120_000) or 120_000,
        receiver_queue_size=_positive(options, "receiverQueueSize", 2000) or 2000,
        batch_rows=_positive(options, "batchRows", 10_000) or 10_000,
    )


def _read_limits(
    options: dict[str, str], protocol: Protocol
) -> tuple[int | None, int | None, bool]:
    """(min, max, counted in entries) of a micro-batch: ``min/maxOffsetsPerTrigger`` count
    messages (rows) on both brokers; ``min/maxEntriesPerTrigger`` count Pulsar entries."""
    by_entries = [name for name in ("maxEntriesPerTrigger", "minEntriesPerTrigger")
                  if name.lower() in options]  # fmt: skip
    if by_entries and protocol is not Protocol.PULSAR:
        raise SourceOptionError(
            by_entries[0], "counts Pulsar entries: on Kafka use maxOffsetsPerTrigger"
        )
    family = "EntriesPerTrigger" if by_entries else "OffsetsPerTrigger"
    if by_entries and any(f"{m}offsetspertrigger" in options for m in ("min", "max")):
        raise SourceOptionError(
            by_entries[0], "counts entries, minOffsetsPerTrigger / maxOffsetsPerTrigger "
            "messages: give one kind of limit",
        )  # fmt: skip
    min_rows = _positive(options, "min" + family)
    max_rows = _positive(options, "max" + family)
    if min_rows is not None and max_rows is not None and min_rows > max_rows:
        raise SourceOptionError("min" + family, f"{min_rows} > max{family}")
    return min_rows, max_rows, bool(by_entries)


# -- connection -------------------------------------------------------------------------


def url_of(options: dict[str, str]) -> str:
    given = {name: options[name.lower()] for name in URL_OPTIONS if name.lower() in options}
    if not given:
        raise SourceOptionError(
            "url",
            "missing: set url (pulsar://host:6650 or kafka://host:9092), service.url "
            "or kafka.bootstrap.servers",
        )
    if len(given) > 1:
        names = " and ".join(given)
        raise SourceOptionError(next(iter(given)), f"give one of {names}, not several")
    (name, value), = given.items()  # fmt: skip
    if name == "kafka.bootstrap.servers":
        protocol = options.get("kafka.security.protocol", "PLAINTEXT").lower()
        if protocol not in _SECURITY_SCHEMES:
            raise SourceOptionError("kafka.security.protocol", f"unknown protocol {protocol!r}")
        value = f"{_SECURITY_SCHEMES[protocol]}://{value.replace(' ', '')}"
    elif "kafka.security.protocol" in options:
        raise SourceOptionError("kafka.security.protocol", "goes with kafka.bootstrap.servers")
    return value


def prefixed_options(
    options: dict[str, str], prefix: str, kind: type[Any], what: str
) -> dict[str, Any]:
    """``<prefix><name>`` options, typed as the options class ``kind`` (``what``: "Client",
    "Producer") declares them, an enum by its member's name; a name it lacks, or a type no
    text can give, is an error."""
    fields = {f.name.lower(): f for f in attrs.fields(kind)}
    result: dict[str, Any] = {}
    for key, text in options.items():
        if not key.startswith(prefix):
            continue
        attribute = fields.get(key[len(prefix) :])
        if attribute is None:
            raise SourceOptionError(key, f"not a {what} option; valid: {', '.join(fields)}")
        result[attribute.name] = _typed(key, text, str(attribute.type))
    return result


def client_options_of(options: dict[str, str]) -> dict[str, Any]:
    """``client.<name>`` options, typed as ``ClientOptions`` declares them, plus the
    Kafka settings that have a client option of the same meaning."""
    result = prefixed_options(options, CLIENT_PREFIX, ClientOptions, "Client")
    if "kafka.client.id" in options:
        result["client_id"] = options["kafka.client.id"]
    if "kafka.sasl.mechanism" in options:
        result["sasl_mechanism"] = options["kafka.sasl.mechanism"].upper()
    if "kafka.sasl.jaas.config" in options:
        found = dict(_JAAS_FIELD.findall(options["kafka.sasl.jaas.config"]))
        if set(found) != {"username", "password"}:
            raise SourceOptionError("kafka.sasl.jaas.config", 'needs username="..." password=')
        result["sasl_username"], result["sasl_password"] = found["username"], found["password"]
        result.setdefault("sasl_mechanism", "PLAIN")
    return result


def check_client_options(client_options: dict[str, Any]) -> None:
    try:
        build(ClientOptions, "client", client_options)
    except InvalidConfigurationError as error:
        raise SourceOptionError("client.*", str(error)) from None


def _typed(option: str, text: str, kind: str) -> Any:
    if "None" in kind and text.lower() in ("none", "null"):
        return None
    if kind.startswith("bool"):
        return _parse_bool(option, text)
    if kind.startswith("int"):
        return _number(option, text, int)
    if kind.startswith("float"):
        return _number(option, text, float)
    if kind.startswith("str"):
        return text
    named = getattr(msgclient_options, kind, None)
    if isinstance(named, type) and issubclass(named, enum.Enum):
        member = named.__members__.get(text.strip()) or named.__members__.get(text.strip().upper())
        if member is None:
            raise SourceOptionError(
                option, f"{text!r} is not one of {', '.join(named.__members__)}"
            )
        return member
    raise SourceOptionError(option, f"a {kind} cannot be given as text: pass it in code")


# -- topics and offsets ---------------------------------------------------------------


def _selection(options: dict[str, str]) -> TopicSelection:
    given = [name for name in TOPIC_OPTIONS if name.lower() in options]
    if len(given) != 1:
        problem = "missing" if not given else f"give one of {', '.join(given)}, not several"
        raise SourceOptionError(
            given[0] if given else "subscribe",
            f"{problem}: name the topics with subscribe, topic, topics or assign",
        )
    name = given[0]
    value = options[name.lower()]
    if name in ("subscribePattern", "topicsPattern"):
        try:
            re.compile(value)
        except re.error as error:
            raise SourceOptionError(name, f"{value!r} is not a regex: {error}") from None
        return TopicSelection(name, pattern=value)
    if name == "assign":
        parsed = _json(name, value)
        if not isinstance(parsed, dict) or not all(
            isinstance(parts, list) and all(_is_index(p) for p in parts)
            for parts in parsed.values()
        ):
            raise SourceOptionError(name, 'expected JSON like {"topicA": [0, 1], "topicB": [2]}')
        assign = tuple(sorted((t, tuple(sorted(set(p)))) for t, p in parsed.items() if p))
        if not assign:
            raise SourceOptionError(name, "assigns no partition")
        return TopicSelection(name, assign=assign)
    topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
    if not topics:
        raise SourceOptionError(name, "names no topic")
    return TopicSelection(name, topics=topics)


def _starting(options: dict[str, str], protocol: Protocol, streaming: bool | None) -> OffsetSpec:
    # The priority of Spark's Kafka source: startingTimestamp, then by-timestamp, then
    # startingOffsets.
    if "startingtimestamp" in options:
        timestamp = _number("startingTimestamp", options["startingtimestamp"], int)
        return OffsetSpec("startingTimestamp", "timestamp", timestamp=timestamp)
    if "startingoffsetsbytimestamp" in options:
        name = "startingOffsetsByTimestamp"
        parsed = _offset_json(name, options[name.lower()])
        timestamps: dict[str, dict[int, int]] = {}
        for topic, parts in parsed.items():
            for index, value in parts.items():
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise SourceOptionError(name, f"{topic}/{index}: {value!r} is not a time in ms")
                timestamps.setdefault(topic, {})[index] = value
        return OffsetSpec(name, "timestamp", timestamps=timestamps)
    return _offsets(options, "startingOffsets", protocol, "latest" if streaming else "earliest")


def _offsets(options: dict[str, str], name: str, protocol: Protocol, default: str) -> OffsetSpec:
    text = options.get(name.lower(), default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(name, "earliest" if text.lower() == "earliest" else "latest")
    parsed = _offset_json(name, text)
    offsets: OffsetMap = {
        topic: {index: from_json(protocol, value, f"{name}: {topic}/{index}")
                for index, value in parts.items()}
        for topic, parts in parsed.items()
    }  # fmt: skip
    return OffsetSpec(name, "specific", offsets=offsets)


def _offset_json(name: str, text: str) -> dict[str, dict[int, object]]:
    parsed = _json(name, text)
    shape = 'expected earliest, latest or JSON like {"topic": {"0": 23, "1": -2}}'
    if not isinstance(parsed, dict) or not all(isinstance(p, dict) for p in parsed.values()):
        raise SourceOptionError(name, shape)
    result: dict[str, dict[int, object]] = {}
    for topic, parts in parsed.items():
        for key, value in parts.items():
            if not key.isdigit():
                raise SourceOptionError(name, f"{topic}: partition {key!r} is not a number")
            result.setdefault(topic, {})[int(key)] = value
    return result


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SourceOptionError(name, f"not valid JSON ({error}): {text!r}") from None


def _is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# -- scalars ---------------------------------------------------------------------------


def bool_option(options: dict[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    return default if text is None else _parse_bool(name, text)


def _parse_bool(name: str, text: str) -> bool:
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise SourceOptionError(name, f"{text!r} is not true or false")


def _positive(options: dict[str, str], name: str, default: int | None = None) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return default
    value: int = _number(name, text, int)
    if value <= 0:
        raise SourceOptionError(name, f"{value} is not a number above 0")
    return value


def _number(name: str, text: str, kind: Callable[[str], Any]) -> Any:
    try:
        return kind(text.strip())
    except ValueError:
        raise SourceOptionError(name, f"{text!r} is not a number") from None


def _duration(options: dict[str, str], name: str, default_ms: int) -> int:
    text = options.get(name.lower())
    if text is None:
        return default_ms
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise SourceOptionError(name, f"{text!r} is not a duration such as 500ms, 30s or 15m")
    return int(match.group(1)) * _DURATION_MS[(match.group(2) or "ms").lower()]
