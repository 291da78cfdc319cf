"""Cluster failover: which cluster a Client uses, and switching it at run time.

``Client(service_url)`` takes, as the official client does, a service URL, an
``AutoClusterFailover`` (probe the cluster in use every ``check_interval_ms``; after
``failover_threshold`` failed probes in a row switch to the first reachable secondary; back
to the primary after ``switch_back_threshold`` successful probes of it in a row), or a
``ServiceInfoProvider`` of the user's own that pushes updates. A switch drops every
connection, so every producer and consumer reconnects through a lookup on the new cluster
and resends what it had pending (the Java client's ``updateServiceUrl``).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import attrs

from msgclient.auth import Authentication
from msgclient.errors import InvalidConfigurationError
from msgclient.url import parse_service_url
from msgclient.validators import int_at_least, optional_authentication, optional_str

log = logging.getLogger(__name__)


def _service_url(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    parse_service_url(value)  # raises InvalidServiceUrlError naming what is wrong


@attrs.frozen
class ServiceInfo:
    """One cluster: its service URL, and the authentication and TLS trust to use there."""

    service_url: str = attrs.field(validator=_service_url)
    authentication: Authentication | None = attrs.field(
        default=None,
        validator=optional_authentication,  # never prints the value: a secret
    )
    tls_trust_certs_file_path: str | None = attrs.field(default=None, validator=optional_str)


class ServiceInfoProvider(ABC):
    """Tells a Client which cluster to use, and later which to switch to.

    The Client calls ``initial_service_info()`` once, then ``initialize(update)``:
    calling ``update(service_info)`` (from any thread) switches the client to that
    cluster. ``close()`` is called when the client closes.
    """

    @abstractmethod
    def initial_service_info(self) -> ServiceInfo: ...

    @abstractmethod
    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None: ...

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Stop what the provider runs in the background."""


def _secondaries(value: Iterable[ServiceInfo]) -> tuple[ServiceInfo, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidConfigurationError(
            f"secondary={value!r} is invalid: expected a list of ServiceInfo"
        )
    secondary = tuple(value)
    if not secondary:
        raise InvalidConfigurationError("secondary is empty: it needs at least one ServiceInfo")
    for index, info in enumerate(secondary):
        if not isinstance(info, ServiceInfo):
            raise InvalidConfigurationError(
                f"secondary[{index}]={info!r} is invalid: expected a ServiceInfo"
            )
    return secondary


def _is_service_info(_: Any, attribute: attrs.Attribute[ServiceInfo], value: object) -> None:
    if not isinstance(value, ServiceInfo):
        raise InvalidConfigurationError(
            f"{attribute.name}={value!r} is invalid: expected a ServiceInfo"
        )


@attrs.frozen
class AutoClusterFailover:
    """Use ``primary`` while it answers; fail over to the first reachable of ``secondary``
    (in order) after ``failover_threshold`` failed probes in a row, and come back after
    ``switch_back_threshold`` successful probes of the primary in a row. A probe is a TCP
    connect to the service URL, every ``check_interval_ms``."""

    primary: ServiceInfo = attrs.field(validator=_is_service_info)
    secondary: tuple[ServiceInfo, ...] = attrs.field(converter=_secondaries)
    check_interval_ms: int = attrs.field(default=5000, validator=int_at_least(1))
    failover_threshold: int = attrs.field(default=1, validator=int_at_least(1))
    switch_back_threshold: int = attrs.field(default=1, validator=int_at_least(1))


Probe = Callable[[ServiceInfo], Awaitable[bool]]
Switch = Callable[[ServiceInfo], None]


class ClusterFailover:
    """The probing task of an ``AutoClusterFailover``: ``start()`` on the client's loop,
    ``await close()`` when the client closes."""

    def __init__(self, policy: AutoClusterFailover, probe: Probe, switch: Switch) -> None:
        self._policy = policy
        self._probe = probe
        self._switch = switch
        self._current = policy.primary
        self._failures = 0  # failed probes of the cluster in use, in a row
        self._primary_successes = 0  # successful probes of the primary while away, in a row
        self._task: asyncio.Task[None] | None = None

    @property
    def current(self) -> ServiceInfo:
        return self._current

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="msgclient-cluster-failover"
        )

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        interval = self._policy.check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check()
            except Exception:  # a failing switch must not end the probing
                log.exception("cluster failover check failed; probing goes on")

    async def check(self) -> None:
        """One round of probes, and the switch they call for."""
        policy = self._policy
        if self._current is not policy.primary:
            if await self._probe(policy.primary):
                self._primary_successes += 1
                if self._primary_successes >= policy.switch_back_threshold:
                    log.warning("the primary cluster answers again: switching back to it")
                    self._use(policy.primary)
                return
            self._primary_successes = 0
        if await self._probe(self._current):
            self._failures = 0
            return
        self._failures += 1
        if self._failures < policy.failover_threshold:
            return
        for candidate in policy.secondary:
            if candidate is not self._current and await self._probe(candidate):
                log.warning(
                    "%s failed %d probe(s) in a row: failing over to %s",
                    self._current.service_url,
                    self._failures,
                    candidate.service_url,
                )
                self._use(candidate)
                return
        log.warning(
            "%s failed %d probe(s) in a row and no secondary cluster answers: staying",
            self._current.service_url,
            self._failures,
        )

    def _use(self, service: ServiceInfo) -> None:
        self._switch(service)
        self._current = service
        self._failures = 0
        self._primary_successes = 0
