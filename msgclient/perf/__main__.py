"""``python -m msgclient.perf``: msgclient versus other clients, in one run.

Pulsar (an embedded pulsar-lite, or --service-url), against the official pulsar-client:
``produce`` and ``consume`` (throughput, msg/s, best of alternating rounds) and ``latency``
(publish-to-receive at a fixed rate, p50/p99); ``all`` runs the three.

Kafka (an embedded tansu, or --bootstrap-servers), against kafka-python, aiokafka and
confluent-kafka, each at msgclient's settings and at its own defaults: ``kafka-produce`` and
``kafka-consume``; ``kafka-txn`` (transactions of 1000 messages, against confluent-kafka's
transactional producer); ``kafka`` runs the three. ``--broker kafka`` (or ``both``) sends
``produce``, ``consume`` and ``all`` to Kafka (or to both brokers).

Spark (needs pyspark: ``pip install msgclient[spark]``): ``spark`` measures rows/s through
``format("msgclient")`` (``local[2]``, a count over the whole DataFrame) against the plain
msgclient consumer reading the same backlog (1M messages by default, on 4 partitions), on
the broker ``--broker`` names (pulsar, kafka or both); ``spark --write`` measures rows/s
through ``df.write.format("msgclient")`` against a plain producer sending the same rows.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from msgclient.embedded import KafkaBroker, PulsarBroker
from msgclient.perf import (
    event_loop,
    kafka_consume,
    kafka_produce,
    kafka_txn,
    pulsar_consume,
    pulsar_latency,
    pulsar_produce,
    spark_sink,
    spark_source,
)
from msgclient.perf.kafka_produce import KafkaTarget
from msgclient.perf.plot import save_plot
from msgclient.perf.race import alternating, at_best, print_pairs, run_rounds
from msgclient.perf.stopwatch import GroupClock

CONTENDERS = ("msgclient", "pulsar-client")
MESSAGES = 200_000


def _topic(workload: str, name: str) -> str:
    return f"perf-{workload}-{name}-{uuid.uuid4().hex[:8]}"


@dataclass
class Results:
    """What a run measured, for the plot."""

    rates: dict[str, dict[str, float]] = field(default_factory=dict)  # workload -> client
    latencies: dict[str, list[float]] = field(default_factory=dict)  # client -> seconds


def _describe(workload: str, rows: Sequence[tuple[str, str]]) -> None:
    print(f"{workload}: the rows")
    for label, settings in rows:
        print(f"  {label:14} {settings}")


def _split(label: str) -> tuple[str, str]:
    """``"msgclient same"`` -> ``("msgclient", "same")``."""
    client, row = label.split(" ", 1)
    return client, row


def run_produce(url: str, args: argparse.Namespace, results: Results) -> None:
    rows = {row.label: row for row in pulsar_produce.ROWS}
    _describe("produce", [(row.label, row.settings) for row in rows.values()])
    cpu_us: dict[str, list[float]] = {}

    def run(label: str, _: int) -> float:
        client, row = _split(label)
        count: int = args.messages
        topic = _topic("produce", client)
        if client == "msgclient":
            options = rows[row].msgclient
            measured = pulsar_produce.msgclient_produce(
                url, topic, count, args.size, options, rows[row].bulk, rows[row].callbacks
            )
        else:
            options = rows[row].official
            measured = pulsar_produce.official_produce(
                url, topic, count, args.size, options, rows[row].callbacks
            )
        cpu_us.setdefault(label, []).append(measured.cpu_us)
        return measured.rate

    rates = run_rounds("produce", args.rounds, lambda n: alternating(list(rows), n), run)
    print_pairs("produce", list(rows), rates, cpu_us)
    results.rates["produce"] = {label: max(values) for label, values in rates.items()}


def run_consume(url: str, args: argparse.Namespace, results: Results) -> None:
    kinds = {kind.label: kind for kind in pulsar_consume.BACKLOGS}
    _describe("consume", [(kind.label, kind.settings) for kind in kinds.values()])
    print("  consumers: both at their defaults, which agree (Shared, receiver queue 1000)")
    backlogs: dict[tuple[str, int], pulsar_consume.Backlog] = {}

    def run(label: str, round_number: int) -> float:
        client, row = _split(label)
        if (row, round_number) not in backlogs:  # one backlog per row and round, read by both
            kind = kinds[row]
            print(
                f"  round {round_number}: writing the {row} backlog of {args.messages:,} "
                f"with {kind.writer}",
                flush=True,
            )
            written, rate = pulsar_consume.make_backlog(
                url, _topic("consume", row), args.messages, args.size, kind
            )
            per_entry = kind.messages_per_entry(rate)
            print(
                f"    written at {rate:,.0f} msg/s; messages an entry: about {per_entry:,.0f}",
                flush=True,
            )
            backlogs[row, round_number] = written
        consume = (
            pulsar_consume.msgclient_consume
            if client == "msgclient"
            else pulsar_consume.official_consume
        )
        backlog = backlogs[row, round_number]
        return backlog.count / consume(backlog)

    rates = run_rounds("consume", args.rounds, lambda n: alternating(list(kinds), n), run)
    print_pairs("consume", list(kinds), rates)
    results.rates["consume"] = {label: max(values) for label, values in rates.items()}


def run_latency(url: str, args: argparse.Namespace, results: Results) -> None:
    runners = {
        "msgclient": pulsar_latency.msgclient_latency,
        "pulsar-client": pulsar_latency.official_latency,
    }
    print(f"latency at {args.rate:,} msg/s for {args.seconds:g} s (publish to receive):")
    for row in pulsar_latency.ROWS:
        print(f"  {row.label}: {row.settings}")
        for name in CONTENDERS:
            options = row.msgclient if name == "msgclient" else row.official
            topic = _topic("latency", name)
            values = runners[name](url, topic, args.rate, args.seconds, args.size, options)
            p50, p99 = (pulsar_latency.percentile(values, f) * 1000 for f in (0.5, 0.99))
            print(
                f"    {name:14} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   ({len(values)} messages)",
                flush=True,
            )
            results.latencies[f"{name} {row.label}"] = values


# -- Kafka ---------------------------------------------------------------------------------


def _race_table(
    workload: str,
    args: argparse.Namespace,
    results: Results,
    rows: Sequence[tuple[str, str]],
    run: Callable[[str, int], float],
    *,
    reverse_even_rounds: bool = False,
    cpu_us: dict[str, list[float]] | None = None,
    broker_cores: dict[str, list[float]] | None = None,
    comparisons: Sequence[kafka_produce.Comparison] = (),
) -> None:
    """Alternating rounds over ``rows`` (label, settings); ``run(label, round)`` -> msg/s.
    Prints the best round of each (with the CPU µs a message of that round, when
    ``run`` fills ``cpu_us``, and how many cores the client and the broker kept busy, when
    it fills ``broker_cores`` too), then each comparison, or else the ratio of each
    msgclient row to each rival row. ``reverse_even_rounds``: even rounds run the rows last
    to first."""
    print(f"{workload}: {len(rows)} runs a round")
    for label, settings in rows:
        print(f"  {label:28} {settings}")
    labels = [label for label, _ in rows]

    def order(round_number: int) -> list[str]:
        flip = reverse_even_rounds and round_number % 2 == 0
        return labels[::-1] if flip else labels

    rates = run_rounds(workload, args.rounds, order, run)
    best = {label: max(values) for label, values in rates.items()}
    cpu = (
        {label: at_best(values, cpu_us[label]) for label, values in rates.items()} if cpu_us else {}
    )
    print(f"{workload}: best of {args.rounds} rounds")
    for label, rate in best.items():
        cost = f"{cpu[label]:>8.2f} µs CPU a message" if cpu else ""
        if cpu and broker_cores and broker_cores[label]:
            broker = at_best(rates[label], broker_cores[label])
            cost += f"; cores busy: client {cpu[label] * rate / 1e6:.2f}, broker {broker:.2f}"
        print(f"  {label:28} {rate:>12,.0f} msg/s {cost}")
    if comparisons:
        _print_comparisons(best, cpu, comparisons)
    else:
        _print_ratio_matrix(best)
    results.rates[workload] = best


def _print_comparisons(
    best: dict[str, float], cpu: dict[str, float], comparisons: Sequence[kafka_produce.Comparison]
) -> None:
    """Each comparison: msgclient's row against its best rival, in msg/s and CPU a message;
    then overall, msgclient's best row against the best rival row."""
    print("  msgclient against the best rival (msg/s ratio; CPU a message, rival / msgclient)")
    for comparison in comparisons:
        rival = max(comparison.rivals, key=best.__getitem__)
        print(f"    {comparison.title}:")
        print(
            f"      {comparison.ours} {best[comparison.ours]:,.0f} / {rival} "
            f"{best[rival]:,.0f} = {best[comparison.ours] / best[rival]:.2f}x; "
            f"CPU {cpu[comparison.ours]:.2f} / {cpu[rival]:.2f} µs "
            f"= {cpu[rival] / cpu[comparison.ours]:.2f}x"
        )
    ours = max((label for label in best if label.startswith("msgclient")), key=best.__getitem__)
    rival = max(
        (label for label in best if not label.startswith("msgclient")), key=best.__getitem__
    )
    print(
        f"    overall, the fastest of each: {ours} {best[ours]:,.0f} / {rival} "
        f"{best[rival]:,.0f} = {best[ours] / best[rival]:.2f}x",
        flush=True,
    )


