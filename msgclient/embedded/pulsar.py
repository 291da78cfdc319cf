"""PulsarBroker: a pulsar-lite broker on 127.0.0.1, for tests, examples and local development."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pulsar_lite

from msgclient.embedded._broker import EmbeddedBroker
from msgclient.embedded._process import LOOPBACK, executable
from msgclient.errors import InvalidConfigurationError, InvalidTopicNameError

_BINARY = Path(pulsar_lite.__file__).parent / "bin" / "pulsar-lite"
_METADATA_VERSION = 2


class PulsarBroker(EmbeddedBroker):
    """A pulsar-lite broker listening on ``pulsar://127.0.0.1:PORT``.

    Data persists in ``data_dir`` across :meth:`restart`, which keeps the port so that clients
    reconnect. Without ``data_dir`` a temporary directory is used and deleted by :meth:`stop`.

    ``partitioned_topics`` maps topic names (short ``"orders"`` or full
    ``"persistent://public/default/orders"``) to partition counts; ``default_partitions`` > 0
    partitions every other new topic. pulsar-lite reads partitioned topics only at start and
    rewrites their file while it runs, so :meth:`declare_partitioned_topic` on a running broker
    takes effect at the next :meth:`restart`.

    Usage::

        with PulsarBroker(partitioned_topics={"orders": 4}) as broker:
            client = pulsar.Client(broker.service_url)
    """

    name = "pulsar-lite"

    def __init__(
        self,
        data_dir: Path | None = None,
        port: int | None = None,
        partitioned_topics: Mapping[str, int] | None = None,
        default_partitions: int = 0,
    ) -> None:
        super().__init__(data_dir, port)
        if default_partitions < 0:
            raise InvalidConfigurationError(
                f"default_partitions must be 0 (not partitioned) or more, got {default_partitions}"
            )
        self._default_partitions = default_partitions
        self._partitioned_topics: dict[str, int] = {}
        for topic, partitions in (partitioned_topics or {}).items():
            self.declare_partitioned_topic(topic, partitions)

    @property
    def service_url(self) -> str:
        return f"pulsar://{LOOPBACK}:{self.port}"

    def declare_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Give ``topic`` this many partitions from the next start() or restart() on."""
        if partitions < 1:
            raise InvalidConfigurationError(
                f"a partitioned topic needs 1 partition or more, got {partitions} for {topic!r}"
            )
        self._partitioned_topics[_full_topic_name(topic)] = partitions

    def _prepare(self, data_dir: Path, port: int) -> list[str]:
        address = f"{LOOPBACK}:{port}"
        db_path = data_dir / "db"
        config_path = data_dir / "pl.toml"
        config_path.write_text(
            # json.dumps quotes strings the way TOML basic strings are written.
            f"addr = {json.dumps(address)}\n"
            f"db_path = {json.dumps(str(db_path))}\n"
            f"default_partitions = {self._default_partitions}\n"
            'log_level = "warn"\n'
            "\n"
            "[metrics]\n"
            "enabled = false  # on by default, and then it binds 0.0.0.0:8080\n"
        )
        self._write_partitioned_topics(Path(f"{db_path}.metadata.json"))
        # --addr again: a config pulsar-lite cannot parse silently falls back to 0.0.0.0:6650.
        return [
            str(executable(_BINARY)),
            "--config",
            str(config_path),
            "--addr",
            address,
            "--db-path",
            str(db_path),
            "--log-level",
            "warn",
        ]

    def _write_partitioned_topics(self, metadata_path: Path) -> None:
        # The broker keeps its own namespace and topic records in the same file: merge into it.
        metadata = json.loads(metadata_path.read_text()) if metadata_path.exists() else {}
        metadata.setdefault("version", _METADATA_VERSION)
        declared = metadata.setdefault("partitioned_topics", {})
        for topic, partitions in self._partitioned_topics.items():
            declared[topic] = {"partitions": partitions}
        metadata_path.write_text(json.dumps(metadata, indent=2))


def _full_topic_name(topic: str) -> str:
    """``"t"`` -> ``"persistent://public/default/t"``; ``"tenant/ns/t"`` gets ``persistent://``."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1 and topic:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3 and all(parts):
        return f"persistent://{topic}"
    raise InvalidTopicNameError(
        f"{topic!r} is not a topic name: use 'topic', 'tenant/namespace/topic' "
        "or 'persistent://tenant/namespace/topic'"
    )
