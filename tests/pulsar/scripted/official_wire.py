"""What the official pulsar-client writes: run it against a scripted server and read the
commands the server received. The reference for the bytes of PRODUCER and SUBSCRIBE."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pulsar

from tests.pulsar.scripted.server import (
    WAIT,
    ScriptedPulsarServer,
    pb,
)


async def official_command(
    server: ScriptedPulsarServer, command_type: int, action: Callable[[pulsar.Client], Any]
) -> pb.BaseCommand:
    """Run ``action(client)`` with an official client of ``server`` (in a thread: it
    blocks, and the server answers on this loop); the one ``command_type`` it wrote."""
    before = len(server.commands(command_type))

    def run() -> None:
        client = pulsar.Client(
            server.url,
            operation_timeout_seconds=int(WAIT),
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            action(client)
        finally:
            client.close()

    await asyncio.wait_for(asyncio.to_thread(run), 4 * WAIT)
    received = server.commands(command_type)[before:]
    assert len(received) == 1, f"the official client wrote {len(received)} such commands"
    return received[0].command
