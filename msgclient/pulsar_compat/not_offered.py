"""Names of the official ``pulsar`` module that pulsar_compat does not offer, and why.

Looking one up (``pulsar_compat.MessageBatch``) raises AttributeError with the reason,
so a ported program fails at once, with the cause, not later with a half-working feature.
docs/pulsar_compat.md has the same list.
"""

from __future__ import annotations

_FUNCTIONS = "it belongs to the Pulsar Functions runtime, which runs inside a Pulsar cluster"

NOT_OFFERED: dict[str, str] = {
    "AuthenticationAthenz": "Athenz authentication is not implemented",
    "Context": _FUNCTIONS,
    "Function": _FUNCTIONS,
    "IdentitySerDe": _FUNCTIONS,
    "MessageBatch": "parsing a raw batch entry outside a consumer is not offered",
    "PickleSerDe": _FUNCTIONS,
    "SerDe": _FUNCTIONS,
    "functions": _FUNCTIONS,
}
