"""``msgclient groups list|describe|offsets|reset|delete URL ...``: Kafka consumer groups
through the admin API (a Pulsar subscription's state is its REST admin API's)."""

from __future__ import annotations

import argparse

from msgclient.admin import Admin, OffsetSpec, TopicPartition
from msgclient.cli.admin_command import SubParsers, add_action, failures, write_records
from msgclient.cli.arguments import non_negative_int
from msgclient.cli.errors import FAILED, OK, UsageError, report
from msgclient.cli.positions import FORMS, AtTime, Offset, parse_start
from msgclient.options import InitialPosition


def register(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "groups",
        help="Kafka consumer groups: list, describe, offsets and lag, reset, delete",
        description="Kafka consumer groups: list, describe, offsets and lag, reset, delete.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_action(actions, "list", "list the groups", list_groups, output=True)

    describe = add_action(
        actions, "describe", "each group's state and members", describe_groups, output=True
    )
    describe.add_argument("groups", nargs="+", metavar="GROUP")

    offsets = add_action(
        actions,
        "offsets",
        "a group's committed offsets, the ends and the lag",
        group_offsets,
        output=True,
    )
    offsets.add_argument("group", metavar="GROUP")
    offsets.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="every partition of TOPIC, committed or not (repeatable; default: the "
        "partitions the group committed for)",
    )

    reset = add_action(
        actions,
        "reset",
        "move a group's offsets (a dry run without --execute)",
        reset_offsets,
        output=True,
    )
    reset.add_argument("group", metavar="GROUP")
    reset.add_argument(
        "--topic", action="append", required=True, metavar="TOPIC", help="repeatable"
    )
    reset.add_argument("--partition", type=non_negative_int, metavar="N", help="only partition N")
    reset.add_argument(
        "--to",
        required=True,
        metavar="POSITION",
        help="earliest, latest, an offset, an ISO-8601 time or @ and epoch milliseconds",
    )
    reset.add_argument(
        "--execute",
        action="store_true",
        help="apply it (the group must have no active member); without it, only show it",
    )

    delete = add_action(actions, "delete", "delete groups that have no members", delete_groups)
    delete.add_argument("groups", nargs="+", metavar="GROUP")


async def list_groups(admin: Admin, args: argparse.Namespace) -> int:
    groups = await admin.list_consumer_groups()
    write_records(
        args,
        ("GROUP", "PROTOCOL", "STATE"),
        [(g.group_id, g.protocol_type, g.state) for g in groups],
    )
    return OK


async def describe_groups(admin: Admin, args: argparse.Namespace) -> int:
    described = await admin.describe_consumer_groups(args.groups)
    rows: list[tuple[object, ...]] = []
    for group in described.succeeded.values():
        head = (group.group_id, group.state, group.assignor or None)
        if not group.members:
            rows.append((*head, None, None, None, []))
        rows.extend(
            (
                *head,
                m.member_id,
                m.client_id or None,
                m.host or None,
                [f"{tp.topic}/{tp.partition}" for tp in m.assignment],
            )
            for m in group.members
        )
    headers = ("GROUP", "STATE", "ASSIGNOR", "MEMBER", "CLIENT", "HOST", "PARTITIONS")
    write_records(args, headers, rows)
    return failures(described)


async def group_offsets(admin: Admin, args: argparse.Namespace) -> int:
    partitions = await _partitions(admin, args.topic, None) if args.topic else None
    committed = await admin.list_consumer_group_offsets(args.group, partitions)
    ends = await admin.list_offsets({tp: OffsetSpec.latest() for tp in committed})
    rows = []
    for tp, offset in sorted(committed.items()):
        end = ends.succeeded[tp].offset if tp in ends.succeeded else None
        lag = end - offset if end is not None and offset >= 0 else None
        rows.append((tp.topic, tp.partition, offset if offset >= 0 else None, end, lag))
    write_records(args, ("TOPIC", "PARTITION", "COMMITTED", "END", "LAG"), rows)
    return failures(ends)


async def reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    position = parse_start(args.to, kafka=True, option="--to")
    partitions = await _partitions(admin, args.topic, args.partition)
    if isinstance(position, Offset):
        targets = dict.fromkeys(partitions, position.offset)
    else:
        found = await admin.list_offsets(dict.fromkeys(partitions, _spec(position)))
        if failures(found):
            return FAILED
        latest = OffsetSpec.latest()
        targets = {tp: listed.offset for tp, listed in found.succeeded.items()}
        past_the_end = [tp for tp, offset in targets.items() if offset < 0]
        if past_the_end:  # no record that late: the end, as Kafka's own tool resets
            ends = (await admin.list_offsets(dict.fromkeys(past_the_end, latest))).all()
            targets.update({tp: ends[tp].offset for tp in past_the_end})
    current = await admin.list_consumer_group_offsets(args.group, partitions)
    rows = [
        (tp.topic, tp.partition, _offset(current[tp]), new) for tp, new in sorted(targets.items())
    ]
    write_records(args, ("TOPIC", "PARTITION", "CURRENT", "NEW"), rows)
    if not args.execute:
        report("a dry run: nothing changed (add --execute to reset)")
        return OK
    return failures(await admin.alter_consumer_group_offsets(args.group, targets))


async def delete_groups(admin: Admin, args: argparse.Namespace) -> int:
    results = await admin.delete_consumer_groups(args.groups)
    for group in results.succeeded:
        print(f"deleted {group}", flush=True)
    return failures(results)


async def _partitions(admin: Admin, topics: list[str], only: int | None) -> list[TopicPartition]:
    described = (await admin.describe_topics(topics)).all()
    return [
        TopicPartition(name, p.partition)
        for name, description in described.items()
        for p in description.partitions
        if only is None or p.partition == only
    ]


def _spec(position: InitialPosition | AtTime | object) -> OffsetSpec:
    if position is InitialPosition.Earliest:
        return OffsetSpec.earliest()
    if position is InitialPosition.Latest:
        return OffsetSpec.latest()
    if isinstance(position, AtTime):
        return OffsetSpec.for_timestamp(position.ms)
    raise UsageError(f"--to: a Pulsar message id is no Kafka position; expected {FORMS}")


def _offset(offset: int) -> int | None:
    return offset if offset >= 0 else None
