"""Run by test_ctrl_c.py in a subprocess: a blocking receive interrupted by SIGINT, then
the same consumer used again. Prints what happened, one line per step."""

from __future__ import annotations

import importlib
import logging
import signal
import sys
import time

# As a program started from a terminal: a test runner started in the background (nohup,
# `&`) has SIGINT ignored, and Python keeps an ignored SIGINT ignored in its children.
signal.signal(signal.SIGINT, signal.default_int_handler)

module_name, service_url, topic = sys.argv[1:4]
pulsar = importlib.import_module(module_name)
client = pulsar.Client(service_url, logger=logging.getLogger("quiet"))
consumer = client.subscribe(topic, "sub")
producer = client.create_producer(topic)
print("ready", flush=True)
started = time.monotonic()
try:
    consumer.receive()
    print("received-unexpectedly", flush=True)
except (KeyboardInterrupt, pulsar.Interrupted) as error:
    kinds = [
        kind.__name__ for kind in (KeyboardInterrupt, pulsar.Interrupted) if isinstance(error, kind)
    ]
    print(f"interrupted {'+'.join(kinds)} {time.monotonic() - started:.3f}", flush=True)
producer.send(b"after")
try:
    print("second", consumer.receive(10_000).data().decode(), flush=True)
except pulsar.Timeout:
    print("second timed out", flush=True)
client.close()
print("closed", flush=True)
