"""One SparkSession for the whole Spark test run: local[2, 2] (two cores, and two attempts
per task as a cluster would retry: exactly-once writes are tested under a retry),
loopback only, no UI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from msgclient.spark import local_session

    session = local_session(
        "local[2, 2]",
        "msgclient-tests",
        **{
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            # Streaming tests stop and start queries: keep the state store quick.
            "spark.sql.streaming.stopTimeout": "30s",
        },
    )
    yield session
    session.stop()
