"""The source and the sink on a real Spark standalone cluster (a master and two workers on
loopback, started from the pip pyspark): executors are separate JVMs with Python workers of
their own, and the job is the local-mode code unchanged (cluster_job.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from msgclient.embedded import KafkaBroker
from tests.kafka.helpers import create_topic_blocking, read_blocking
from tests.spark.cluster import StandaloneCluster
from tests.spark.helpers import produce

JOB = Path(__file__).with_name("cluster_job.py")


@pytest.mark.timeout(420)  # three JVMs to start and a driver (about a minute when idle)
def test_a_job_on_a_standalone_cluster(
    kafka_broker: KafkaBroker, topic: str, tmp_path: Path
) -> None:
    create_topic_blocking(kafka_broker.bootstrap_servers, topic, 4)
    output = f"{topic}-copy"
    create_topic_blocking(kafka_broker.bootstrap_servers, output, 2)
    sent = produce(kafka_broker.service_url, topic, 80)
    with StandaloneCluster(tmp_path / "cluster", workers=2) as cluster:
        done = subprocess.run(
            [
                sys.executable,
                str(JOB),
                cluster.master_url,
                kafka_broker.service_url,
                topic,
                str(tmp_path / "checkpoint"),
                output,
            ],
            capture_output=True,
            timeout=300,
            cwd=Path(__file__).parents[2],
        )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert result["values"] == sorted(s.value.decode() for s in sent)
    assert result["partitions"] == [0, 1, 2, 3] and result["input_partitions"] == 4
    assert result["executors"] == 2
    assert result["driver_pid"] not in result["reader_pids"]
    assert result["stream_finished"] and result["stream_batches"] == [50, 30]
    copied = read_blocking(kafka_broker.bootstrap_servers, output, len(sent))
    assert sorted((r.key, r.value) for r in copied) == sorted((s.key, s.value) for s in sent)
