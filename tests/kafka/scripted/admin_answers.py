"""The admin requests tansu cannot show, answered by the scripted server as Kafka 3.x's
KafkaApis does: CreatePartitions (tansu lacks it), DeleteRecords (tansu panics) and
OffsetDelete (tansu lacks it), plus FindCoordinator (the server is every group's
coordinator). ``AdminAnswers(server)`` installs the handlers; tests set the state a broker
would have (``log_start``, ``group_offsets``, ``subscribed``) and read it back.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreatePartitionsResponse, DeleteRecordsResponse
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetDeleteResponse
from kafka.protocol.metadata import FindCoordinatorResponse

from tests.kafka.scripted.server import (
    NODE_ID,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
    Received,
    ScriptedKafkaServer,
    ServerConnection,
)

OFFSET_OUT_OF_RANGE = 1
INVALID_PARTITIONS = 37
GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86


class AdminAnswers:
    def __init__(self, server: ScriptedKafkaServer) -> None:
        self.server = server
        self.log_start: dict[tuple[str, int], int] = {}
        self.group_offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.subscribed: dict[str, set[str]] = {}  # group -> topics its members read
        server.handlers.update(
            {
                ApiKey.FindCoordinator: self.answer_find_coordinator,
                ApiKey.CreatePartitions: self.answer_create_partitions,
                ApiKey.DeleteRecords: self.answer_delete_records,
                ApiKey.OffsetDelete: self.answer_offset_delete,
            }
        )

    def answer_find_coordinator(self, conn: ServerConnection, received: Received) -> None:
        server = self.server
        response = FindCoordinatorResponse(
            throttle_time_ms=0,
            error_code=NONE,
            error_message=None,
            node_id=NODE_ID,
            host=server.advertised_host,
            port=server.port,
        )
        conn.answer(received, response)

    def answer_create_partitions(self, conn: ServerConnection, received: Received) -> None:
        results = []
        for topic in received.request.topics:
            current = self.server.topics.get(topic.name)
            code, message = NONE, None
            if current is None:
                code = UNKNOWN_TOPIC_OR_PARTITION
            elif topic.count < current:
                code = INVALID_PARTITIONS
                message = (
                    f"Topic currently has {current} partitions, which is higher than the "
                    f"requested {topic.count}."
                )
            elif topic.count == current:
                code, message = INVALID_PARTITIONS, f"Topic already has {current} partitions."
            else:
                self.server.topics[topic.name] = topic.count
            results.append(
                CreatePartitionsResponse.CreatePartitionsTopicResult(
                    name=topic.name, error_code=code, error_message=message
                )
            )
        conn.answer(received, CreatePartitionsResponse(throttle_time_ms=0, results=results))

    def answer_delete_records(self, conn: ServerConnection, received: Received) -> None:
        Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
        topics = []
        for topic in received.request.topics:
            partitions = []
            for p in topic.partitions:
                code, low = self._delete_before(topic.name, p.partition_index, p.offset)
                partitions.append(
                    Topic.DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=low, error_code=code
                    )
                )
            topics.append(Topic(name=topic.name, partitions=partitions))
        conn.answer(received, DeleteRecordsResponse(throttle_time_ms=0, topics=topics))

    def _delete_before(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        if partition >= self.server.topics.get(topic, 0):
            return UNKNOWN_TOPIC_OR_PARTITION, -1
        high = len(self.server.logs.get((topic, partition), []))
        if offset == -1:  # Kafka's "up to the high watermark"
            offset = high
        if not 0 <= offset <= high:
            return OFFSET_OUT_OF_RANGE, -1
        start = max(self.log_start.get((topic, partition), 0), offset)
        self.log_start[(topic, partition)] = start
        return NONE, start

    def answer_offset_delete(self, conn: ServerConnection, received: Received) -> None:
        request = received.request
        offsets = self.group_offsets.get(request.group_id)
        Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
        if offsets is None:
            response = OffsetDeleteResponse(
                error_code=GROUP_ID_NOT_FOUND, throttle_time_ms=0, topics=[]
            )
            conn.answer(received, response)
            return
        subscribed = self.subscribed.get(request.group_id, set())
        topics: list[Any] = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                code = GROUP_SUBSCRIBED_TO_TOPIC if topic.name in subscribed else NONE
                if code == NONE:
                    offsets.pop((topic.name, p.partition_index), None)
                partitions.append(
                    Topic.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                )
            topics.append(Topic(name=topic.name, partitions=partitions))
        conn.answer(
            received, OffsetDeleteResponse(error_code=NONE, throttle_time_ms=0, topics=topics)
        )
