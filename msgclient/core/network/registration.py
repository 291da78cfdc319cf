"""Registering producers and consumers with retries: the first time, and after a reconnect.

Both follow the Java client's ConnectionHandler: transient failures (no connection,
timeouts, a broker not ready) are retried with exponential backoff; a refusal that a retry
cannot fix (not found, fenced, not authorized) ends the attempt at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from msgclient.core.network.backoff import Backoff
from msgclient.errors import (
    BrokerError,
    ConnectError,
    ConnectionClosedError,
    MsgClientError,
    OperationTimeoutError,
    TooManyRequestsError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# Errors after which retrying can succeed. (Not TopicLookupError: too many redirects or no
# broker URL is the cluster's configuration, not a passing state.)
RETRIABLE_ERRORS = (
    ConnectError,
    ConnectionClosedError,
    OperationTimeoutError,
    TooManyRequestsError,
)
RETRIABLE_BROKER_ERRORS = frozenset(
    {"ServiceNotReady", "MetadataError", "PersistenceError", "UnknownError"}
)


def is_retriable(error: MsgClientError) -> bool:
    if isinstance(error, BrokerError):
        return error.retriable or error.code in RETRIABLE_BROKER_ERRORS
    return isinstance(error, RETRIABLE_ERRORS)


async def register_with_retry(
    connect: Callable[[], Awaitable[T]],
    backoff: Backoff,
    timeout: float,
    what: str,
    *,
    clock: Callable[[], float] | None = None,
) -> T:
    """``connect()``, retrying transient failures for up to ``timeout`` seconds; raises the
    last error when time is up or the error is not retriable. The deadline is on ``clock``
    (the running loop's by default)."""
    now = clock or asyncio.get_running_loop().time
    deadline = now() + timeout
    while True:
        try:
            result = await connect()
        except MsgClientError as error:
            delay = backoff.next()
            if not is_retriable(error) or now() + delay > deadline:
                raise
            log.info("registering %s failed (%s): retrying", what, error)
            await backoff.wait(delay)
            continue
        backoff.reset()
        return result


async def reconnect(
    connect: Callable[[], Awaitable[T]], backoff: Backoff, stopped: Callable[[], bool], what: str
) -> T | MsgClientError | None:
    """Retry ``connect()`` with backoff until it succeeds (its result), fails for good (the
    error), or ``stopped()`` turns true (None)."""
    while not stopped():
        await backoff.wait()
        if stopped():
            return None
        try:
            result = await connect()
        except MsgClientError as error:
            if is_retriable(error):
                log.info("reconnecting %s failed: %s", what, error)
                continue
            log.error("%s cannot reconnect: %s", what, error)
            return error
        backoff.reset()
        return result
    return None