def _print_ratio_matrix(best: dict[str, float]) -> None:
    ours = [label for label in best if label.startswith("msgclient")]
    widths = [max(18, len(o) + 2) for o in ours]
    print(
        "  ratio (msgclient row / rival row): "
        + "".join(f"{o:>{w}}" for o, w in zip(ours, widths, strict=True))
    )
    for rival in (label for label in best if label not in ours):
        ratios = "".join(
            f"{best[o] / best[rival]:>{w - 1}.2f}x" for o, w in zip(ours, widths, strict=True)
        )
        print(f"    {rival:32}{ratios}")


def _race_producers(
    workload: str,
    contenders: Sequence[kafka_produce.Contender],
    target: KafkaTarget,
    args: argparse.Namespace,
    results: Results,
    *,
    reverse_even_rounds: bool = False,
    comparisons: Sequence[kafka_produce.Comparison] = (),
) -> None:
    """Each run on a fresh topic of its own, deleted after it."""
    by_label = {c.label: c for c in contenders}
    cpu_us: dict[str, list[float]] = {c.label: [] for c in contenders}
    broker_cores: dict[str, list[float]] = {c.label: [] for c in contenders}

    def run(label: str, _: int) -> float:
        topic = _topic(workload, label.replace(" ", "-"))
        kafka_produce.create_topic(target, topic)
        try:
            # The broker's cores over the whole run (the client's connect and close too).
            broker = GroupClock(target.broker_group) if target.broker_group else None
            measured = by_label[label].run(target, topic, args.messages, args.size)
            broker_time = broker.stop() if broker else None
        finally:
            kafka_produce.delete_topic(target, topic)
        cpu_us[label].append(measured.cpu_us)
        if broker_time:
            broker_cores[label].append(broker_time[0] / broker_time[1])
        return measured.rate

    rows = [(c.label, c.settings) for c in contenders]
    _race_table(
        workload,
        args,
        results,
        rows,
        run,
        reverse_even_rounds=reverse_even_rounds,
        cpu_us=cpu_us,
        broker_cores=broker_cores,
        comparisons=comparisons,
    )


