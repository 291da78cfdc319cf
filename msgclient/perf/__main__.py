"""``python -m msgclient.perf``: msgclient versus the official clients, in one run."""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Callable
from contextlib import ExitStack

from msgclient.embedded import PulsarBroker
from msgclient.perf import pulsar_produce

Runner = Callable[[str, str, int, int], float]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m msgclient.perf", description=__doc__)
    parser.add_argument("workload", choices=["produce"], help="what to measure")
    parser.add_argument("--messages", type=int, default=200_000, help="messages per run")
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per client")
    parser.add_argument(
        "--service-url", help="an existing broker (default: start an embedded pulsar-lite)"
    )
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        url = args.service_url
        if url is None:
            broker = stack.enter_context(PulsarBroker())
            url = broker.service_url
        print(f"broker {url}; {args.messages} x {args.size} B messages, {args.rounds} rounds")
        contenders: dict[str, Runner] = {
            "msgclient": pulsar_produce.run_msgclient,
            "pulsar-client": pulsar_produce.official_produce,
        }
        best: dict[str, float] = {}
        for round_number in range(1, args.rounds + 1):
            for name, run in contenders.items():  # alternate, so drift hits both alike
                topic = f"perf-{args.workload}-{name}-{uuid.uuid4().hex[:8]}"
                seconds = run(url, topic, args.messages, args.size)
                rate = args.messages / seconds
                best[name] = max(best.get(name, 0.0), rate)
                print(f"  round {round_number} {name:14} {rate:>12,.0f} msg/s", flush=True)
        print(f"{args.workload}: best of {args.rounds} rounds")
        for name, rate in best.items():
            print(f"  {name:14} {rate:>12,.0f} msg/s")
        ratio = best["msgclient"] / best["pulsar-client"]
        print(f"  ratio msgclient / pulsar-client: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
