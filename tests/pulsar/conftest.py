"""Fixtures of the Pulsar tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.loop_lag import LoopLag, measuring
from tests.pulsar.consume_helpers import LATE_MARGIN_S
from tests.pulsar.helpers import WireTap, tap_wire


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> WireTap:
    """What msgclient writes on its connections, decoded."""
    return tap_wire(monkeypatch)


@pytest.fixture
async def loop_lag() -> AsyncIterator[LoopLag]:
    """How late the loop ran during the test (tests/loop_lag.py), with LATE_MARGIN_S as
    the margin for what it cannot see (the broker's side)."""
    async with measuring(LATE_MARGIN_S) as lag:
        yield lag