def run_kafka_produce(target: KafkaTarget, args: argparse.Namespace, results: Results) -> None:
    _race_producers(
        "kafka-produce",
        kafka_produce.CONTENDERS,
        target,
        args,
        results,
        comparisons=kafka_produce.COMPARISONS,
    )


def run_kafka_txn(target: KafkaTarget, args: argparse.Namespace, results: Results) -> None:
    """Transactions of ``kafka_txn.TXN_MESSAGES``; msgclient runs first in odd rounds, last
    in even ones."""
    _race_producers(
        "kafka-txn", kafka_txn.CONTENDERS, target, args, results, reverse_even_rounds=True
    )


def run_kafka_consume(target: KafkaTarget, args: argparse.Namespace, results: Results) -> None:
    readers = {r.label: r for r in kafka_consume.READERS}
    backlogs: dict[int, kafka_consume.Backlog] = {}

    def run(label: str, round_number: int) -> float:
        if round_number not in backlogs:  # one backlog per round, read by all
            for old in backlogs.values():
                kafka_produce.delete_topic(target, old.topic)
            backlogs.clear()
            print(
                f"  round {round_number}: writing a backlog of {args.messages:,} "
                "with confluent-kafka (its default batching)",
                flush=True,
            )
            backlogs[round_number] = kafka_consume.make_backlog(
                target, _topic("kafka-consume", "backlog"), args.messages, args.size
            )
        return readers[label].run(backlogs[round_number])

    rows = [(r.label, r.settings) for r in kafka_consume.READERS]
    try:
        _race_table("kafka-consume", args, results, rows, run)
    finally:
        for backlog in backlogs.values():
            kafka_produce.delete_topic(target, backlog.topic)


