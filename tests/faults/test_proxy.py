"""The fault proxy itself, against a local echo server: what each command does to bytes."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import pytest

from tests.faults.conftest import TIMEOUT
from tests.faults.proxy import Direction, FaultProxy, FrameTracker


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def test_frame_tracker_follows_frames_split_anywhere() -> None:
    stream = frame(b"a" * 10) + frame(b"") + frame(b"b" * 300)
    for split in range(1, len(stream)):
        tracker = FrameTracker()
        starts = tracker.starts(stream[:split]) + [
            (offset + split, size) for offset, size in tracker.starts(stream[split:])
        ]
        assert [size for _, size in starts] == [10, 0, 300], split
        assert tracker.frames == 3 and tracker.in_frame == (None, 0)


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.write_eof()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


async def read_until_eof(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), TIMEOUT)


async def test_forwards_and_cuts_mid_frame(echo: int) -> None:
    async with FaultProxy("127.0.0.1", echo) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(frame(b"hello"))
        assert await asyncio.wait_for(reader.readexactly(9), TIMEOUT) == frame(b"hello")
        (connection,) = await proxy.wait_for_connections(1, TIMEOUT)
        connection.cut_mid_frame(Direction.TO_CLIENT, min_frame_size=100)
        writer.write(frame(b"x" * 10) + frame(b"y" * 1000))
        got = await read_until_eof(reader)
        assert got == frame(b"x" * 10) + frame(b"y" * 1000)[: 4 + 500]
        report = connection.cut_report
        assert report is not None and report.mid_frame
        assert (report.frame_size, report.bytes_of_frame_sent) == (1000, 504)
        writer.close()


async def test_stall_holds_bytes_and_resume_releases_them(echo: int) -> None:
    async with FaultProxy("127.0.0.1", echo) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        (connection,) = await proxy.wait_for_connections(1, TIMEOUT)
        connection.stall()
        writer.write(b"held")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readexactly(4), 0.2)
        connection.resume()
        assert await asyncio.wait_for(reader.readexactly(4), TIMEOUT) == b"held"
        writer.close()


async def test_half_close_toward_the_client_sends_eof(echo: int) -> None:
    async with FaultProxy("127.0.0.1", echo) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        (connection,) = await proxy.wait_for_connections(1, TIMEOUT)
        connection.half_close("client")
        assert await read_until_eof(reader) == b""
        writer.close()


async def test_drip_forwards_a_chunk_per_interval(echo: int) -> None:
    async with FaultProxy("127.0.0.1", echo) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        (connection,) = await proxy.wait_for_connections(1, TIMEOUT)
        connection.drip(chunk=10, interval=0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        writer.write(b"z" * 40)  # 4 chunks each way, one interval after each
        assert await asyncio.wait_for(reader.readexactly(40), TIMEOUT) == b"z" * 40
        assert loop.time() - started >= 3 * 0.05
        writer.close()
