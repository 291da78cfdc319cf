"""The driver of test_exactly_once.py's kill test, in a process of its own (a killed
driver takes its SparkContext with it):

    python tests/spark/exactly_once_job.py URL SOURCE SINK CHECKPOINT KILL

copies SOURCE to SINK with exactlyOnce=true, 100 rows a micro-batch (Trigger.AvailableNow).
KILL is ``none``, or ``after-commit:N``: when Spark commits micro-batch N, the sink's commit
(in a Python worker of the driver) kills this driver and its JVM with SIGKILL once it has
committed the tasks' transactions to Kafka; Spark has not logged the commit then, so a
restart replays the micro-batch.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql.datasource import WriterCommitMessage

from msgclient.spark.sink import StreamWriter
from msgclient.spark.source import MsgClientDataSource


class KillingStreamWriter(StreamWriter):
    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        super().commit(messages, batchId)
        if os.environ["EXACTLY_ONCE_JOB_KILL"] == f"after-commit:{batchId}":
            _kill_the_driver()


def _kill_the_driver() -> None:
    pids = Path(os.environ["EXACTLY_ONCE_JOB_PIDS"]).read_text().split()
    for pid in pids:  # the JVM first: it must not log the commit
        os.kill(int(pid), signal.SIGKILL)
    os._exit(1)  # and this worker answers nobody


class KillingSource(MsgClientDataSource):
    @classmethod
    def name(cls) -> str:
        return "msgclient-killing"

    def streamWriter(self, schema: object, overwrite: bool) -> StreamWriter:
        writer = super().streamWriter(schema, overwrite)
        return KillingStreamWriter(writer.options, writer.columns)


def main(url: str, source: str, sink: str, checkpoint: str, kill: str) -> None:
    from msgclient.spark import local_session

    pids = Path(checkpoint).with_suffix(".pids")
    os.environ["EXACTLY_ONCE_JOB_KILL"] = kill  # the JVM and its Python workers inherit it
    os.environ["EXACTLY_ONCE_JOB_PIDS"] = str(pids)
    spark = local_session("local[2]", "msgclient-exactly-once-job")
    pids.write_text(f"{spark.sparkContext._gateway.proc.pid} {os.getpid()}")
    spark.dataSource.register(KillingSource)
    query = (
        spark.readStream.format("msgclient")
        .option("url", url)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .select("key", "value")
        .writeStream.format("msgclient-killing")
        .option("url", url)
        .option("topic", sink)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        if not query.awaitTermination(90):
            raise SystemExit("the query did not finish within 90 s")
        if query.exception() is not None:
            raise SystemExit(str(query.exception()))
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
