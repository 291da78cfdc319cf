"""Planning on the driver: where each partition's range starts and ends.

Ranges come from the brokers' earliest and latest positions and the options; read limits
are split across partitions by backlog; a large range is cut into slices so that more
executors share it. All of it is plain data that pickles to the executors.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgclient
from msgclient.spark.errors import SourceOptionError, report_data_loss
from msgclient.spark.metadata import (
    PROBE_MS,
    TopicPartition,
    after_messages,
    discover,
    ends,
    first_after,
    first_at_time,
)
from msgclient.spark.options import OffsetSpec, SourceOptions
from msgclient.spark.positions import (
    EARLIEST_SPEC,
    LATEST_SPEC,
    PULSAR_EARLIEST,
    Position,
    Protocol,
    PulsarPosition,
    advance,
    distance,
    earliest,
    is_before,
    is_earliest,
    start_at,
)

T = TypeVar("T")
Offsets = dict[TopicPartition, Position]

log = logging.getLogger("msgclient.spark")


@dataclass(frozen=True)
class PartitionRange:
    """One Spark input partition: ``(start, end)`` of one topic partition; ``start`` None
    reads from the first message there is (a partition new to a stream, or data lost)."""

    tp: TopicPartition
    start: Position | None
    end: Position


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Spark calls the planner from plain threads: each call runs on a loop of its own."""
    return asyncio.run(coroutine)


def client_for(options: SourceOptions) -> msgclient.Client:
    return msgclient.Client(options.url, **options.client_options)


# -- batch -----------------------------------------------------------------------------


async def plan_batch(options: SourceOptions) -> list[PartitionRange]:
    """The ranges of a batch read, from ``startingOffsets`` to ``endingOffsets``."""
    async with client_for(options) as client:
        partitions = await discover(client, options.selection)
        latest = await ends(client, options.protocol, partitions)
        starts = await resolve_start(client, options, latest)
    stops = _resolve(options.ending, latest, latest, options)
    ranges = []
    for tp in sorted(partitions):
        start, end = starts[tp], stops[tp]
        if is_before(latest[tp], end):
            raise SourceOptionError(
                options.ending.option, f"{tp}: {end} is past its end ({latest[tp]})"
            )
        if is_before(end, start):
            raise SourceOptionError(
                options.starting.option,
                f"{tp}: the range starts at {start}, after its end {end}",
            )
        if is_before(start, end):
            ranges.append(PartitionRange(tp, start, end))
    return slice_ranges(ranges, options)


# -- streaming -------------------------------------------------------------------------


async def initial_offsets(options: SourceOptions) -> Offsets:
    async with client_for(options) as client:
        partitions = await discover(client, options.selection)
        latest = await ends(client, options.protocol, partitions)
        return await resolve_start(client, options, latest)


async def latest_offsets(options: SourceOptions) -> Offsets:
    async with client_for(options) as client:
        return await ends(client, options.protocol, await discover(client, options.selection))


async def next_end(
    options: SourceOptions,
    start: Offsets,
    latest: Offsets,
    max_units: int | None,
    min_units: int | None,
) -> Offsets:
    """The end of the next micro-batch: ``latest`` (already capped by an AvailableNow
    target), within the read limits. ``start`` again when fewer than ``min_units`` wait."""
    for tp in start:
        if tp not in latest:
            report_data_loss(options.fail_on_data_loss, f"partition {tp} no longer exists")
    end = dict(latest)
    for tp, top in latest.items():
        if tp in start and is_before(top, start[tp]):
            report_data_loss(options.fail_on_data_loss, f"{tp} went back from {start[tp]} to {top}")
    if max_units is None and min_units is None:
        return end
    async with client_for(options) as client:
        anchors = dict(
            zip(
                end,
                await asyncio.gather(*(_anchor(client, tp, start.get(tp), end[tp]) for tp in end)),
                strict=True,
            )
        )
        backlog: dict[TopicPartition, int] = {}
        for tp, anchor in anchors.items():
            units = distance(anchor, end[tp])
            # Unknown (another Pulsar ledger): at least the whole limit, for all we know.
            backlog[tp] = units if units is not None else (max_units or min_units or 1)
        if options.protocol is Protocol.PULSAR and not options.limits_count_entries:
            return await _limit_messages(
                client, options, start, end, anchors, backlog, max_units, min_units
            )
    if min_units is not None and sum(backlog.values()) < min_units:
        return {tp: start[tp] for tp in end if tp in start}
    if max_units is None:
        return end
    shares = split(max_units, backlog)
    limited: Offsets = {}
    for tp, top in end.items():
        if shares[tp] == 0:
            if tp in start:
                limited[tp] = start[tp]
            continue
        limited[tp] = _entries_after(anchors[tp], top, shares[tp])
    return limited