def run_spark(parser: argparse.ArgumentParser, args: argparse.Namespace, results: Results) -> None:
    """The source against the plain consumer (``--write``: the sink against the plain
    producer), on each broker asked for; each run starts its own embedded broker (Pulsar's
    partitioned topics are set before the start) unless ``--service-url`` or
    ``--bootstrap-servers`` names one."""
    if importlib.util.find_spec("pyspark") is None:
        parser.error("spark needs pyspark: pip install msgclient[spark]")
    for broker in ("pulsar", "kafka") if args.broker == "both" else (args.broker or "pulsar",):
        url = (
            args.service_url
            if broker == "pulsar"
            else args.bootstrap_servers and f"kafka://{args.bootstrap_servers}"
        )
        if args.write:
            written = spark_sink.run(
                url, args.messages, args.size, args.partitions, args.rounds, broker, args.master
            )
            results.rates[f"spark sink on {broker}"] = {
                "plain producer": written.plain_rate,
                "spark sink": written.sink_rate,
                **(
                    {}
                    if written.exactly_once_rate is None
                    else {"spark sink exactlyOnce": written.exactly_once_rate}
                ),
                "spark, rows discarded": written.discard_rate,
            }
            continue
        result = spark_source.run(
            url, args.messages, args.size, args.partitions, args.rounds, broker, args.master
        )
        results.rates[f"spark on {broker}"] = {
            "plain consumer": result.plain_rate,
            "spark source": result.spark_rate,
        }


PULSAR_WORKLOADS = {"produce": run_produce, "consume": run_consume, "latency": run_latency}
KAFKA_WORKLOADS = {
    "kafka-produce": run_kafka_produce,
    "kafka-consume": run_kafka_consume,
    "kafka-txn": run_kafka_txn,
}
BROKERS = ("pulsar", "kafka", "both")


