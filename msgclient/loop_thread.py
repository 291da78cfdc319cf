"""The blocking facade's machinery: an event loop in a daemon thread that runs the async
client's coroutines for waiting threads (Ctrl-C in a waiting thread cancels the coroutine
on the loop), and the threads that run message listeners."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from msgclient import client as async_client
from msgclient.errors import AlreadyClosedError, InvalidConfigurationError

T = TypeVar("T")

log = logging.getLogger("msgclient.blocking")

# A waiting caller wakes this often to let a signal handler (Ctrl-C) run even where a lock
# wait cannot be interrupted; a result wakes it at once.
_WAKE_SECONDS = 0.1
# How long an interrupted call waits for its coroutine to finish cancelling, so that the
# next call does not race it (an orphaned receive would take the next message).
_CANCEL_SECONDS = 1.0


class LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="msgclient-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its outcome. Ctrl-C (or any exception
        raised in the waiting thread) cancels it on the loop, then propagates."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError(
                "a blocking msgclient call was made on the client's event loop thread (from "
                "a send callback?): it would wait for itself forever"
            )
        call = _Call(coroutine)
        try:
            self.loop.call_soon_threadsafe(call.start, self.loop)
        except RuntimeError:  # the loop is closed: so is the client
            coroutine.close()
            raise AlreadyClosedError("the client is closed") from None
        try:
            while not call.outcome.done():
                concurrent.futures.wait([call.outcome], timeout=_WAKE_SECONDS)
        except BaseException:
            self.loop.call_soon_threadsafe(call.cancel)
            concurrent.futures.wait([call.outcome], timeout=_CANCEL_SECONDS)
            raise
        return call.outcome.result()

    def snapshot(self, read: Callable[[], T]) -> T:
        """``read()`` on the loop (what it reads is changed there), or here on the loop's
        own thread (a send callback) or once the loop is closed."""
        if threading.current_thread() is self._thread or self.loop.is_closed():
            return read()
        return self.run(on_loop(read))

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def stop(self) -> None:
        _stop_loop(self.loop, self._thread)

    def close_when_dropped(
        self, client: async_client.Client, listener_threads: ListenerThreads
    ) -> weakref.finalize[Any, LoopThread]:
        """Close ``client`` and stop the loop once nothing references this runner (the
        blocking client, its producers, consumers and readers all dropped without
        ``close()``): no thread outlives them, as the official client's. Call the result
        to do it now, or ``detach()`` it once closed otherwise."""
        finalizer = weakref.finalize(
            self, _close_dropped, self.loop, self._thread, client, listener_threads
        )
        finalizer.atexit = False  # at exit the daemon thread just ends
        return finalizer


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    # The default executor's threads (host name lookups) would outlive the client.
    shutdown = loop.shutdown_default_executor()
    try:
        asyncio.run_coroutine_threadsafe(shutdown, loop).result(timeout=10)
    except RuntimeError:  # the loop is closed already
        shutdown.close()
    except concurrent.futures.TimeoutError:
        pass  # a lookup hung in the resolver: its thread is a daemon, the loop stops
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


def _close_dropped(
    loop: asyncio.AbstractEventLoop,
    thread: threading.Thread,
    client: async_client.Client,
    listener_threads: ListenerThreads,
) -> None:
    listener_threads.shutdown()
    if threading.current_thread() is thread:  # dropped by a callback on the loop itself
        loop.create_task(client.close()).add_done_callback(lambda _: loop.stop())
        return
    try:
        asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=10)
    except Exception:  # nobody is left to tell: the loop stops all the same
        log.warning("closing a dropped client failed", exc_info=True)
    _stop_loop(loop, thread)


class _Call(Generic[T]):
    """One coroutine run for a waiting thread; ``start`` and ``cancel`` run on the loop."""

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self.outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._coroutine = coroutine
        self._task: asyncio.Task[T] | None = None
        self._cancelled = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._cancelled:  # interrupted before it began
            self._coroutine.close()
            self._cancel_outcome()
            return
        self._task = loop.create_task(self._coroutine)
        self._task.add_done_callback(self._settle)

    def cancel(self) -> None:
        self._cancelled = True
        if self._task is not None:
            self._task.cancel()

    def _cancel_outcome(self) -> None:
        self.outcome.cancel()
        # cancel() alone does not wake concurrent.futures.wait(); this does.
        self.outcome.set_running_or_notify_cancel()

    def _settle(self, task: asyncio.Task[T]) -> None:
        if task.cancelled():
            self._cancel_outcome()
        elif task.exception() is not None:
            self.outcome.set_exception(task.exception())
        else:
            self.outcome.set_result(task.result())


class ListenerThreads:
    """The threads that run message listeners (the official client's
    ``message_listener_threads``): each consumer keeps one, round robin."""

    def __init__(self, count: int) -> None:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise InvalidConfigurationError(
                f"option message_listener_threads={count!r} is invalid: expected an integer >= 1"
            )
        self._count = count
        self._executors: list[concurrent.futures.ThreadPoolExecutor] = []
        self._next = itertools.count()

    def pick(self) -> concurrent.futures.ThreadPoolExecutor:
        if len(self._executors) < self._count:  # threads start with their first consumer
            executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"msgclient-listener-{len(self._executors)}"
            )
            self._executors.append(executor)
            return executor
        return self._executors[next(self._next) % self._count]

    def shutdown(self) -> None:
        # Without waiting: a listener that closes the client runs on one of these threads.
        for executor in self._executors:
            executor.shutdown(wait=False, cancel_futures=True)


async def on_loop(call: Callable[[], T]) -> T:
    """``call()`` as a coroutine, for ``LoopThread.run``: run where the loop's state is."""
    return call()
