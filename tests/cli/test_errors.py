"""Every command's errors: a message on stderr that names the problem, no traceback, and
the exit code (1 error, 2 usage). The commands run all at once: most need no broker."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from msgclient.cli import main
from msgclient.embedded import KafkaBroker, PulsarBroker
from tests.cli.helpers import Result, finish, start


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung broker)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A port nothing listens on (a broker that is not running)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# name: (arguments, exit code, what stderr says); {pulsar}, {kafka}, {closed}, {silent}
# and {topic} are filled in. In subprocesses, all at once: each kind of error once, on the
# cheaper interpreter start (Pulsar's; Kafka's imports kafka-python).
CASES: dict[str, tuple[tuple[str, ...], int, str]] = {
    "produce: bad URL": (
        ("produce", "localhost:6650", "t", "-m", "x"),
        1,
        "msgclient: error: service URL 'localhost:6650' has no scheme",
    ),
    "consume: missing topic": (
        ("consume", "{kafka}"),
        2,
        "msgclient consume: error: the following arguments are required: TOPIC",
    ),
    "produce: broker not listening": (
        ("produce", "pulsar://127.0.0.1:{closed}", "t", "-m", "x", "--timeout", "2"),
        1,
        "msgclient: error: cannot connect to 127.0.0.1:{closed}",
    ),
    "consume: broker not listening": (
        ("consume", "pulsar://127.0.0.1:{closed}", "t", "--timeout", "2"),
        1,
        "msgclient: error: cannot connect to 127.0.0.1:{closed}",
    ),
    "produce: --partition on Pulsar": (
        ("produce", "{pulsar}", "t", "-m", "x", "--partition", "1"),
        2,
        "msgclient produce: error: --partition is for Kafka: on Pulsar, produce to the "
        "partition's own topic (t-partition-1)",
    ),
    "consume: bad --from": (
        ("consume", "{pulsar}", "t", "--from", "yesterday"),
        2,
        "msgclient consume: error: --from 'yesterday' is none of: earliest, latest",
    ),
    "produce: bad JSON line": (
        ("produce", "{pulsar}", "{topic}", "--format", "json"),
        1,
        'msgclient: error: stdin line 2: "value_encoding" must be "utf-8" or "base64"',
    ),
}

# The others run in this process (main()), as an interpreter start costs 0.3-0.9 s.
IN_PROCESS: dict[str, tuple[tuple[str, ...], int, str]] = {
    "produce: unknown option": (
        ("produce", "{pulsar}", "t", "--bogus"),
        2,
        "msgclient produce: error: unrecognized arguments: --bogus",
    ),
    "embedded: unknown option": (("embedded", "--bogus"), 2, "unrecognized arguments: --bogus"),
    "no command": ((), 2, "the following arguments are required: COMMAND"),
    "unknown command": (("publish",), 2, "invalid choice: 'publish'"),
    "consume: bad URL": (
        ("consume", "pulsar://host:99999", "t"),
        1,
        "msgclient: error: service URL 'pulsar://host:99999': port '99999' is not a number",
    ),
    "consume: unknown scheme": (
        ("consume", "http://host", "t"),
        1,
        "msgclient: error: no protocol adapter for scheme 'http'",
    ),
    "consume: unknown option": (
        ("consume", "{kafka}", "t", "--bogus"),
        2,
        "msgclient consume: error: unrecognized arguments: --bogus",
    ),
    "perf: unknown option": (("perf", "produce", "--bogus"), 2, "unrecognized arguments: --bogus"),
    "produce: missing topic": (
        ("produce", "{pulsar}"),
        2,
        "msgclient produce: error: the following arguments are required: TOPIC",
    ),
    "produce: broker silent (--timeout)": (
        ("produce", "pulsar://127.0.0.1:{silent}", "t", "-m", "x", "--timeout", "0.5"),
        1,
        "msgclient: error: no CONNECTED from pulsar://127.0.0.1:{silent} within the operation",
    ),
    "consume: broker silent (--timeout)": (
        ("consume", "kafka://127.0.0.1:{silent}", "t", "--timeout", "0.5"),
        1,
        "msgclient: error: no bootstrap server answered",
    ),
    "consume: --partition on Pulsar": (
        ("consume", "{pulsar}", "t", "--partition", "0"),
        2,
        "msgclient consume: error: --partition is for Kafka",
    ),
    "consume: an offset on Pulsar": (
        ("consume", "{pulsar}", "t", "--from", "42"),
        2,
        "msgclient consume: error: --from '42': an offset is Kafka's",
    ),
    "consume: a Pulsar id on Kafka": (
        ("consume", "{kafka}", "t", "--from", "(1,2,-1,0)"),
        2,
        "msgclient consume: error: --from '(1,2,-1,0)': a Pulsar message id",
    ),
    "consume: -n 0": (("consume", "{kafka}", "t", "-n", "0"), 2, "expected an integer > 0"),
    "produce: missing file": (
        ("produce", "{pulsar}", "t", "--file", "/nonexistent/file"),
        1,
        "msgclient: error: --file /nonexistent/file: no such file",
    ),
    "consume: Kafka broker not listening": (
        ("consume", "kafka://127.0.0.1:{closed}", "t", "--timeout", "2"),
        1,
        "msgclient: error: no bootstrap server answered: cannot connect to 127.0.0.1:{closed}",
    ),
}

STDIN = b'{"value": "ok"}\n{"value": "x", "value_encoding": "hex"}\n{"value": "never"}\n'


@pytest.fixture(scope="module")
def fill(
    pulsar_broker: PulsarBroker, kafka_broker: KafkaBroker, silent_port: int, closed_port: int
) -> dict[str, str]:
    """What the cases' {names} stand for."""
    return {
        "pulsar": pulsar_broker.service_url,
        "kafka": kafka_broker.service_url,
        "closed": str(closed_port),
        "silent": str(silent_port),
        "topic": f"cli-errors-{time.monotonic_ns()}",
    }


@pytest.fixture(scope="module")
def outcomes(fill: dict[str, str]) -> dict[str, tuple[Result, float]]:
    """Every subprocess case, run at once: its result, and the seconds until it was in."""
    began = time.monotonic()
    processes = {
        name: start(*(arg.format(**fill) for arg in args)) for name, (args, _, _) in CASES.items()
    }
    return {
        name: (finish(process, STDIN), time.monotonic() - began)
        for name, process in processes.items()
    }


@pytest.mark.parametrize("case", list(CASES))
def test_error(case: str, outcomes: dict[str, tuple[Result, float]], fill: dict[str, str]) -> None:
    _, code, message = CASES[case]
    result, seconds = outcomes[case]
    assert message.format(**fill) in result.err, result.err
    assert result.code == code, result.err
    assert "Traceback" not in result.err
    assert result.out == b""
    if "broker" in case:
        assert seconds < 8, f"{seconds:.1f} s to report an unreachable broker"


@pytest.mark.parametrize("case", list(IN_PROCESS))
def test_error_in_process(
    case: str, fill: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    args, code, message = IN_PROCESS[case]
    began = time.monotonic()
    got: int | str | None
    try:
        got = main([arg.format(**fill) for arg in args])
    except SystemExit as exited:  # argparse's way out
        got = exited.code
    seconds = time.monotonic() - began
    out, err = capsys.readouterr()
    assert message.format(**fill) in err, err
    assert got == code, err
    assert out == ""
    if "broker" in case:
        assert seconds < 5, f"{seconds:.1f} s to report a silent broker (--timeout 0.5)"
