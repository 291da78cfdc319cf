"""Names of the official ``pulsar`` module that pulsar_compat does not offer, and why.

Looking one up (``pulsar_compat.CryptoKeyReader``) raises AttributeError with the reason,
so a ported program fails at once, with the cause, not later with a half-working feature.
docs/pulsar_compat.md has the same list.
"""

from __future__ import annotations

_ENCRYPTION = "end-to-end encryption is not implemented yet"
_FAILOVER = "cluster failover (ServiceInfo, AutoClusterFailover) is not implemented yet"
_FUNCTIONS = "it belongs to the Pulsar Functions runtime, which runs inside a Pulsar cluster"

NOT_OFFERED: dict[str, str] = {
    "AuthenticationAthenz": "Athenz authentication is not implemented",
    "AutoClusterFailover": _FAILOVER,
    "Context": _FUNCTIONS,
    "CryptoKeyReader": _ENCRYPTION,
    "EncryptionContext": _ENCRYPTION,
    "EncryptionKey": _ENCRYPTION,
    "Function": _FUNCTIONS,
    "IdentitySerDe": _FUNCTIONS,
    "MessageBatch": "parsing a raw batch entry outside a consumer is not offered",
    "PickleSerDe": _FUNCTIONS,
    "SerDe": _FUNCTIONS,
    "ServiceInfo": _FAILOVER,
    "ServiceInfoProvider": _FAILOVER,
    "functions": _FUNCTIONS,
}
