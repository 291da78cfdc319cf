"""msgclient: an asyncio-native client for Apache Pulsar and Apache Kafka."""

__version__ = "0.1.0"

from msgclient.client import Client  # noqa: E402
from msgclient.core.compression import CompressionType  # noqa: E402
from msgclient.errors import *  # noqa: E402, F403
from msgclient.message import MessageId  # noqa: E402
from msgclient.options import (  # noqa: E402
    BatchingType,
    ClientOptions,
    HashingScheme,
    PartitionsRoutingMode,
    ProducerOptions,
)
from msgclient.producer import Producer  # noqa: E402