async def _limit_messages(
    client: msgclient.Client,
    options: SourceOptions,
    start: Offsets,
    end: Offsets,
    anchors: Offsets,
    backlog: dict[TopicPartition, int],
    max_units: int | None,
    min_units: int | None,
) -> Offsets:
    """``next_end``'s limits counting Pulsar messages, which only reading tells: the
    minimum by reading until that many are seen, each partition's share of the maximum
    (in proportion to its backlog of entries) by reading that many from its anchor; the
    end may then fall inside an entry, at a batch index."""
    probe = _probe_ms(options)
    if min_units is not None:
        seen = 0
        for tp in end:
            if seen >= min_units:
                break
            walk = await after_messages(client, tp, anchors[tp], end[tp], min_units - seen, probe)
            seen += walk.seen
        if seen < min_units:
            return {tp: start[tp] for tp in end if tp in start}
    if max_units is None:
        return end
    # Entries are all a planner knows of a backlog: the messages are shared by them.
    shares = {tp: share for tp, share in share_out(max_units, backlog).items() if share}
    walked = await asyncio.gather(
        *(after_messages(client, tp, anchors[tp], end[tp], n, probe) for tp, n in shares.items())
    )
    limited: Offsets = {tp: start[tp] for tp in end if tp in start}
    for tp, walk in zip(shares, walked, strict=True):
        if walk.seen:
            limited[tp] = walk.position
        if walk.seen or not walk.timed_out:
            continue
        # Its end is past its anchor, yet no message came within the probe: a slow broker
        # (or messages gone, which the range's reader then reports). Counted by entries
        # instead, so that the stream goes on: a micro-batch that stayed at its start would
        # end an AvailableNow query with this data unread.
        limited[tp] = _entries_after(anchors[tp], end[tp], shares[tp])
        log.warning(
            "msgclient source: %s: no message within %d ms after %s (its end is %s); this "
            "micro-batch counts %d entries there instead of messages",
            tp, probe, anchors[tp], end[tp], shares[tp],
        )  # fmt: skip
    return limited


def stream_ranges(options: SourceOptions, start: Offsets, end: Offsets) -> list[PartitionRange]:
    """The ranges of a micro-batch (again, identically, when Spark replays it)."""
    ranges = []
    for tp in sorted(end):
        first: Position | None = start.get(tp)
        if first is not None and is_before(end[tp], first):
            report_data_loss(options.fail_on_data_loss, f"{tp} went back from {first} to {end[tp]}")
            first = None
        if first is None and (end[tp] == 0 or is_earliest(end[tp])):
            continue  # a new partition with nothing in it yet
        if first is None or is_before(first, end[tp]):
            ranges.append(PartitionRange(tp, first, end[tp]))
    return slice_ranges(ranges, options)


