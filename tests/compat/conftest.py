"""Fixtures of the compatibility tests: each test runs once on the official ``pulsar``
module and once on ``msgclient.pulsar_compat``, with the same code."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pulsar
import pytest

from msgclient import pulsar_compat
from msgclient.embedded import PulsarBroker
from msgclient.pulsar_compat.loggers import SOURCES

RECEIVE_MS = 10_000

# The official client logs INFO lines to stdout by default: send them to a quiet logger.
QUIET = logging.getLogger("tests.compat.official")
QUIET.setLevel(logging.WARNING)


@pytest.fixture(params=["official", "compat"])
def pulsar_module(request: pytest.FixtureRequest) -> ModuleType:
    """The module under test, as a ported program would import it: ``pulsar``."""
    return pulsar if request.param == "official" else pulsar_compat


@pytest.fixture
def client(pulsar_module: ModuleType, pulsar_broker: PulsarBroker) -> Iterator[Any]:
    """A client of the module under test on the embedded broker."""
    made = pulsar_module.Client(
        pulsar_broker.service_url, operation_timeout_seconds=10, logger=QUIET
    )
    yield made
    made.close()


@pytest.fixture(autouse=True)
def msgclient_logging_restored() -> Iterator[None]:
    """A pulsar_compat Client routes msgclient's loggers for the whole process, as the
    official client's logger does: put them back, so that later tests (which read logs
    through caplog, on the root logger) see them as before."""
    loggers = [logging.getLogger(name) for name in SOURCES]
    saved = [(lg, list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    yield
    for logger, handlers, level, propagate in saved:
        for handler in [h for h in logger.handlers if h not in handlers]:
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(level)
        logger.propagate = propagate
