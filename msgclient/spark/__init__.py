"""Read Pulsar and Kafka topics into Spark DataFrames, batch and streaming, with msgclient.

    df = (spark.readStream.format("msgclient")
          .option("url", "pulsar://localhost:6650").option("subscribe", "orders").load())

Spark registers ``msgclient`` by itself (through the ``pyspark_msgclient`` module msgclient
installs); where it does not (editable installs), ``msgclient.spark.register(spark)``.
Options, schema and semantics: docs/spark.md. Needs ``pip install msgclient[spark]``.
"""

from __future__ import annotations

from msgclient.spark.errors import DataLossError, SourceOptionError
from msgclient.spark.java import JavaNotFoundError, ensure_java
from msgclient.spark.session import local_session, register
from msgclient.spark.source import MsgClientDataSource

__all__ = [
    "DataLossError",
    "JavaNotFoundError",
    "MsgClientDataSource",
    "SourceOptionError",
    "ensure_java",
    "local_session",
    "register",
]