def _plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The workloads to run, in order, from the workload and ``--broker``."""
    if args.workload == "kafka" or args.workload in KAFKA_WORKLOADS:
        if args.broker not in (None, "kafka"):
            parser.error(f"{args.workload} runs on Kafka, not --broker {args.broker}")
        return list(KAFKA_WORKLOADS) if args.workload == "kafka" else [args.workload]
    broker = args.broker or "pulsar"
    names = list(PULSAR_WORKLOADS) if args.workload == "all" else [args.workload]
    plan = names if broker in ("pulsar", "both") else []
    if broker in ("kafka", "both"):
        plan += [f"kafka-{name}" for name in names if f"kafka-{name}" in KAFKA_WORKLOADS]
    if not plan:
        parser.error(f"{args.workload} is measured on Pulsar only")
    return plan


def _kafka_target(
    parser: argparse.ArgumentParser, args: argparse.Namespace, broker_group: int | None
) -> KafkaTarget:
    for module in ("aiokafka", "confluent_kafka", "kafka"):
        try:
            importlib.import_module(module)
        except ImportError:
            parser.error(f"the Kafka workloads need {module}: pip install msgclient[peers]")
    return KafkaTarget(args.bootstrap_servers, broker_group)


def _run_plan(parser: argparse.ArgumentParser, args: argparse.Namespace, results: Results) -> None:
    """The Pulsar and Kafka workloads, on brokers started once for the whole plan."""
    plan = _plan(parser, args)
    with ExitStack() as stack:
        url: str | None = None
        target: KafkaTarget | None = None
        for name in plan:
            if name in KAFKA_WORKLOADS:
                if target is None:
                    broker_group = None
                    if args.bootstrap_servers is None:
                        broker = stack.enter_context(KafkaBroker())
                        args.bootstrap_servers = broker.bootstrap_servers
                        broker_group = broker.pid  # its own session: the group's leader
                    target = _kafka_target(parser, args, broker_group)
                    print(
                        f"kafka broker {target.bootstrap_servers}; {args.messages} x "
                        f"{args.size} B messages, {args.rounds} rounds, topics of "
                        f"{kafka_produce.PARTITIONS} partition"
                    )
                KAFKA_WORKLOADS[name](target, args, results)
                continue
            if url is None:
                url = args.service_url or stack.enter_context(PulsarBroker()).service_url
                print(
                    f"broker {url}; {args.messages} x {args.size} B messages, {args.rounds} rounds"
                )
            PULSAR_WORKLOADS[name](url, args, results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m msgclient.perf",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "workload",
        choices=[*PULSAR_WORKLOADS, "all", *KAFKA_WORKLOADS, "kafka", "spark"],
        help="what to measure",
    )
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        help="where produce, consume, all and spark run (default pulsar; latency is Pulsar only)",
    )
    parser.add_argument(
        "--messages",
        type=int,
        help=f"messages per run (default {MESSAGES:,}; spark: {spark_source.MESSAGES:,})",
    )
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per client")
    parser.add_argument("--rate", type=int, default=10_000, help="latency: messages per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="latency: duration")
    parser.add_argument(
        "--partitions",
        type=int,
        default=spark_source.PARTITIONS,
        help="spark: partitions of the embedded broker's topic",
    )
    parser.add_argument("--master", default=spark_source.MASTER, help="spark: the Spark master")
    parser.add_argument(
        "--write",
        action="store_true",
        help="spark: measure the sink (df.write) against a plain producer, not the source",
    )
    parser.add_argument(
        "--service-url", help="an existing Pulsar broker (default: start an embedded pulsar-lite)"
    )
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="an existing Kafka broker (default: start an embedded tansu)",
    )
    parser.add_argument(
        "--loop",
        choices=event_loop.LOOPS,
        default="asyncio",
        help="the event loop of the asyncio clients (msgclient, aiokafka); uvloop needs "
        "pip install msgclient[uvloop]",
    )
    parser.add_argument(
        "--plot", type=Path, help="also draw the results into this PNG (needs matplotlib)"
    )
    args = parser.parse_args(argv)
    if args.messages is None:
        args.messages = spark_source.MESSAGES if args.workload == "spark" else MESSAGES
    if args.loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        parser.error("--loop uvloop needs uvloop: pip install msgclient[uvloop]")
    print(f"asyncio clients run on {event_loop.choose(args.loop)}")
    results = Results()
    if args.workload == "spark":
        run_spark(parser, args, results)
    else:
        _run_plan(parser, args, results)
    if args.plot:
        save_plot(args.plot, results.rates, results.latencies)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
