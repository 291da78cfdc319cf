"""Acknowledgment grouping: many acks, few commands.

Acking each message with its own command would cost the broker one cursor update per
message. Individual acks are collected instead and sent together every
``group_time`` seconds, or at once when ``max_group_size`` are pending; of the cumulative
acks only the highest position matters, so only the latest is kept. The price: acks still
pending when the connection drops are sent after the reconnect, and the broker may
redeliver those messages meanwhile; ``is_duplicate`` lets the consumer drop such copies.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from msgclient.contract import AckBatch
from msgclient.core.timing_wheel import Cancellable, Scheduler
from msgclient.errors import AlreadyClosedError, ConnectionClosedError, InvalidConfigurationError
from msgclient.message import MessageId

log = logging.getLogger(__name__)

# ConsumerConfigurationData.acknowledgementsGroupTimeMicros: 100 ms.
DEFAULT_ACKNOWLEDGEMENTS_GROUP_TIME = 0.1
# ConsumerConfigurationData.maxAcknowledgmentGroupSize.
DEFAULT_MAX_ACKNOWLEDGMENT_GROUP_SIZE = 1000


# Writes the batch; may return an awaitable that completes when the broker confirms it.
AckSender = Callable[[AckBatch], Awaitable[None] | None]


def _always_connected() -> bool:
    return True


class AcknowledgmentsGroupingTracker:
    """The Java client's PersistentAcknowledgmentsGroupingTracker.

    Defaults: ``group_time`` 0.1 s (0 sends every ack at once), ``max_group_size`` 1000.
    ``ack`` and ``ack_cumulative`` return a future. With ``ack_receipt_enabled`` it
    completes (or fails) with the awaitable ``send_acks`` returned for the batch, i.e. when
    the broker confirms; otherwise it is done at once, as in the Java client (a failed
    write is logged). While ``is_connected()`` is false acks stay pending: the consumer calls
    ``flush`` once it has reconnected.
    """

    def __init__(
        self,
        send_acks: AckSender,
        *,
        group_time: float = DEFAULT_ACKNOWLEDGEMENTS_GROUP_TIME,
        max_group_size: int = DEFAULT_MAX_ACKNOWLEDGMENT_GROUP_SIZE,
        ack_receipt_enabled: bool = False,
        is_connected: Callable[[], bool] = _always_connected,
        scheduler: Scheduler | None = None,
    ) -> None:
        if group_time < 0:
            raise InvalidConfigurationError(
                f"acknowledgment_group_time must be >= 0, got {group_time}"
            )
        if max_group_size < 1:
            raise InvalidConfigurationError(
                f"max_acknowledgment_group_size must be >= 1, got {max_group_size}"
            )
        self._send_acks = send_acks
        self._group_time = group_time
        self._max_group_size = max_group_size
        self._receipts = ack_receipt_enabled
        self._is_connected = is_connected
        self._loop = asyncio.get_running_loop()
        self._scheduler: Scheduler = scheduler or self._loop
        # A list: acks go out in the order they were made, unsorted (sorting thousands of
        # ids per batch costs more than everything else here), and unhashed (an id's hash
        # is a Python call: a set would cost one per ack). An id acked twice goes out
        # twice, which the broker takes as once.
        self._individual: list[MessageId] = []
        self._individual_set: set[MessageId] | None = None  # for is_duplicate, when asked
        # The highest cumulative ack, sent or not: everything up to it is acknowledged.
        self._last_cumulative: MessageId | None = None
        self._cumulative_pending = False
        self._waiting: list[asyncio.Future[None]] = []  # the futures of the pending acks
        self._receipts_in_flight: set[asyncio.Future[None]] = set()  # keeps tasks alive
        self._timer: Cancellable | None = None
        self._closed = False
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._done.set_result(None)
        self.batches_sent = 0
        self.acks_made = 0  # individual and cumulative, for the consumer's stats

    def holds_acks(self) -> bool:
        """Whether any id could be a duplicate (acked individually or cumulatively)."""
        return bool(self._individual) or self._last_cumulative is not None

    def acked_cumulatively(self, message_id: MessageId) -> bool:
        last = self._last_cumulative
        return last is not None and message_id <= last

    def is_duplicate(self, message_id: MessageId) -> bool:
        """Whether a (re)delivered message is acked already, though the broker may not know."""
        if self.acked_cumulatively(message_id):
            return True
        acked = self._individual_set
        if acked is None:  # a redelivery: checked for each of its messages, made once
            acked = self._individual_set = set(self._individual)
        if message_id in acked:
            return True
        unit = message_id.ack_unit()  # a whole batch acknowledged at once (receive_many)
        return unit is not None and unit in acked

    def ack(self, message_id: MessageId) -> asyncio.Future[None]:
        self.acks_made += 1
        if self._closed:
            return self._closed_future()
        self._individual.append(message_id)
        return self._added()

    def ack_all(self, message_ids: list[MessageId], messages: int) -> asyncio.Future[None]:
        """``ack`` of each id, with one future for all; the ids acknowledge ``messages``
        messages (more than ids where one id covers a whole Pulsar batch entry)."""
        self.acks_made += messages
        if self._closed:
            return self._closed_future()
        self._individual += message_ids
        return self._added()

    def _added(self) -> asyncio.Future[None]:
        """Individual acks were added: their future; a flush when the group is full."""
        self._individual_set = None
        future = self._done
        if self._receipts:
            future = self._loop.create_future()
            self._waiting.append(future)
        if len(self._individual) >= self._max_group_size:
            self.flush()
        elif self._timer is None:
            self._flush_later()
        return future

    def ack_cumulative(self, message_id: MessageId) -> asyncio.Future[None]:
        self.acks_made += 1
        if self._closed:
            return self._closed_future()
        last = self._last_cumulative
        if last is None or message_id > last:
            self._last_cumulative = message_id
            self._cumulative_pending = True
        elif not self._cumulative_pending:
            return self._done  # covered by a cumulative ack sent before
        future = self._future()
        if future is not self._done:
            self._waiting.append(future)
        self._flush_later()
        return future

    def _future(self) -> asyncio.Future[None]:
        """With receipts, a future of the broker's confirmation; without, one shared done
        future, as the Java client completes acks when queued (and acking stays cheap)."""
        return self._loop.create_future() if self._receipts else self._done

    def _closed_future(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self._loop.create_future()
        _fail([future], AlreadyClosedError("the consumer is closed"))
        return future

    def flush(self) -> None:
        """Send everything pending now, as one batch."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not (self._individual or self._cumulative_pending) or not self._is_connected():
            return
        cumulative = self._last_cumulative if self._cumulative_pending else None
        batch = AckBatch(tuple(self._individual), cumulative)
        waiting = self._waiting
        self._individual = []
        self._individual_set = None
        self._cumulative_pending = False
        self._waiting = []
        try:
            sent = self._send_acks(batch)
        except Exception as error:
            _fail(waiting, error)
            return
        self.batches_sent += 1
        if sent is None:
            _complete(waiting)
            return
        receipt = asyncio.ensure_future(sent)
        self._receipts_in_flight.add(receipt)
        receipt.add_done_callback(self._receipts_in_flight.discard)
        if self._receipts:
            receipt.add_done_callback(functools.partial(_settle, waiting))
        else:
            _complete(waiting)
            receipt.add_done_callback(_log_failure)

    def flush_and_clean(self) -> None:
        """Flush, then forget the cumulative position: after a seek, earlier ids come again."""
        self.flush()
        self._last_cumulative = None
        self._drop_pending(ConnectionClosedError("not connected: acknowledgments dropped"))

    def close(self) -> None:
        """Flush; the acks that cannot be sent (not connected) fail with AlreadyClosedError."""
        self.flush()
        self._closed = True
        self._drop_pending(AlreadyClosedError("the consumer closed before sending its acks"))

    def _flush_later(self) -> None:
        if self._group_time == 0:
            self.flush()
        elif self._timer is None:
            when = self._scheduler.time() + self._group_time
            self._timer = self._scheduler.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.flush()

    def _drop_pending(self, error: Exception) -> None:
        self._individual = []
        self._individual_set = None
        self._cumulative_pending = False
        waiting, self._waiting = self._waiting, []
        _fail(waiting, error)


def _complete(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():  # the application may have cancelled it
            future.set_result(None)


def _fail(futures: list[asyncio.Future[None]], error: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)
            # Acks are often fire-and-forget: don't warn "exception never retrieved".
            future.exception()


def _settle(futures: list[asyncio.Future[None]], receipt: asyncio.Future[None]) -> None:
    if receipt.cancelled():
        for future in futures:
            future.cancel()
    elif (error := receipt.exception()) is not None:
        _fail(futures, error)
    else:
        _complete(futures)


def _log_failure(receipt: asyncio.Future[None]) -> None:
    if not receipt.cancelled() and (error := receipt.exception()) is not None:
        log.warning("acknowledgments failed: %s", error)
