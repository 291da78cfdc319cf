"""A Pulsar consumer's chunked messages: reassembly (chunks.py), its expiry timer and what
becomes of the chunks of a message dropped incomplete (the Java client's ConsumerImpl)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from msgclient.errors import MalformedFrameError
from msgclient.options import ConsumerOptions
from protocols.pulsarwire.chunks import ChunkAssembler
from protocols.pulsarwire.encryption import EncryptedChunk
from protocols.pulsarwire.framing import Frame
from protocols.pulsarwire.message_id import PulsarMessageId

log = logging.getLogger(__name__)

ChunkIds = Callable[[list[PulsarMessageId]], None]


class ChunkedEntry(NamedTuple):
    """A chunked message complete: its last chunk's frame with the joined payload, its
    chunk ids, and its chunks kept encrypted (crypto_failure_action CONSUME): all of them,
    or none (the payload is plaintext)."""

    frame: Frame
    ids: list[PulsarMessageId]
    undecrypted: tuple[EncryptedChunk, ...]


class ConsumerChunks:
    """Joins the chunk entries of one consumer into whole entries.

    A message dropped incomplete has its chunks acknowledged (``ack``) when it expired or
    ``auto_ack_oldest_chunked_message_on_queue_full`` is set; otherwise they stay
    unacknowledged, and with an ack timeout are redelivered after it (``redeliver_later``),
    as the Java client tracks them.
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        options: ConsumerOptions,
        ack: ChunkIds,
        redeliver_later: ChunkIds,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._auto_ack = options.auto_ack_oldest_chunked_message_on_queue_full
        self._expire_s = options.expire_time_of_incomplete_chunked_message / 1000
        self._ack = ack
        self._redeliver_later = redeliver_later
        self._assembler: ChunkAssembler[EncryptedChunk] = ChunkAssembler(
            options.max_pending_chunked_message,
            options.expire_time_of_incomplete_chunked_message,
            self._discard,
        )
        self._timer: asyncio.TimerHandle | None = None

    def on_chunk(
        self, frame: Frame, undecrypted: EncryptedChunk | None = None
    ) -> ChunkedEntry | None:
        """The whole message once ``frame`` completes one; None until then. ``frame``'s
        payload is decrypted already, or ``undecrypted`` says how it is encrypted.

        A message of which some chunks were decrypted and others not (a key reader that
        failed for a while) cannot be delivered either way: its chunks are left
        unacknowledged, as crypto_failure_action FAIL leaves a chunk, to be tried again."""
        metadata = frame.metadata
        assert metadata is not None and frame.payload is not None  # a chunk: the caller saw
        data = frame.command.message.message_id
        message_id = PulsarMessageId(data.ledgerId, data.entryId, self._partition)
        now = time.monotonic()
        self._assembler.expire(now)
        try:
            done = self._assembler.add(
                metadata.uuid,
                metadata.chunk_id,
                metadata.num_chunks_from_msg,
                metadata.total_chunk_msg_size,
                frame.payload,
                message_id,
                now,
                undecrypted,
                None if undecrypted is None else undecrypted.plain_size,
            )
        except MalformedFrameError as error:
            log.error("%s: chunk %s dropped: %s", self._topic, message_id, error)
            return None
        if len(self._assembler) and self._timer is None and self._expire_s:
            self._timer = asyncio.get_running_loop().call_later(self._expire_s, self._expire)
        if done is None:
            return None
        payload, ids, notes = done
        kept = tuple(note for note in notes if note is not None)
        if kept and len(kept) < len(notes):
            log.error(
                "%s: chunked message %s: %d of its %d chunks did not decrypt, left unacknowledged",
                self._topic,
                ids[-1],
                len(kept),
                len(notes),
            )
            self._redeliver_later(ids)
            return None
        return ChunkedEntry(Frame(frame.command, metadata, payload), ids, kept)

    def clear(self) -> None:
        """Forget what is incomplete: after a reconnect or a seek the broker sends again
        what is unacknowledged."""
        self._assembler.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        self._assembler.expire(time.monotonic())
        if len(self._assembler):  # the next one may expire later: look again then
            self._timer = asyncio.get_running_loop().call_later(self._expire_s, self._expire)

    def _discard(self, chunk_ids: list[PulsarMessageId], expired: bool) -> None:
        why = "expired" if expired else "dropped (max_pending_chunked_message)"
        log.warning("%s: incomplete chunked message %s: %s", self._topic, chunk_ids[0], why)
        if expired or self._auto_ack:
            self._ack(chunk_ids)
        else:
            self._redeliver_later(chunk_ids)
