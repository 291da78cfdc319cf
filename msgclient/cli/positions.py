"""``consume --from``: where reading starts.

``earliest``, ``latest``; a Kafka offset (an integer); a Pulsar message id in the text
form the library prints (``str(message_id)``: ``(ledger,entry,partition,batch_index)``,
as the official clients print it; the library has no parser of that form, so it is read
here); a time, ISO-8601 (without a zone: local time) or ``@`` and milliseconds since the
epoch (``@1717171717000``; the ``@`` keeps it apart from a Kafka offset).
"""

from __future__ import annotations

import datetime
import re
from typing import NamedTuple

from msgclient.cli.errors import UsageError
from msgclient.options import InitialPosition
from protocols.pulsarwire.message_id import PulsarMessageId

_PULSAR_ID = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")

FORMS = (
    "earliest, latest, a Kafka offset (e.g. 42), a Pulsar message id as consume prints it "
    "(e.g. (12,3,-1,0)), an ISO-8601 time (e.g. 2026-05-01T12:00:00Z) or @ and epoch "
    "milliseconds (e.g. @1777636800000)"
)


class Offset(NamedTuple):
    """A Kafka offset, in every partition read (or in ``--partition``)."""

    offset: int


class AtTime(NamedTuple):
    """The first message published at or after ``ms`` (ms since the epoch)."""

    ms: int


Start = InitialPosition | Offset | AtTime | PulsarMessageId


def parse_start(text: str, kafka: bool, option: str = "--from") -> Start:
    """The start ``option`` names on Kafka or Pulsar; UsageError naming the forms."""
    word = text.strip().lower()
    if word == "earliest":
        return InitialPosition.Earliest
    if word == "latest":
        return InitialPosition.Latest
    if word.startswith("@"):
        if word[1:].isdigit():
            return AtTime(int(word[1:]))
        raise UsageError(f"{option} {text!r}: @ takes milliseconds since the epoch")
    if word.isdigit():
        if kafka:
            return Offset(int(word))
        raise UsageError(
            f"{option} {text!r}: an offset is Kafka's; on Pulsar give a message id, e.g. "
            "(12,3,-1,0), or a time (@ and epoch milliseconds, or ISO-8601)"
        )
    matched = _PULSAR_ID.fullmatch(word)
    if matched:
        if kafka:
            raise UsageError(f"{option} {text!r}: a Pulsar message id; on Kafka give an offset")
        ledger, entry, partition, batch_index = map(int, matched.groups())
        return PulsarMessageId(ledger, entry, partition, batch_index)
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"{option} {text!r} is none of: {FORMS}") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as `date` reads it
    return AtTime(int(moment.timestamp() * 1000))
