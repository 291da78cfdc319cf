"""Which task writes: the names a sink task's transactional id or producers take, the same
for every attempt of the task and for its replay after a restart."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import TaskContext


def task_name(write: str, partition: int) -> str:
    """The name of the task of Spark partition ``partition``; ``write`` names the streaming
    query or the batch write."""
    return f"msgclient-sink-{write}-{partition}"


def write_of(name: str) -> str:
    """What ``task_name`` was given as ``write``."""
    return name.removeprefix("msgclient-sink-").rsplit("-", 1)[0]


@dataclass(frozen=True)
class TaskScope:
    """The running task: its name, Spark partition and micro-batch."""

    name: str  # msgclient-sink-<query id or write>-<partition>
    partition: int
    batch_id: int | None  # the micro-batch; None: a batch write (nothing replays it)

    @classmethod
    def of_task(cls, job_id: str) -> TaskScope:
        """The running task's scope: its streaming query's id (the same across restarts)
        and micro-batch, else the batch write's ``job_id``."""
        context = TaskContext.get()
        assert context is not None, "a sink task runs in a Spark task"
        partition = context.partitionId()
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        if query is None or batch is None:
            return cls(task_name(job_id, partition), partition, None)
        return cls(task_name(query, partition), partition, int(batch))
