"""``python -m msgclient.perf``: msgclient versus the official clients, in one run.

Workloads: ``produce`` and ``consume`` (throughput, msg/s, best of alternating rounds) and
``latency`` (publish-to-receive at a fixed rate, p50/p99). ``all`` runs the three.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from msgclient.embedded import PulsarBroker
from msgclient.perf import pulsar_consume, pulsar_latency, pulsar_produce
from msgclient.perf.plot import save_plot

CONTENDERS = ("msgclient", "pulsar-client")


def _topic(workload: str, name: str) -> str:
    return f"perf-{workload}-{name}-{uuid.uuid4().hex[:8]}"


@dataclass
class Results:
    """What a run measured, for the plot."""

    rates: dict[str, dict[str, float]] = field(default_factory=dict)  # workload -> client
    latencies: dict[str, list[float]] = field(default_factory=dict)  # client -> seconds


def _race(
    workload: str,
    args: argparse.Namespace,
    results: Results,
    run: Callable[[str, int], float],
) -> None:
    """Alternating rounds (so drift hits both alike); ``run(name, round)`` -> seconds."""
    best: dict[str, float] = {}
    for round_number in range(1, args.rounds + 1):
        for name in CONTENDERS:
            rate = args.messages / run(name, round_number)
            best[name] = max(best.get(name, 0.0), rate)
            print(f"  round {round_number} {workload} {name:14} {rate:>12,.0f} msg/s", flush=True)
    print(f"{workload}: best of {args.rounds} rounds")
    for name, rate in best.items():
        print(f"  {name:14} {rate:>12,.0f} msg/s")
    print(f"  ratio msgclient / pulsar-client: {best['msgclient'] / best['pulsar-client']:.2f}x")
    results.rates[workload] = best


def run_produce(url: str, args: argparse.Namespace, results: Results) -> None:
    runners: dict[str, Callable[[str, str, int, int], float]] = {
        "msgclient": pulsar_produce.run_msgclient,
        "pulsar-client": pulsar_produce.official_produce,
    }

    def run(name: str, _: int) -> float:
        return runners[name](url, _topic("produce", name), args.messages, args.size)

    _race("produce", args, results, run)


def run_consume(url: str, args: argparse.Namespace, results: Results) -> None:
    runners: dict[str, Callable[[pulsar_consume.Backlog], float]] = {
        "msgclient": pulsar_consume.msgclient_consume,
        "pulsar-client": pulsar_consume.official_consume,
    }
    backlogs: dict[int, pulsar_consume.Backlog] = {}

    def run(name: str, round_number: int) -> float:
        if round_number not in backlogs:  # one backlog per round, read by both
            print(f"  round {round_number}: producing a backlog of {args.messages}", flush=True)
            topic = _topic("consume", "backlog")
            backlogs[round_number] = pulsar_consume.make_backlog(
                url, topic, args.messages, args.size
            )
        return runners[name](backlogs[round_number])

    _race("consume", args, results, run)


def run_latency(url: str, args: argparse.Namespace, results: Results) -> None:
    runners = {
        "msgclient": pulsar_latency.msgclient_latency,
        "pulsar-client": pulsar_latency.official_latency,
    }
    print(f"latency at {args.rate:,} msg/s for {args.seconds:g} s (publish to receive):")
    for name in CONTENDERS:
        values = runners[name](url, _topic("latency", name), args.rate, args.seconds, args.size)
        p50, p99 = (pulsar_latency.percentile(values, f) * 1000 for f in (0.5, 0.99))
        print(f"  {name:14} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   ({len(values)} messages)")
        results.latencies[name] = values


WORKLOADS = {"produce": run_produce, "consume": run_consume, "latency": run_latency}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m msgclient.perf", description=__doc__)
    parser.add_argument("workload", choices=[*WORKLOADS, "all"], help="what to measure")
    parser.add_argument("--messages", type=int, default=200_000, help="messages per run")
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per client")
    parser.add_argument("--rate", type=int, default=10_000, help="latency: messages per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="latency: duration")
    parser.add_argument(
        "--service-url", help="an existing broker (default: start an embedded pulsar-lite)"
    )
    parser.add_argument(
        "--plot", type=Path, help="also draw the results into this PNG (needs matplotlib)"
    )
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        url = args.service_url
        if url is None:
            url = stack.enter_context(PulsarBroker()).service_url
        print(f"broker {url}; {args.messages} x {args.size} B messages, {args.rounds} rounds")
        results = Results()
        for name in WORKLOADS if args.workload == "all" else [args.workload]:
            WORKLOADS[name](url, args, results)
    if args.plot:
        save_plot(args.plot, results.rates, results.latencies)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
