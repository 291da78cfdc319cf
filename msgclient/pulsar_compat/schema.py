"""``pulsar.schema``'s names (``from msgclient.pulsar_compat.schema import JsonSchema``):
msgclient.schema's, which encode and describe themselves as the official ones do. The
same names, so the list is msgclient.schema's own."""

from __future__ import annotations

from msgclient.schema import *  # noqa: F403
from msgclient.schema import __all__ as __all__
