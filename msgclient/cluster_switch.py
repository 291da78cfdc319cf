"""The cluster a Client uses, and its switches to another at run time (docs/failover.md).

A switch comes from ``Client.update_service_info``, from an ``AutoClusterFailover``'s probes
(``core/network/cluster_failover.py`` decides when) or from a ``ServiceInfoProvider``'s
updates, which may arrive on any thread. Each one hands the backend the new cluster (it
drops every connection, so producers and consumers reconnect there) and gives the Client
the service URL and options it now uses.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any, Protocol

import attrs

from msgclient.contract import ProtocolBackend, SwitchableBackend
from msgclient.core.network.backoff import RetrySignal
from msgclient.core.network.cluster_failover import (
    AutoClusterFailover,
    ClusterFailover,
    ServiceInfo,
    ServiceInfoProvider,
)
from msgclient.errors import InvalidConfigurationError, InvalidServiceUrlError, MsgClientError
from msgclient.options import ClientOptions
from msgclient.url import ServiceUrl, parse_service_url

# The logger of msgclient.client, where this code was: docs/failover.md names it as where a
# refused provider update is logged, and a user's logging configuration may too.
log = logging.getLogger("msgclient.client")
# How long a ServiceInfoProvider's thread waits for its update to be applied on the loop.
_UPDATE_WAIT_S = 5.0


class SwitchedClient(Protocol):
    """What a switch changes on the Client: the URL and options of its cluster in use.
    (A protocol, not the Client itself: this module must not import the one that imports it.)"""

    service_url: ServiceUrl
    options: ClientOptions


def initial_service(
    service_url: str | AutoClusterFailover | ServiceInfoProvider, options: dict[str, Any]
) -> ServiceInfo:
    """The cluster a Client starts on, from its ``service_url`` argument and options; a
    bad ``service_url``, or options that a ServiceInfo sets instead, raise."""
    if isinstance(service_url, str):
        return ServiceInfo(
            service_url,
            options.get("authentication"),
            options.get("tls_trust_certs_file_path"),
        )
    if not isinstance(service_url, AutoClusterFailover | ServiceInfoProvider):
        raise InvalidServiceUrlError(
            f"service_url={service_url!r} is invalid: expected a str, an "
            "AutoClusterFailover or a ServiceInfoProvider"
        )
    for option in ("authentication", "tls_trust_certs_file_path"):
        if options.get(option) is not None:
            raise InvalidConfigurationError(
                f"option {option} is not taken with {type(service_url).__name__}: "
                "set it on each ServiceInfo"
            )
    if isinstance(service_url, AutoClusterFailover):
        return service_url.primary
    initial = service_url.initial_service_info()
    if not isinstance(initial, ServiceInfo):
        raise InvalidConfigurationError(
            f"{type(service_url).__name__}.initial_service_info() returned {initial!r}: "
            "expected a ServiceInfo"
        )
    return initial


def service_options(service: ServiceInfo) -> dict[str, Any]:
    """The client options a cluster's ServiceInfo sets."""
    return {
        "authentication": service.authentication,
        "tls_trust_certs_file_path": service.tls_trust_certs_file_path,
    }


class ClusterSwitch:
    """Switches ``client`` to another cluster: by hand (``switch_to``), or as the
    ``AutoClusterFailover`` or ``ServiceInfoProvider`` given to ``follow`` says.
    ``await close()`` stops following, when the client closes."""

    def __init__(
        self, client: SwitchedClient, backend: ProtocolBackend[Any], service: ServiceInfo
    ) -> None:
        self._client = client
        self._backend = backend
        self.service = service  # the cluster in use
        # Fired by every switch: what waits out a backoff against the old cluster retries
        # the new one at once (every Backoff of the client is made with it).
        self.retry_now = RetrySignal()
        self._closed = False
        self._failover: ClusterFailover | None = None
        self._provider: ServiceInfoProvider | None = None

    def follow(self, source: AutoClusterFailover | ServiceInfoProvider) -> None:
        """Switch from now on as ``source`` says: start an AutoClusterFailover's probes, or
        hand a ServiceInfoProvider the callback for its updates. Must run on the client's
        event loop; a backend that cannot switch, or a secondary it does not serve, raise."""
        backend = self._switchable()
        for info in source.secondary if isinstance(source, AutoClusterFailover) else ():
            if not backend.serves(parse_service_url(info.service_url)):
                raise InvalidServiceUrlError(
                    f"secondary cluster {info.service_url!r}: the client's protocol adapter "
                    f"(for {self._client.service_url.scheme}://) does not serve it"
                )
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            raise InvalidConfigurationError(
                f"a Client with {type(source).__name__} must be created on a running "
                "event loop: its cluster switches happen there"
            ) from None
        if isinstance(source, AutoClusterFailover):
            timeout = min(source.check_interval_ms, self._client.options.connection_timeout_ms)
            self._failover = ClusterFailover(
                source,
                lambda info: backend.probe(parse_service_url(info.service_url), timeout / 1000),
                self.switch_to,
            )
            self._failover.start()
        else:
            self._provider = source
            source.initialize(self._on_service_info_update)

    def _switchable(self) -> SwitchableBackend:
        if not isinstance(self._backend, SwitchableBackend):
            raise InvalidConfigurationError(
                "cluster failover is not offered for "
                f"{self._client.service_url.scheme}:// service URLs"
            )
        return self._backend

    def switch_to(self, service: ServiceInfo) -> None:
        """Use ``service``'s cluster now, on the client's loop; one the backend does not
        serve, or cannot use, raises and changes nothing."""
        backend = self._switchable()
        url = parse_service_url(service.service_url)
        if not backend.serves(url):
            raise InvalidServiceUrlError(
                f"{service.service_url!r}: the client's protocol adapter (for "
                f"{self._client.service_url.scheme}://) does not serve it"
            )
        options = attrs.evolve(self._client.options, **service_options(service))
        backend.switch_service(url, options)
        log.warning("switched to the cluster at %s", service.service_url)
        self._client.service_url, self._client.options, self.service = url, options, service
        self.retry_now.fire()  # what waits out a backoff against the old cluster: now

    def _on_service_info_update(self, service: ServiceInfo) -> None:
        """A ServiceInfoProvider's update, from any thread. The switch runs on the loop;
        from another thread this returns once it has (``service_info`` shows it, as the
        official client's callback), or after ``_UPDATE_WAIT_S`` if the loop is busy."""
        if not isinstance(service, ServiceInfo):
            raise InvalidConfigurationError(
                f"service info update {service!r} is invalid: expected a ServiceInfo"
            )
        if self._closed:
            return
        if _running_loop() is self._loop:
            self._apply_update(service)
            return
        applied: concurrent.futures.Future[None] = concurrent.futures.Future()

        def apply() -> None:
            try:
                self._apply_update(service)
            finally:
                applied.set_result(None)

        self._loop.call_soon_threadsafe(apply)
        try:
            applied.result(_UPDATE_WAIT_S)
        except concurrent.futures.TimeoutError:
            log.warning(
                "the switch to %s is still queued on the client's loop", service.service_url
            )

    def _apply_update(self, service: ServiceInfo) -> None:
        if self._closed:
            return
        try:
            self.switch_to(service)
        except MsgClientError:
            # The provider's thread is not waiting for an answer: the error is logged.
            log.exception("service info update to %s refused", service.service_url)

    async def close(self) -> None:
        """Stop following: end the failover's probes, close the provider; updates that
        still come are ignored."""
        self._closed = True
        if self._failover is not None:
            await self._failover.close()
        if self._provider is not None:
            self._provider.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
