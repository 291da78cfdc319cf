"""A proxy in front of pulsar-lite that keeps every PRODUCER and SUBSCRIBE command a client
sends, whole: what the official client and pulsar_compat put on the wire for the same call.
"""

from __future__ import annotations

import time

from protocols.pulsarwire.proto import PulsarApi_pb2 as pb
from tests.schema.wire_tap import SchemaTap, frame

WAIT_SECONDS = 10.0


class CommandTap(SchemaTap):
    """``with CommandTap(broker_port) as tap``: clients of ``tap.service_url`` add their
    PRODUCER and SUBSCRIBE commands to ``tap.commands``, in the order sent."""

    def __init__(self, broker_port: int) -> None:
        super().__init__(broker_port)
        self.commands: list[pb.BaseCommand] = []

    def _record(self, command: pb.BaseCommand, rest: bytes) -> bytes:
        if command.type in (pb.BaseCommand.PRODUCER, pb.BaseCommand.SUBSCRIBE):
            kept = pb.BaseCommand()
            kept.CopyFrom(command)
            self.commands.append(kept)
        return frame(command, rest)

    def wait_for(self, count: int) -> list[pb.BaseCommand]:
        """The first ``count`` commands, once sent (AssertionError after WAIT_SECONDS)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while len(self.commands) < count:
            assert time.monotonic() < deadline, f"only {len(self.commands)} commands sent"
            time.sleep(0.01)
        return self.commands[:count]
