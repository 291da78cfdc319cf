"""Running a command on an event loop, with a clean Ctrl-C.

The first Ctrl-C (SIGINT) or SIGTERM asks the command to stop: it sets ``Interrupt``, which
the command watches at each wait, and the command then finishes what it owes (a producer
confirms what it sent, a consumer acknowledges what it printed) and returns; the exit code
is then 128 + the signal (130 for Ctrl-C). A second one cancels the command at once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from msgclient.cli.errors import INTERRUPTED, OK, report

T = TypeVar("T")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """A wait ended by Ctrl-C (``Interrupt.race``)."""


class Interrupt:
    """Whether the command was asked to stop (by a signal, or by itself: ``stop``), and a
    way to wait for that."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self._task = task
        self._event = asyncio.Event()
        self.signal: int | None = None  # the signal that asked, if one did

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def stop(self) -> None:
        """Stop as after Ctrl-C, but with no signal to report (e.g. stdout's reader left)."""
        self._event.set()

    @property
    def exit_code(self) -> int:
        return OK if self.signal is None else 128 + self.signal

    def fire(self, signum: int) -> None:
        if self.signal is None:
            self.signal = signum
            self._event.set()
        else:
            self._task.cancel()  # asked twice: stop now

    async def wait(self) -> None:
        await self._event.wait()

    async def race(self, awaitable: Awaitable[T]) -> T:
        """The result of ``awaitable``, or Interrupted (and ``awaitable`` cancelled) if the
        user asks to stop first."""
        task = asyncio.ensure_future(awaitable)
        if self.requested:
            task.cancel()
            raise Interrupted
        waiter = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not task.done():
                task.cancel()
        if task.done() and not task.cancelled():
            return task.result()
        raise Interrupted


Command = Callable[[Interrupt], Coroutine[Any, Any, int]]


def run(command: Command) -> int:
    """Run ``command`` on a new event loop; its exit code, or 128 + the signal when it
    was interrupted and returned OK."""

    async def main() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        interrupt = Interrupt(task)
        for signum in SIGNALS:
            loop.add_signal_handler(signum, interrupt.fire, signum)
        try:
            code = await command(interrupt)
        finally:
            for signum in SIGNALS:
                loop.remove_signal_handler(signum)
        return interrupt.exit_code if code == OK else code

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        report("interrupted again: stopped without waiting")
        return INTERRUPTED
