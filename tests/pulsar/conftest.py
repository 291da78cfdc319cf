"""Fixtures of the Pulsar tests."""

from __future__ import annotations

import pytest

from tests.pulsar.helpers import WireTap, tap_wire


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> WireTap:
    """What msgclient writes on its connections, decoded."""
    return tap_wire(monkeypatch)
