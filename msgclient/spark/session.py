"""A SparkSession on this machine (or a cluster) with the source registered.

For examples, tests and laptops: Java found or brought (``ensure_java``), the Python of
this process for Spark's workers, everything bound to loopback, no web UI.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from msgclient.spark.java import ensure_java
from msgclient.spark.source import MsgClientDataSource


def local_session(
    master: str = "local[2]", app_name: str = "msgclient", loopback: bool = True, **conf: str
) -> Any:  # a pyspark.sql.SparkSession
    """Build (or get) a SparkSession for ``master`` with ``msgclient`` registered;
    ``conf``: more Spark settings, e.g. ``**{"spark.executor.memory": "1g"}``.

    ``loopback``: bind the driver to 127.0.0.1 (local mode, or a cluster on this
    machine); a cluster elsewhere must reach the driver: pass False.
    """
    ensure_java()
    # Spark's Python workers run this interpreter, so they see the same packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.showConsoleProgress": "false",
    }
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM's other sockets too
        settings |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    settings |= conf
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: Any) -> None:
    """Make ``format("msgclient")`` known to this SparkSession."""
    spark.dataSource.register(MsgClientDataSource)
