"""Run the official pulsar-client-python test suite on pulsar-lite, once with the official
``pulsar`` module and once with ``pulsar`` aliased to ``msgclient.pulsar_compat``, and
list the tests whose outcome differs (the measure of pulsar_compat's parity).

Not part of the test session (the suite is another project's, not shipped here): check
out apache/pulsar-client-python at the tag of the installed pulsar-client, then

    python tests/compat/official_suite/run.py CHECKOUT/tests [--only TEST_ID ...]

Each test runs in a pytest process of its own against a fresh pulsar-lite (the suite
names fixed topics and subscriptions), the official run on 127.0.0.1:6650 and ours on
6660 at the same time (the suite's URLs are rewritten in a copy). Tests that need the
admin HTTP API, TLS, broker authentication or several clusters fail on both: pulsar-lite
has none of them. Results go to official.json and compat.json in --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from msgclient.embedded import PulsarBroker

FILES = [
    "pulsar_test.py",
    "asyncio_test.py",
    "reader_test.py",
    "schema_test.py",
    "table_view_test.py",
    "custom_logger_test.py",
    "debug_logger_test.py",
    "interrupted_test.py",
]
PORTS = {"official": 6650, "compat": 6660}
ALIASES = Path(__file__).with_name("aliases.py")
TEST_TIMEOUT_S = 100


def copy_suite(suite: Path, work: Path, module: str) -> Path:
    tests = work / module
    shutil.copytree(suite, tests)
    port = PORTS[module]
    for path in tests.glob("*.py"):
        text = path.read_text().replace("localhost:6650", f"localhost:{port}")
        path.write_text(text.replace("127.0.0.1:6650", f"127.0.0.1:{port}"))
    conftest = ALIASES.read_text() if module == "compat" else ""
    (tests / "conftest.py").write_text(conftest)
    return tests


def collect(tests: Path) -> list[str]:
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FILES],
        cwd=tests,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [line for line in listing.splitlines() if "::" in line]


def run_one(tests: Path, module: str, test_id: str) -> dict[str, object]:
    broker = PulsarBroker(port=PORTS[module])
    broker.start()
    started = time.monotonic()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--timeout",
                str(TEST_TIMEOUT_S),
                test_id,
            ],
            cwd=tests,
            capture_output=True,
            text=True,
            timeout=TEST_TIMEOUT_S + 30,
            check=False,
        )
        status = {0: "passed", 5: "skipped"}.get(done.returncode, "failed")
        tail = (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        status, tail = "failed", "timed out"
    finally:
        broker.stop()
    return {"status": status, "seconds": round(time.monotonic() - started, 1), "tail": tail}


def run_module(tests: Path, module: str, ids: list[str], out: Path) -> dict[str, dict[str, object]]:
    results: dict[str, dict[str, object]] = {}
    for n, test_id in enumerate(ids, 1):
        results[test_id] = result = run_one(tests, module, test_id)
        print(f"{module:8} [{n}/{len(ids)}] {result['status']:7} {test_id}", flush=True)
        (out / f"{module}.json").write_text(json.dumps(results, indent=1))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "suite", type=Path, help="the tests/ folder of a pulsar-client-python checkout"
    )
    parser.add_argument("--only", nargs="*", default=None, help="test ids to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path("."), help="where the JSON results go")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        copies = {module: copy_suite(args.suite, Path(scratch), module) for module in PORTS}
        ids = args.only or collect(copies["official"])
        with ThreadPoolExecutor(len(PORTS)) as pool:
            runs = {m: pool.submit(run_module, copies[m], m, ids, args.out) for m in PORTS}
            official, compat = (runs[m].result() for m in PORTS)
    passed = {
        m: sorted(t for t, r in res.items() if r["status"] == "passed")
        for m, res in (("official", official), ("compat", compat))
    }
    print(
        f"\n{len(ids)} tests: official {len(passed['official'])} passed, "
        f"pulsar_compat {len(passed['compat'])} passed"
    )
    for test_id in ids:
        theirs, ours = official[test_id]["status"], compat[test_id]["status"]
        if theirs != ours:
            print(f"  differs: {test_id}: official {theirs}, pulsar_compat {ours}")


if __name__ == "__main__":
    main()
