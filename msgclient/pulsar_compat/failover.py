"""Cluster failover with the official names: ServiceInfo, ServiceInfoProvider,
AutoClusterFailover, as ``Client(service_url=...)`` takes them.

The checks and their ValueError messages are the official client's; underneath are
msgclient's own (``msgclient.core.network.cluster_failover``), which probe and switch.
"""

from __future__ import annotations

from collections.abc import Callable

from msgclient.core.network import cluster_failover as core
from msgclient.pulsar_compat.arguments import check_type, check_type_or_none
from msgclient.pulsar_compat.authentication import Authentication

_PROVIDER_ANSWER = "Expected a pulsar.ServiceInfo or _pulsar.ServiceInfo instance"


class ServiceInfo:
    """``ServiceInfo(service_url, authentication=None, tls_trust_certs_file_path=None)``:
    one cluster, with the authentication and TLS trust to use there."""

    def __init__(
        self,
        service_url: str,
        authentication: Authentication | None = None,
        tls_trust_certs_file_path: str | None = None,
    ) -> None:
        check_type(str, service_url, "service_url")
        check_type_or_none(Authentication, authentication, "authentication")
        check_type_or_none(str, tls_trust_certs_file_path, "tls_trust_certs_file_path")
        self._service_url = service_url
        self._authentication = authentication
        self._tls_trust_certs_file_path = tls_trust_certs_file_path

    @property
    def service_url(self) -> str:
        return self._service_url

    @property
    def use_tls(self) -> bool:
        return self._service_url.lower().startswith("pulsar+ssl://")

    @property
    def tls_trust_certs_file_path(self) -> str | None:
        return self._tls_trust_certs_file_path

    def __repr__(self) -> str:
        return (
            "ServiceInfo("
            f"service_url={self.service_url!r}, "
            f"use_tls={self.use_tls!r}, "
            f"tls_trust_certs_file_path={self.tls_trust_certs_file_path!r})"
        )

    def core(self) -> core.ServiceInfo:
        """msgclient's ServiceInfo (a bad service URL raises InvalidServiceUrlError)."""
        auth = self._authentication
        return core.ServiceInfo(
            self._service_url, None if auth is None else auth.auth, self._tls_trust_certs_file_path
        )


class ServiceInfoProvider:
    """Subclass it: ``initial_service_info()`` gives the first cluster; ``initialize(update)``
    receives the callback to call (from any thread) with the next ``ServiceInfo``;
    ``close()`` is called when the client closes."""

    def initial_service_info(self) -> ServiceInfo:
        raise NotImplementedError

    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop background work and release resources."""
        return None


class AutoClusterFailover:
    """``AutoClusterFailover(primary, secondary, check_interval_ms=5000,
    failover_threshold=1, switch_back_threshold=1)``, checked as the official one."""

    def __init__(
        self,
        primary: ServiceInfo,
        secondary: list[ServiceInfo],
        check_interval_ms: int = 5000,
        failover_threshold: int = 1,
        switch_back_threshold: int = 1,
    ) -> None:
        check_type(ServiceInfo, primary, "primary")
        check_type(list, secondary, "secondary")
        check_type(int, check_interval_ms, "check_interval_ms")
        check_type(int, failover_threshold, "failover_threshold")
        check_type(int, switch_back_threshold, "switch_back_threshold")
        if not secondary:
            raise ValueError("Argument secondary is expected to contain at least one ServiceInfo")
        for index, service_info in enumerate(secondary):
            if not isinstance(service_info, ServiceInfo):
                raise ValueError(
                    f"Argument secondary[{index}] is expected to be of type 'ServiceInfo' "
                    f"and not '{type(service_info).__name__}'"
                )
        if check_interval_ms <= 0:
            raise ValueError("Argument check_interval_ms is expected to be greater than 0")
        if failover_threshold <= 0:
            raise ValueError("Argument failover_threshold is expected to be greater than 0")
        if switch_back_threshold <= 0:
            raise ValueError("Argument switch_back_threshold is expected to be greater than 0")
        self.primary = primary
        self.secondary = list(secondary)
        self.check_interval_ms = check_interval_ms
        self.failover_threshold = failover_threshold
        self.switch_back_threshold = switch_back_threshold

    def __repr__(self) -> str:
        return (
            "AutoClusterFailover("
            f"primary={self.primary!r}, "
            f"secondary={self.secondary!r}, "
            f"check_interval_ms={self.check_interval_ms!r}, "
            f"failover_threshold={self.failover_threshold!r}, "
            f"switch_back_threshold={self.switch_back_threshold!r})"
        )

    def core(self) -> core.AutoClusterFailover:
        return core.AutoClusterFailover(
            self.primary.core(),
            [info.core() for info in self.secondary],
            self.check_interval_ms,
            self.failover_threshold,
            self.switch_back_threshold,
        )


class ProvidedServices(core.ServiceInfoProvider):
    """A user's ServiceInfoProvider (official names) as msgclient's."""

    def __init__(self, provider: ServiceInfoProvider) -> None:
        self._provider = provider

    def initial_service_info(self) -> core.ServiceInfo:
        return _core_info(self._provider.initial_service_info())

    def initialize(self, on_service_info_update: Callable[[core.ServiceInfo], None]) -> None:
        def update(service_info: ServiceInfo) -> None:
            on_service_info_update(_core_info(service_info))

        self._provider.initialize(update)

    def close(self) -> None:
        self._provider.close()


def _core_info(service_info: object) -> core.ServiceInfo:
    if not isinstance(service_info, ServiceInfo):
        raise ValueError(_PROVIDER_ANSWER)  # the official client's words
    return service_info.core()