def split(limit: int, backlog: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """``limit`` units shared in proportion to each backlog, summing to exactly
    ``min(limit, total)`` (largest remainders get the units left over)."""
    if sum(backlog.values()) <= limit:
        return dict(backlog)
    return share_out(limit, backlog)


def share_out(limit: int, weights: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """``limit`` units shared in proportion to ``weights``, summing to exactly ``limit``
    (largest remainders get the units left over); none if every weight is 0."""
    total = sum(weights.values())
    if not total:
        return dict.fromkeys(weights, 0)
    exact = {tp: limit * units / total for tp, units in weights.items()}
    shares = {tp: math.floor(value) for tp, value in exact.items()}
    left = limit - sum(shares.values())
    for tp in sorted(exact, key=lambda tp: (shares[tp] - exact[tp], tp))[:left]:
        shares[tp] += 1
    return shares


# -- slices ----------------------------------------------------------------------------


def slice_ranges(ranges: list[PartitionRange], options: SourceOptions) -> list[PartitionRange]:
    """Cut ranges above ``maxRecordsPerPartition``, and the largest ones further until there
    are ``minPartitions``; ranges of unknown size stay whole."""
    sizes = [distance(r.start, r.end) if r.start is not None else None for r in ranges]
    limit = options.max_records_per_partition
    pieces = [max(1, math.ceil(n / limit)) if n and limit else 1 for n in sizes]
    wanted = options.min_partitions or 0
    while sum(pieces) < wanted:
        candidates = [i for i, n in enumerate(sizes) if n is not None and n > pieces[i]]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: (sizes[i] or 0) / pieces[i])
        pieces[widest] += 1
    result = []
    for piece_count, size, whole in zip(pieces, sizes, ranges, strict=True):
        if piece_count == 1 or size is None or whole.start is None:
            result.append(whole)
            continue
        bounds = [whole.start]
        bounds += [advance(whole.start, size * i // piece_count) for i in range(1, piece_count)]
        bounds.append(whole.end)
        result += [PartitionRange(whole.tp, a, b) for a, b in itertools.pairwise(bounds) if a != b]
    return result


# -- resolving options into positions ------------------------------------------------


async def resolve_start(
    client: msgclient.Client, options: SourceOptions, latest: Offsets
) -> Offsets:
    spec = options.starting
    if spec.kind != "timestamp":
        firsts = await _earliest_positions(client, options, latest, spec)
        return _resolve(spec, latest, firsts, options)
    times = {}
    for tp in latest:
        timestamp = spec.timestamp
        if timestamp is None:
            timestamp = spec.timestamps.get(tp.topic, {}).get(tp.partition)
        if timestamp is None:
            raise SourceOptionError(spec.option, f"no time given for {tp}")
        times[tp] = timestamp
    found = await asyncio.gather(
        *(first_at_time(client, tp, t, _probe_ms(options)) for tp, t in times.items())
    )
    starts: Offsets = {}
    for (tp, timestamp), message_id in zip(times.items(), found, strict=True):
        if message_id is not None:
            starts[tp] = start_at(message_id)
        elif options.timestamp_strategy == "latest":
            starts[tp] = latest[tp]
        else:
            raise SourceOptionError(
                spec.option,
                f"{tp} has no message at or after {timestamp} (ms); "
                "startingOffsetsByTimestampStrategy=latest starts such partitions at the end",
            )
    return starts


def _resolve(
    spec: OffsetSpec, latest: Offsets, firsts: Mapping[TopicPartition, Position],
    options: SourceOptions,
) -> Offsets:  # fmt: skip
    if spec.kind == "latest":
        return dict(latest)
    if spec.kind == "earliest":
        return {tp: firsts[tp] for tp in latest}
    extra = sorted(set(spec.offsets) - {tp.topic for tp in latest})
    if extra:
        raise SourceOptionError(spec.option, f"names topic {extra[0]!r}, which is not read")
    resolved: Offsets = {}
    for tp in latest:
        value = spec.offsets.get(tp.topic, {}).get(tp.partition)
        if value is None:
            raise SourceOptionError(spec.option, f"gives no position for partition {tp}")
        if value == EARLIEST_SPEC:
            value = firsts[tp]
        elif value == LATEST_SPEC:
            value = latest[tp]
        resolved[tp] = value
    return resolved


async def _earliest_positions(
    client: msgclient.Client, options: SourceOptions, latest: Offsets, spec: OffsetSpec
) -> dict[TopicPartition, Position]:
    """Each partition's start, where ``spec`` asks for earliest. A Pulsar position can be
    before the first message; a Kafka offset is found by reading that message."""
    wanted = [
        tp
        for tp in latest
        if spec.kind == "earliest"
        or spec.offsets.get(tp.topic, {}).get(tp.partition) == EARLIEST_SPEC
    ]
    if options.protocol is Protocol.PULSAR:
        return dict.fromkeys(wanted, PULSAR_EARLIEST)
    firsts = await asyncio.gather(
        *(first_after(client, tp, None, _probe_ms(options)) for tp in wanted if latest[tp])
    )
    found = iter(firsts)
    result: dict[TopicPartition, Position] = {}
    for tp in wanted:
        message_id = next(found) if latest[tp] else None
        # No message (never any, or all expired): the partition starts at its end.
        result[tp] = start_at(message_id) if message_id is not None else latest[tp]
    return result


async def _anchor(
    client: msgclient.Client, tp: TopicPartition, start: Position | None, end: Position
) -> Position:
    """Where a limited range's units are counted from: ``start``, or just before the first
    message after it when the distance is unknown (a new partition, another ledger)."""
    if start is not None and not is_before(end, start) and distance(start, end) is not None:
        return start
    after = start if start is not None and not is_before(end, start) else None
    message_id = await first_after(client, tp, after, PROBE_MS)
    if message_id is not None:
        return start_at(message_id)
    if isinstance(end, PulsarPosition):
        since = after if after is not None else PULSAR_EARLIEST
        if is_before(since, end):
            # Pulsar's end says messages are there, yet none came within the probe (a slow
            # broker): counted from where they start, a distance unknown.
            return since
    return end


def _entries_after(anchor: Position, end: Position, count: int) -> Position:
    """The position ``count`` entries (offsets) after ``anchor``, at most ``end``; ``end``
    itself from a Pulsar start before the first message, where entries have no number."""
    if is_earliest(anchor):
        return end
    return earliest(end, advance(anchor, count))


def _probe_ms(options: SourceOptions) -> int:
    return min(options.poll_timeout_ms, PROBE_MS)
