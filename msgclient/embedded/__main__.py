"""``python -m msgclient.embedded [pulsar|kafka|all]``: run brokers until Ctrl-C or SIGTERM.

Prints one service URL per line on stdout once every broker accepts connections.
"""

from __future__ import annotations

import argparse
import signal
import sys
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

from msgclient.embedded._broker import EmbeddedBroker
from msgclient.embedded._process import BrokerStartError
from msgclient.embedded.kafka import KafkaBroker
from msgclient.embedded.pulsar import PulsarBroker
from msgclient.errors import InvalidConfigurationError


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.partitioned_topic and args.broker == "kafka":
        parser.error("--partitioned-topic applies to the pulsar broker only")
    try:
        brokers = _brokers(args)
    except InvalidConfigurationError as exc:
        parser.error(str(exc))
    # Both unwind like Ctrl-C, so the brokers are stopped on the way out. SIGINT too: a shell
    # starts background jobs with SIGINT ignored, and Python then leaves it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    try:
        with ExitStack() as running:
            for broker in brokers:
                running.enter_context(broker)
                print(broker.service_url, flush=True)
            while True:
                signal.pause()
    except BrokerStartError as exc:
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


def _brokers(args: argparse.Namespace) -> list[EmbeddedBroker]:
    data_dir: Path | None = args.data_dir
    brokers: list[EmbeddedBroker] = []
    if args.broker in ("pulsar", "all"):
        brokers.append(
            PulsarBroker(
                data_dir=data_dir / "pulsar" if data_dir else None,
                partitioned_topics=dict(args.partitioned_topic),
            )
        )
    if args.broker in ("kafka", "all"):
        brokers.append(KafkaBroker(data_dir=data_dir / "kafka" if data_dir else None))
    return brokers


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m msgclient.embedded",
        description="Run real brokers on 127.0.0.1 until Ctrl-C or SIGTERM; "
        "print their service URLs, one per line.",
    )
    parser.add_argument(
        "broker",
        nargs="?",
        choices=("pulsar", "kafka", "all"),
        default="all",
        help="which broker to run (default: all)",
    )
    parser.add_argument(
        "--partitioned-topic",
        metavar="NAME=N",
        type=_partitioned_topic,
        action="append",
        default=[],
        help="a Pulsar topic with N partitions (repeatable)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="keep broker files in DIR/pulsar and DIR/kafka (default: temporary, deleted on exit)",
    )
    return parser


def _partitioned_topic(value: str) -> tuple[str, int]:
    name, _, count = value.rpartition("=")
    if not name or not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=N with N >= 1, got {value!r}")
    return name, int(count)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
