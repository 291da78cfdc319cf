"""``msgclient consume URL TOPIC``: print messages to stdout."""

from __future__ import annotations

import argparse
import asyncio
import functools
from collections.abc import Awaitable

import msgclient
from msgclient.cli import running
from msgclient.cli.arguments import delimiter, non_negative_int, positive_int
from msgclient.cli.bounds import Ends, SinceTime
from msgclient.cli.connection import add_target_arguments, closing, is_kafka, new_client
from msgclient.cli.errors import OK, UsageError, report
from msgclient.cli.output import Output, OutputClosed, watch_reader
from msgclient.cli.positions import AtTime, Start, parse_start
from msgclient.cli.progress import Progress, add_progress_argument, wanted
from msgclient.cli.pump import Pump
from msgclient.cli.receivers import SUBSCRIPTION_TYPES, Receivers, open_group, open_readers
from msgclient.cli.running import Interrupt, Interrupted
from msgclient.message import Message

BATCH = 1000  # most messages written (and flushed) at once
# --end, where the start may lie past the end (a time, a group): nothing for this long
# once messages can flow means nothing is left before the end.
END_IDLE_SECONDS = 1.5
READY_POLL_SECONDS = 0.2  # how often a Kafka group's readiness is checked meanwhile

DESCRIPTION = """\
Print the messages of TOPIC on stdout: raw (the value's bytes, then --delimiter) or JSON
lines (--format json: topic, partition, offset or message_id, key, headers, timestamp,
event_timestamp, value, value_encoding; `produce --format json` reads them back).
Without --group it reads as a reader: nothing is committed. With --group it consumes as
that subscription / consumer group and acknowledges every message once it is written.
Ctrl-C stops, (with --group) acknowledges what was printed, and exits 130; a closed pipe
(`| head`) ends it quietly with exit code 0."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "consume",
        help="print messages to stdout",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(parser)
    where = parser.add_argument_group("where to read")
    where.add_argument(
        "--from",
        dest="start",
        default="earliest",
        metavar="POSITION",
        help="earliest (default), latest, a Kafka OFFSET, a Pulsar MESSAGE_ID as printed "
        "((ledger,entry,partition,batch)), or a TIME: ISO-8601 (local time without a zone) "
        "or @EPOCH_MS",
    )
    where.add_argument(
        "--group",
        "--subscription",
        dest="group",
        metavar="NAME",
        help="consume as this subscription / consumer group, acknowledging what is printed "
        "(default: a reader; nothing is committed)",
    )
    where.add_argument(
        "--subscription-type",
        choices=tuple(SUBSCRIPTION_TYPES),
        default="exclusive",
        help="with --group (default: exclusive; shared and key_shared are Pulsar's)",
    )
    where.add_argument(
        "--partition",
        type=non_negative_int,
        metavar="N",
        help="Kafka: read partition N alone (on Pulsar, name the partition's topic: "
        "TOPIC-partition-N)",
    )
    when = parser.add_argument_group("when to stop (default: Ctrl-C)")
    when.add_argument("-n", "--count", type=positive_int, metavar="N", help="after N messages")
    when.add_argument(
        "--end",
        action="store_true",
        help="at the end of the topic as it was when consuming started",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=("raw", "json"), default="raw")
    out.add_argument(
        "--delimiter",
        type=delimiter,
        default=b"\n",
        metavar="TEXT",
        help=r"raw: written after each value, escapes allowed (default: \n)",
    )
    add_progress_argument(parser, "when stderr and stdout are terminals")
    parser.set_defaults(run=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    return running.run(functools.partial(consume, args))


async def consume(args: argparse.Namespace, interrupt: Interrupt) -> int:
    client = new_client(args)
    async with closing(client):
        kafka = is_kafka(client)
        start = parse_start(args.start, kafka)
        if args.partition is not None and not kafka:
            raise UsageError(
                "--partition is for Kafka: on Pulsar, consume the partition's own topic "
                f"({args.topic}-partition-{args.partition})"
            )
        if args.partition is not None and args.group is not None:
            raise UsageError("--partition reads with a reader: a --group shares partitions out")
        try:
            receivers, ends = await interrupt.race(_open(client, args, start, kafka))
        except Interrupted:
            report("interrupted: nothing printed")
            return OK
        printer = Printer(args, receivers.consumer, ends, start)
        pump = Pump(receivers.receive)
        unwatch = watch_reader(interrupt.stop)
        try:
            while not printer.finished:
                ready = receivers.ready.is_set()
                idle = None
                if ends is not None and ends.on_idle:
                    idle = END_IDLE_SECONDS if ready else READY_POLL_SECONDS
                try:
                    batch = await interrupt.race(_within(pump.next_batch(printer.wanted), idle))
                except Interrupted:
                    break
                if batch is not None:
                    printer.take(batch)
                elif ends is not None and ready:
                    ends.give_up()  # ready all along, and nothing came: nothing is left
        except OutputClosed:
            pass  # the reader of stdout had enough (| head): a quiet end
        finally:
            unwatch()
            await pump.close()
            printer.close()
        if interrupt.signal is not None:
            count = printer.printed
            report(f"interrupted: {count} message{'s' * (count != 1)} printed")
        return OK


async def _open(
    client: msgclient.Client, args: argparse.Namespace, start: Start, kafka: bool
) -> tuple[Receivers, Ends | None]:
    if args.group is None:
        receivers = await open_readers(client, args.topic, start, args.partition)
    else:
        consumer_type = SUBSCRIPTION_TYPES[args.subscription_type]
        receivers = await open_group(client, args.topic, args.group, start, consumer_type, kafka)
    ends = None
    if args.end:
        found = await client.admin().last_message_ids(args.topic)
        last = {name: found.get(name) for name in receivers.partitions}
        ends = Ends(last, start, group=args.group is not None)
    return receivers, ends


async def _within(batch: Awaitable[list[Message]], seconds: float | None) -> list[Message] | None:
    """The batch, or None if none came within ``seconds`` (None: no limit)."""
    if seconds is None:
        return await batch
    limit = asyncio.timeout(seconds)
    try:
        async with limit:
            return await batch
    except TimeoutError:
        if limit.expired():
            return None
        raise  # a timeout of the receive itself


class Printer:
    """Writes the messages to print, counts them, and (with a group) acknowledges them
    once written."""

    def __init__(
        self,
        args: argparse.Namespace,
        consumer: msgclient.Consumer | None,
        ends: Ends | None,
        start: Start,
    ) -> None:
        self._output = Output(args.format == "json", args.delimiter)
        self._progress = Progress(wanted(args.progress, writes_stdout=True), args.topic)
        self._consumer = consumer
        self._ends = ends
        self._since = SinceTime(start.ms) if isinstance(start, AtTime) else None
        self._count: int | None = args.count
        self.printed = 0

    @property
    def wanted(self) -> int:
        """The most messages to take next."""
        return BATCH if self._count is None else min(BATCH, self._count - self.printed)

    @property
    def finished(self) -> bool:
        if self._count is not None and self.printed >= self._count:
            return True
        return self._ends is not None and self._ends.done

    def take(self, batch: list[Message]) -> None:
        shown: list[Message] = []
        skipped: list[Message] = []  # before the start time: a group acknowledges them
        for message in batch:
            if self._since is not None and not self._since.admit(message):
                skipped.append(message)
                continue
            if self._ends is not None and not self._ends.admit(message):
                continue  # past the end: left for the next reading
            shown.append(message)
            if self._count is not None and self.printed + len(shown) >= self._count:
                break
        with self._progress.clear_for_stdout():
            self._output.write(shown)
        self.printed += len(shown)
        self._progress.update(len(shown))
        if self._consumer is not None:
            for message in (*skipped, *shown):
                self._consumer.acknowledge(message)

    def close(self) -> None:
        self._progress.close()
