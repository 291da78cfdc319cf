"""Client.close() while the broker has stopped reading from the client.

producer.md: ``close()`` flushes for at most the send timeout, unregisters the producer
(a request, bounded by the operation timeout), fails what is left, and ``Client.close()``
then closes every connection. So a close must return within the send timeout plus the
operation timeout, and leave no socket, task or unretrieved error behind, even when the
broker reads nothing and the socket's write buffer cannot drain.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import msgclient
from msgclient.core.network.connection import Connection
from tests.faults.conftest import (
    TIMEOUT,
    Figures,
    LoopLag,
    Target,
    client_tasks,
)

SEND_TIMEOUT_S = 1.0
OPERATION_TIMEOUT_S = 2.0
MESSAGES = 24
SIZE = 256 * 1024


def connections(client: msgclient.Client) -> list[Connection[Any]]:
    pool = client._backend.pool  # type: ignore[attr-defined]
    return [
        t.result()
        for t in pool._connections.values()
        if t.done() and not t.cancelled() and t.exception() is None
    ]


async def test_client_close_is_prompt_and_complete_while_the_broker_stops_reading(
    target: Target,
    topic: str,
    figures: type[Figures],
    loop_errors: list[dict[str, Any]],
    loop_lag: LoopLag,
) -> None:
    tasks_before = client_tasks()
    client = msgclient.Client(
        target.url,
        keep_alive_interval_seconds=60.0,  # the stuck connection must not be dropped first
        operation_timeout_seconds=OPERATION_TIMEOUT_S,
        initial_backoff_interval_ms=50,
        max_backoff_interval_ms=500,
    )
    producer = await client.create_producer(
        topic, send_timeout_millis=int(SEND_TIMEOUT_S * 1000), **target.producer_options
    )
    await asyncio.wait_for(producer.send(b"warm"), TIMEOUT)
    for proxied in target.proxy.live:
        proxied.stop_reading_from_client()
    futures = [await producer.send_async(bytes([i]) * SIZE) for i in range(MESSAGES)]
    results = await asyncio.wait_for(
        asyncio.gather(*futures, return_exceptions=True), SEND_TIMEOUT_S + TIMEOUT
    )
    assert all(isinstance(r, msgclient.SendTimeoutError) for r in results)
    opened = connections(client)
    if target.protocol == "kafka":
        # The Produce requests time out too; the partitions then look their leader up again
        # on the same stuck connection. Close while those lookups are in flight.
        deadline = time.monotonic() + OPERATION_TIMEOUT_S + TIMEOUT
        while not client._backend.lookup._in_flight:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "no lookup started"
            await asyncio.sleep(0.01)

    closing = time.monotonic()
    await asyncio.wait_for(client.close(), 30)
    closed_in = time.monotonic() - closing
    still_open = [c for c in opened if not c.closed.done()]
    outlived = client_tasks() - tasks_before
    # Let what outlived the close end (bounded), so that nothing spills into the next test.
    if outlived:
        await asyncio.wait(outlived, timeout=OPERATION_TIMEOUT_S + TIMEOUT)
    for connection in still_open:
        connection.abort(ConnectionResetError("aborted by the test"))
    await asyncio.sleep(0.05)
    left_open = len(still_open)
    # asyncio reports a task's unretrieved exception when the task is collected: drop the
    # client (which still reaches them) first.
    del client, producer, futures, results, opened, still_open
    gc.collect()
    await asyncio.sleep(0)
    errors = [f"{c.get('message')}: {c.get('exception')!r}" for c in loop_errors]
    loop_errors.clear()  # reported here, as this test's finding, not at teardown
    figures.add(
        f"{target.protocol} Client.close() while the broker reads nothing",
        closed_in_s=closed_in,
        bound_s=SEND_TIMEOUT_S + OPERATION_TIMEOUT_S,
        sockets_left_open=left_open,
        tasks_outliving_close=len(outlived),
        unretrieved_errors=len(errors),
    )
    assert closed_in <= SEND_TIMEOUT_S + OPERATION_TIMEOUT_S + loop_lag.allowance(timers=2)
    assert not left_open, f"{left_open} sockets still open after close"
    assert not outlived, sorted(str(t.get_coro()) for t in outlived)
    assert not errors, errors
