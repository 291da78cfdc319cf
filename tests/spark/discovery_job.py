"""The driver of test_discovery.py, in a process of its own (Spark looks for Python data
sources once per JVM): a plain SparkSession, never told of msgclient, counts a topic
through ``format("msgclient")``.

    python tests/spark/discovery_job.py URL TOPIC  ->  the row count on stdout
"""

from __future__ import annotations

import os
import sys


def main(url: str, topic: str) -> int:
    from msgclient.spark.java import ensure_java

    ensure_java()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("msgclient-discovery-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    try:
        frame = spark.read.format("msgclient").option("url", url).option("subscribe", topic)
        return int(frame.load().count())
    finally:
        spark.stop()


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
