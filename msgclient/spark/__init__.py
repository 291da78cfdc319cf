"""Read Pulsar and Kafka topics into Spark DataFrames, batch and streaming, with msgclient.

    import msgclient.spark
    msgclient.spark.register(spark)  # once per SparkSession
    df = (spark.readStream.format("msgclient")
          .option("url", "pulsar://localhost:6650").option("subscribe", "orders").load())

Options, schema and semantics: docs/spark.md. Needs ``pip install msgclient[spark]``.
"""

from __future__ import annotations

from typing import Any

from msgclient.spark.errors import DataLossError, SourceOptionError
from msgclient.spark.java import JavaNotFoundError, ensure_java
from msgclient.spark.session import local_session
from msgclient.spark.source import MsgClientDataSource

# Spark registers a DefaultSource found in a top-level ``pyspark_*`` module by itself.
DefaultSource = MsgClientDataSource


def register(spark: Any) -> None:
    """Make ``format("msgclient")`` known to this SparkSession."""
    spark.dataSource.register(MsgClientDataSource)


__all__ = [
    "DataLossError",
    "DefaultSource",
    "JavaNotFoundError",
    "MsgClientDataSource",
    "SourceOptionError",
    "ensure_java",
    "local_session",
    "register",
]
