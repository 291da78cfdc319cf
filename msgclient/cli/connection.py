"""What every broker command shares: URL (and TOPIC), ``--timeout``, and the client."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgclient
from msgclient.cli.arguments import positive_float

CLOSE_SECONDS = 10.0  # longest wait for the client to close once the work is done


def add_url_arguments(parser: argparse.ArgumentParser) -> None:
    """URL and ``--timeout``: what a command that names no topic takes."""
    parser.add_argument(
        "url",
        metavar="URL",
        help="service URL: pulsar://HOST:6650 or kafka://HOST:9092 (the scheme picks the protocol)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        help="connection and operation timeout (default: the client's, 10 s to connect, "
        "30 s per operation)",
    )


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """URL, TOPIC and ``--timeout``."""
    add_url_arguments(parser)
    parser.add_argument("topic", metavar="TOPIC", help="the topic")


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    if args.timeout is None:
        return {}
    return {
        "operation_timeout_seconds": args.timeout,
        "connection_timeout_ms": max(1, round(args.timeout * 1000)),
    }


def new_client(args: argparse.Namespace) -> msgclient.Client:
    """The client of ``args.url``: a bad URL raises InvalidServiceUrlError here, before any
    connection is made (connections open on first use)."""
    return msgclient.Client(args.url, **client_options(args))


def is_kafka(client: msgclient.Client) -> bool:
    return client.service_url.scheme.startswith("kafka")


@contextlib.asynccontextmanager
async def closing(client: msgclient.Client) -> AsyncIterator[msgclient.Client]:
    """Close ``client`` on the way out, waiting at most ``CLOSE_SECONDS``: by then the
    command confirmed or acknowledged what it had to, and a dead broker must not hold
    the exit up."""
    try:
        yield client
    finally:
        with contextlib.suppress(msgclient.MsgClientError, OSError, TimeoutError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await client.close()
