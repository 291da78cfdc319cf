"""Hypothesis profiles of the codec fuzz tests (docs/fuzzing.md).

``ci`` (the default) is deterministic and small: a few thousand examples per codec, the
whole directory in about a minute. ``long`` (``HYPOTHESIS_PROFILE=long``) runs 100,000
examples per codec; it is for a separate run, not for CI. Each test file is one codec and
shares its profile's ``max_examples`` between its tests (``examples()`` in strategies.py).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Per-codec budgets; a test gets its share of them.
CI_EXAMPLES_PER_CODEC = 1_200
LONG_EXAMPLES_PER_CODEC = 100_000

_COMMON = settings(
    # Every example runs against a clock: a decoder that loops or crawls fails here.
    # Generous, as this machine's two cores are shared.
    deadline=2_000,
    # No example database: it would write .hypothesis/ into the work tree, and a failure
    # is replayed from the @reproduce_failure blob printed with it.
    database=None,
    print_blob=True,
    # Fuzz inputs are big on purpose, and some examples decompress up to the size limit.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "ci", parent=_COMMON, max_examples=CI_EXAMPLES_PER_CODEC, derandomize=True
)
settings.register_profile("long", parent=_COMMON, max_examples=LONG_EXAMPLES_PER_CODEC)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)

# A whole test (all its examples) must end within this: a hang fails instead of blocking.
TEST_TIMEOUT = 120 if PROFILE == "ci" else 4 * 3600


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))
