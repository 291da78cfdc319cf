"""The driver of test_cluster.py, run in a process of its own (one SparkContext per process):
the same source code and options as in local mode, on ``spark://`` executors.

    python tests/spark/cluster_job.py MASTER URL TOPIC CHECKPOINT OUTPUT  ->  JSON on stdout

It reads TOPIC (batch, then streaming) and writes what it read to OUTPUT through the sink.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main(master: str, url: str, topic: str, checkpoint: str, output: str) -> dict[str, Any]:
    from msgclient.spark import local_session

    spark = local_session(
        master,
        "msgclient-cluster-test",
        **{"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"},
    )
    try:
        frame = spark.read.format("msgclient").option("url", url).option("subscribe", topic).load()
        # One job: each input partition's rows, and which Python process read them (not
        # this one: executors' Python workers).
        read = frame.rdd.mapPartitions(
            lambda rows: [(os.getpid(), [(bytes(r.value).decode(), r.partition) for r in rows])]
        ).collect()
        rows = [row for _, part in read for row in part]
        # The sink on the executors: the rows read, written to OUTPUT.
        frame.select("key", "value").write.format("msgclient").option("url", url).option(
            "topic", output
        ).mode("append").save()
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        batches: list[int] = []
        query = (
            spark.readStream.format("msgclient")
            .option("url", url)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "50")
            .load()
            .writeStream.foreachBatch(lambda batch, _: batches.append(batch.count()))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        finished = query.awaitTermination(90)
        query.stop()
        return {
            "values": sorted(value for value, _ in rows),
            "partitions": sorted({partition for _, partition in rows}),
            "input_partitions": len(read),
            "reader_pids": sorted({pid for pid, _ in read}),
            "driver_pid": os.getpid(),
            "executors": executors,
            "stream_batches": batches,
            "stream_finished": finished,
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:6])))
