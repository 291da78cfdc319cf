"""``msgclient topics list|create|delete|describe URL ...``: topics through the admin API
(docs/admin.md says what each broker serves)."""

from __future__ import annotations

import argparse

from msgclient.admin import Admin, ConfigResource, NewTopic
from msgclient.cli.admin_command import SubParsers, add_action, failures, write_records
from msgclient.cli.arguments import key_value, positive_int
from msgclient.cli.errors import FAILED, OK
from msgclient.errors import NotSupportedError, TopicAlreadyExistsError, TopicNotFoundError


def register(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "topics",
        help="list, create, delete and describe topics",
        description="List, create, delete and describe topics (Kafka: all four; Pulsar: "
        "list and describe, the rest is its REST admin API).",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = add_action(actions, "list", "list the topics' names, one a line", list_topics)
    listing.add_argument("--namespace", help="Pulsar: tenant/namespace (default public/default)")
    listing.add_argument("--internal", action="store_true", help="Kafka: internal topics too")

    create = add_action(actions, "create", "create topics", create_topics)
    create.add_argument("topics", nargs="+", metavar="TOPIC")
    create.add_argument(
        "--partitions", type=positive_int, default=-1, metavar="N", help="default: the broker's"
    )
    create.add_argument(
        "--replication-factor",
        type=positive_int,
        default=-1,
        metavar="N",
        help="default: the broker's",
    )
    create.add_argument(
        "--config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config (repeatable), e.g. retention.ms=86400000",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="a topic that exists is no error"
    )

    delete = add_action(actions, "delete", "delete topics", delete_topics)
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true", help="a missing topic is no error")

    describe = add_action(
        actions,
        "describe",
        "each partition's leader and replicas, and the topic's configs",
        describe_topics,
        output=True,
    )
    describe.add_argument("topics", nargs="+", metavar="TOPIC")


async def list_topics(admin: Admin, args: argparse.Namespace) -> int:
    for name in await admin.list_topics(args.namespace, include_internal=args.internal):
        print(name, flush=True)
    return OK


async def create_topics(admin: Admin, args: argparse.Namespace) -> int:
    configs = dict(args.config)
    new = [NewTopic(t, args.partitions, args.replication_factor, configs) for t in args.topics]
    results = await admin.create_topics(new)
    for name in results.succeeded:
        print(f"created {name}", flush=True)
    return failures(results, TopicAlreadyExistsError if args.if_not_exists else ())


async def delete_topics(admin: Admin, args: argparse.Namespace) -> int:
    results = await admin.delete_topics(args.topics)
    for name in results.succeeded:
        print(f"deleted {name}", flush=True)
    return failures(results, TopicNotFoundError if args.if_exists else ())


async def describe_topics(admin: Admin, args: argparse.Namespace) -> int:
    described = await admin.describe_topics(args.topics)
    try:
        configs = await admin.describe_configs(
            [ConfigResource.topic(t) for t in described.succeeded]
        )
        config_of = {
            r.name: {n: e.value or "" for n, e in c.items()} for r, c in configs.succeeded.items()
        }
    except NotSupportedError:  # Pulsar: configs are its REST admin API's
        config_of = {}
    rows = [
        (
            name,
            p.partition,
            p.leader,
            list(p.replicas),
            list(p.in_sync_replicas),
            config_of.get(name, {}),
        )
        for name, description in described.succeeded.items()
        for p in description.partitions
    ]
    write_records(args, ("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "CONFIGS"), rows)
    return FAILED if failures(described) else OK
