"""NodeSender: ready batches drained into requests, one batch per partition per request,
bounded by the request size and the requests in flight."""

from __future__ import annotations

import asyncio

from protocols.kafkawire.node_sender import NodeSender, ReadyBatch


class Batch(ReadyBatch):
    __slots__ = ("name",)

    def __init__(self, partition: int, size: int, name: str) -> None:
        super().__init__(partition, size)
        self.name = name


class Broker:
    """Records each request; answers when the test says so."""

    def __init__(self) -> None:
        self.requests: list[list[str]] = []
        self.answers: list[asyncio.Future[None]] = []

    def send(self, batches: list[Batch]) -> asyncio.Future[None]:
        self.requests.append([b.name for b in batches])
        answer = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return answer


def fail(batches: list[Batch], error: Exception) -> None:
    raise AssertionError(f"unexpected failure of {[b.name for b in batches]}: {error!r}")


async def turn() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_one_request_carries_one_batch_of_each_partition() -> None:
    broker = Broker()
    sender = NodeSender(broker.send, on_failure=fail, max_in_flight=5, max_request_bytes=None)
    for name, partition in [("a1", 0), ("b1", 1), ("a2", 0), ("c1", 2), ("b2", 1)]:
        sender.ready(Batch(partition, 10, name))
    await turn()
    # the second batches of partitions 0 and 1 wait for the next request, in order
    assert broker.requests == [["a1", "b1", "c1"], ["a2", "b2"]]


async def test_requests_in_flight_are_bounded() -> None:
    broker = Broker()
    sender = NodeSender(broker.send, on_failure=fail, max_in_flight=2, max_request_bytes=None)
    for i in range(4):
        sender.ready(Batch(0, 10, f"p{i}"))
    await turn()
    assert broker.requests == [["p0"], ["p1"]]
    assert sender.in_flight == 2 and len(sender) == 2
    broker.answers[0].set_result(None)
    await turn()
    assert broker.requests[-1] == ["p2"]
    for answer in broker.answers[1:]:
        answer.set_result(None)
    await turn()
    assert broker.requests[-1] == ["p3"]


async def test_request_size_is_bounded_but_a_big_batch_still_goes() -> None:
    broker = Broker()
    sender = NodeSender(broker.send, on_failure=fail, max_in_flight=None, max_request_bytes=100)
    sender.ready(Batch(0, 60, "a"))
    sender.ready(Batch(1, 60, "b"))
    sender.ready(Batch(2, 500, "huge"))
    await turn()
    assert broker.requests == [["a"], ["b"], ["huge"]]


async def test_a_request_that_cannot_be_sent_fails_its_batches_not_the_loop() -> None:
    failed: list[tuple[list[str], str]] = []

    def broken(batches: list[Batch]) -> None:
        raise RuntimeError("cannot encode")

    sender = NodeSender(
        broken,
        on_failure=lambda batches, error: failed.append(([b.name for b in batches], str(error))),
        max_in_flight=5,
        max_request_bytes=None,
    )
    sender.ready(Batch(0, 1, "a"))
    sender.ready(Batch(1, 1, "b"))
    await turn()
    assert failed == [(["a", "b"], "cannot encode")]
    assert sender.in_flight == 0
