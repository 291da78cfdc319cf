"""``msgclient produce URL TOPIC``: send messages from arguments, files or stdin."""

from __future__ import annotations

import argparse
import functools
from collections.abc import AsyncIterator
from typing import Any

from msgclient.cli import running
from msgclient.cli.arguments import delimiter, key_value, non_negative_int, positive_float
from msgclient.cli.connection import add_target_arguments, closing, is_kafka, new_client
from msgclient.cli.errors import FAILED, OK, CliError, UsageError, report, report_error
from msgclient.cli.inputs import FILE, MESSAGE, argument_records, check_files, stdin_records
from msgclient.cli.progress import Progress, add_progress_argument, wanted
from msgclient.cli.rate import RateLimit
from msgclient.cli.records import Record
from msgclient.cli.running import Interrupt, Interrupted
from msgclient.cli.sender import Sender
from msgclient.errors import MsgClientError
from msgclient.options import CompressionType

COMPRESSION = {
    "none": CompressionType.NONE,
    "lz4": CompressionType.LZ4,
    "zlib": CompressionType.ZLIB,  # Pulsar only
    "zstd": CompressionType.ZSTD,
    "snappy": CompressionType.SNAPPY,
    "gzip": CompressionType.GZIP,  # Kafka only
}

DESCRIPTION = """\
Send messages to TOPIC: the -m values and --file contents, in the order given, or else
stdin: records cut at --delimiter (default: a newline, not part of the message; each
delimiter ends a record, so an empty line is an empty message), or with --format json one
JSON object per line, as `consume --format json` writes them. Every message is confirmed
by the broker before the command ends; exit 1 names a failure. Ctrl-C stops reading, waits
for the confirmation of what was sent, says how many on stderr, and exits 130."""


class _Input(argparse.Action):
    """-m and --file, kept in one list in the order given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        namespace.inputs = [*namespace.inputs, (self.const, values)]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "produce",
        help="send messages from arguments, files or stdin",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(parser)
    given = parser.add_argument_group("what to send (default: stdin)")
    given.add_argument(
        "-m",
        "--message",
        action=_Input,
        const=MESSAGE,
        metavar="VALUE",
        help="a message (its UTF-8 bytes); repeatable",
    )
    given.add_argument(
        "--file",
        action=_Input,
        const=FILE,
        metavar="PATH",
        help="a message: the whole file's bytes; repeatable",
    )
    given.add_argument(
        "--format",
        choices=("raw", "json"),
        default="raw",
        help="stdin: raw records (default) or JSON lines (value, value_encoding, key, "
        "key_encoding, headers, partition, event_timestamp)",
    )
    given.add_argument(
        "--delimiter",
        type=delimiter,
        default=b"\n",
        metavar="TEXT",
        help=r"raw stdin: what ends a record, escapes allowed (default: \n)",
    )
    message = parser.add_argument_group("message options")
    message.add_argument("--key", help="the key of every message (Kafka key, Pulsar partition key)")
    message.add_argument(
        "--header",
        "--property",
        dest="headers",
        type=key_value,
        action="append",
        default=[],
        metavar="K=V",
        help="Kafka header / Pulsar property; repeatable",
    )
    message.add_argument(
        "--partition",
        type=non_negative_int,
        metavar="N",
        help="Kafka: send to partition N (on Pulsar, name the partition's topic: "
        "TOPIC-partition-N)",
    )
    message.add_argument("--compression", choices=tuple(COMPRESSION), default="none")
    message.add_argument(
        "--rate", type=positive_float, metavar="N", help="send at most N messages a second"
    )
    add_progress_argument(parser, "when stderr is a terminal")
    parser.set_defaults(run=run, parser=parser, inputs=[])


def run(args: argparse.Namespace) -> int:
    if args.inputs and args.format == "json":
        raise UsageError("--format json reads stdin; -m and --file values are sent as they are")
    check_files(args.inputs)
    return running.run(functools.partial(produce, args))


async def produce(args: argparse.Namespace, interrupt: Interrupt) -> int:
    client = new_client(args)
    async with closing(client):
        kafka = is_kafka(client)
        if args.partition is not None and not kafka:
            raise UsageError(
                "--partition is for Kafka: on Pulsar, produce to the partition's own topic "
                f"({args.topic}-partition-{args.partition})"
            )
        try:
            producer = await interrupt.race(
                client.create_producer(
                    args.topic,
                    compression_type=COMPRESSION[args.compression],
                    block_if_queue_full=True,
                )
            )
        except Interrupted:
            report("interrupted: nothing sent")
            return OK
        template = Record(None, args.key, dict(args.headers) or None, args.partition)
        total = len(args.inputs) or None
        progress = Progress(wanted(args.progress, writes_stdout=False), args.topic, total)
        sender = Sender(producer, progress.update, by_partition=kafka)
        rate = RateLimit(args.rate) if args.rate else None
        if args.inputs:
            source = argument_records(args.inputs, template, interrupt)
        else:
            json_lines = args.format == "json"
            source = stdin_records(json_lines, args.delimiter, template, interrupt, not rate)
        failure: BaseException | None = None
        try:
            await _feed(source, sender, rate, interrupt)
        except (CliError, MsgClientError, OSError) as error:
            failure = error  # stop here; what was sent is still confirmed below
        await sender.finish()
        progress.close()
        return _outcome(args.topic, sender, failure, interrupt)


async def _feed(
    source: AsyncIterator[list[Record]],
    sender: Sender,
    rate: RateLimit | None,
    interrupt: Interrupt,
) -> None:
    async for records in source:
        start = 0
        while start < len(records):
            count = len(records) - start
            if rate is not None:
                try:
                    count = await interrupt.race(rate.take(count))
                except Interrupted:
                    return  # what was read and not sent yet is dropped: input stopped
            await sender.send(records[start : start + count])
            start += count
            if sender.error is not None:
                return


def _outcome(
    topic: str, sender: Sender, failure: BaseException | None, interrupt: Interrupt
) -> int:
    sent = f"{sender.confirmed} message{'s' * (sender.confirmed != 1)} sent to {topic}"
    if sender.error is not None:
        report_error(f"{sender.failed} of {sender.queued} messages failed: {sender.error}")
        report(sent)
        return FAILED
    if failure is not None:
        report_error(failure)
        report(sent)
        return FAILED
    if interrupt.signal is not None:
        report(f"interrupted: {sent}, every one confirmed")
    return OK
